"""The shared compute gate: urgent work goes first, a claim always ends, nobody waits forever."""
import threading
import time

import pytest

from foresay.engine.compute_gate import ComputeGate


def background(gate, steps, done, stopped_at):
    """Speculative work: steps until told to yield (as PredGen's extension does)."""
    for step in range(steps):
        if gate.should_yield():
            stopped_at.append(step)
            break
        time.sleep(0.002)
    done.set()


def test_background_work_yields_to_an_urgent_claim_between_its_steps():
    gate = ComputeGate()
    assert not gate.should_yield()
    done, stopped_at = threading.Event(), []
    with gate.claim():  # taken when the decode is asked for: it may still wait for its thread
        worker = threading.Thread(target=background, args=(gate, 1000, done, stopped_at))
        worker.start()
        assert done.wait(2.0)
    assert stopped_at == [0]  # not one step while the urgent work held or waited
    assert not gate.should_yield()
    done.clear()
    background(gate, 5, done, stopped_at)
    assert stopped_at == [0]  # free again: it ran all its steps


def test_a_claim_is_released_when_the_urgent_work_raises():
    gate = ComputeGate()
    with pytest.raises(RuntimeError):
        with gate.claim():
            raise RuntimeError("the decode failed")
    assert not gate.should_yield()


def test_overlapping_claims_from_two_threads_never_deadlock_and_hold_until_the_last_ends():
    gate = ComputeGate()
    first_in, second_in, release_first, release_second = (threading.Event() for _ in range(4))

    def urgent(entered, release):
        with gate.claim():
            entered.set()
            release.wait(2.0)

    a = threading.Thread(target=urgent, args=(first_in, release_first))
    b = threading.Thread(target=urgent, args=(second_in, release_second))
    a.start()
    b.start()
    assert first_in.wait(2.0) and second_in.wait(2.0)  # neither waits for the other
    release_first.set()
    a.join(2.0)
    assert gate.should_yield()  # the second claim is still open
    release_second.set()
    b.join(2.0)
    assert not a.is_alive() and not b.is_alive() and not gate.should_yield()

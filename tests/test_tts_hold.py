import threading

import pytest

from foresay.engine.tts.errors import InvalidTtsConfig
from foresay.engine.tts.hold import FixedHold, HoldGate, UnderrunFreeHold


def test_underrun_free_hold_grows_with_slowness_and_text_length():
    policy = UnderrunFreeHold(margin_s=0.4, chars_per_second=10.0)
    assert policy.target_seconds("x" * 100, rtf=0.5) == pytest.approx(0.4)
    # rtf 2 on 10 s of text: B >= T (rtf - 1) / rtf = 5 s, plus the margin
    assert policy.target_seconds("x" * 100, rtf=2.0) == pytest.approx(5.4)
    assert policy.target_seconds("x" * 200, rtf=2.0) > policy.target_seconds("x" * 100, rtf=2.0)


@pytest.mark.parametrize("make", [lambda: FixedHold(0), lambda: UnderrunFreeHold(margin_s=-1),
                                  lambda: UnderrunFreeHold(chars_per_second=0), lambda: HoldGate(-1)])
def test_bad_hold_settings_are_refused(make):
    with pytest.raises(InvalidTtsConfig):
        make()


def _blocked_waiter(gate: HoldGate, ready_s: float):
    result = {}
    holding = threading.Event()
    thread = threading.Thread(target=lambda: result.setdefault("go_on", gate.wait(ready_s, on_hold=holding.set)))
    thread.start()
    assert holding.wait(5)
    return thread, result


def test_gate_lets_work_through_below_target_and_holds_at_it_until_released():
    gate = HoldGate(1.0)
    assert gate.wait(0.5) is True
    thread, result = _blocked_waiter(gate, 1.0)
    assert gate.holding and thread.is_alive()
    gate.release()
    thread.join(5)
    assert result["go_on"] is True and not gate.holding
    assert gate.wait(99.0) is True  # released: never holds again


def test_cancel_wakes_a_held_worker_and_tells_it_to_stop():
    gate = HoldGate(0.0)
    thread, result = _blocked_waiter(gate, 0.0)
    gate.cancel()
    thread.join(5)
    assert result["go_on"] is False
    assert gate.wait(0.0) is False

"""The preparation machinery, driven by a scripted job: hold, stream, cancel, failures, bound."""
import asyncio
import threading

import numpy as np
import pytest

from foresay.engine.tts.errors import PreparationCancelled, SynthesisFailed
from foresay.engine.tts.pool import HeldPreparations
from foresay.engine.tts.prepared import AlreadyStreamed, Prepared
from tts_support import collect, run_async

RATE = 1000


class ScriptedJob:
    """Emits `chunks` chunks of 0.1 s, chunk i filled with the value i; may fail after some."""

    def __init__(self, chunks: int, fail_after: int | None = None) -> None:
        self.chunks = chunks
        self.fail_after = fail_after
        self.made = 0

    def run(self, sink) -> None:
        for i in range(self.chunks):
            if not sink.proceed():
                return
            if i == self.fail_after:
                raise ValueError("scripted failure")
            sink.emit(np.full(100, i, dtype=np.float32), RATE, (i, i + 1), 0)
            self.made += 1


@run_async
async def test_holds_at_the_target_then_streams_everything_in_order():
    job = ScriptedJob(10)
    prepared = Prepared("0123456789", job, hold_target_s=0.3, turn_id=7)
    await prepared.ready()
    assert prepared.holding and job.made == 3
    await asyncio.sleep(0.02)
    assert job.made == 3  # held: nothing more is synthesized
    chunks = await collect(prepared)
    assert [int(c.samples[0]) for c in chunks] == list(range(10))
    assert all(c.turn_id == 7 and c.sample_rate == RATE and c.samples.dtype == np.float32 for c in chunks)
    await prepared.wait_done()
    timing = prepared.timing()
    assert len(timing.chunks) == 10 and timing.audio_s == pytest.approx(1.0)
    assert timing.ttfc_cold_s >= 0 and timing.ttfc_stream_s >= 0 and timing.rtf >= 0


@run_async
async def test_cancel_stops_synthesis_and_the_preparation_never_plays():
    job = ScriptedJob(10)
    prepared = Prepared("x", job, hold_target_s=0.2)
    await prepared.ready()
    prepared.cancel()
    await prepared.wait_done()
    assert job.made == 2
    with pytest.raises(PreparationCancelled):
        await collect(prepared)


@run_async
async def test_cancel_while_streaming_ends_the_stream():
    prepared = Prepared("x", ScriptedJob(1000), hold_target_s=0.1)
    got = []
    async for chunk in prepared.stream():
        got.append(chunk)
        if len(got) == 3:
            prepared.cancel()
    await prepared.wait_done()
    assert len(got) == 3


@run_async
async def test_stream_is_taken_once():
    prepared = Prepared("x", ScriptedJob(2), hold_target_s=1.0)
    await collect(prepared)
    with pytest.raises(AlreadyStreamed):
        await collect(prepared)


@run_async
async def test_a_failing_job_raises_a_user_error_from_stream():
    prepared = Prepared("x", ScriptedJob(5, fail_after=2), hold_target_s=10.0)
    with pytest.raises(SynthesisFailed, match="scripted failure"):
        await collect(prepared)


def test_prepare_needs_a_running_event_loop():
    with pytest.raises(SynthesisFailed, match="event loop"):
        Prepared("x", ScriptedJob(1), hold_target_s=1.0)


@run_async
async def test_the_bound_cancels_the_oldest_held_preparation_first():
    pool = HeldPreparations(2)
    first, second, third = (Prepared(str(i), ScriptedJob(5), hold_target_s=0.1) for i in range(3))
    assert pool.add(first) == [] and pool.add(second) == []
    assert pool.add(third) == [first]
    assert first.cancelled and not second.cancelled
    await collect(second)  # streamed: no longer held, does not count
    fourth = Prepared("4", ScriptedJob(5), hold_target_s=0.1)
    assert pool.add(fourth) == [] and pool.held() == [third, fourth]
    pool.cancel_all()
    for p in (first, second, third, fourth):
        await p.wait_done()


class PausingJob(ScriptedJob):
    """A ScriptedJob whose worker stops after its first chunk until `go` is set, so the test, not
    the thread scheduler, decides what happens before the second chunk."""

    def __init__(self, chunks: int) -> None:
        super().__init__(chunks)
        self.go = threading.Event()

    def run(self, sink) -> None:
        for i in range(self.chunks):
            if i == 1:
                self.go.wait(5)
            if not sink.proceed():
                return
            sink.emit(np.full(100, i, dtype=np.float32), RATE, (i, i + 1), 0)
            self.made += 1


@run_async
async def test_a_stream_closed_early_cancels_the_rest():
    # Released by stream(), a free-running job could make all 1000 chunks before aclose() runs.
    job = PausingJob(1000)
    prepared = Prepared("x", job, hold_target_s=0.1)
    stream = prepared.stream()
    await stream.__anext__()
    await stream.aclose()
    job.go.set()
    await prepared.wait_done()
    assert prepared.cancelled and job.made < 1000

"""A preparation: synthesis running ahead in a worker thread, held, then streamed or cancelled.

The worker side (`ChunkSink`) hands chunks over and asks, between steps, whether it may go on;
the event-loop side (`Prepared`) streams them, releases the hold, or cancels. Chunks cross the
thread boundary through `loop.call_soon_threadsafe` only."""
from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from foresay.engine.errors import ForesayError
from foresay.engine.events import AudioChunk
from foresay.engine.tts.errors import PreparationCancelled, SynthesisFailed
from foresay.engine.tts.hold import HoldGate
from foresay.engine.tts.timing import ChunkTiming, SynthesisTiming


class AlreadyStreamed(ForesayError):
    """`stream()` was called a second time on one preparation."""


class SynthesisJob(Protocol):
    """An engine's synthesis of one text; runs in the worker thread, talks only to the sink."""

    def run(self, sink: ChunkSink) -> None: ...


@dataclass(frozen=True)
class _Failure:
    error: BaseException


_END = object()
_worker_ids = itertools.count(1)


class ChunkSink:
    """The worker's side of a preparation."""

    def __init__(self, prepared: Prepared) -> None:
        self._prepared = prepared
        self._gate = prepared._gate
        self.ready_s = 0.0  # seconds of audio handed over so far
        self._index = 0
        self._mark = time.perf_counter()
        self._idle_s = 0.0

    @property
    def cancelled(self) -> bool:
        return self._gate.cancelled

    @property
    def released(self) -> bool:
        """True once the audio is wanted now (stream() was called)."""
        return self._gate.released

    @contextmanager
    def idle(self):
        """Time spent inside does not count as synthesis (holds, waiting for a shared model)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self._idle_s += time.perf_counter() - start

    def emit(self, samples: np.ndarray, sample_rate: int, span: tuple[int, int], sentence_index: int) -> None:
        samples = np.ascontiguousarray(samples, dtype=np.float32).reshape(-1)
        if samples.size == 0 or self.cancelled:
            return
        now = time.perf_counter()
        compute = max(0.0, now - self._mark - self._idle_s)
        self._mark, self._idle_s = now, 0.0
        ready_at = time.monotonic()
        audio_s = samples.size / sample_rate
        self._prepared._chunk_timings.append(ChunkTiming(self._index, audio_s, compute, ready_at))
        self._index += 1
        self.ready_s += audio_s
        self._prepared._post(AudioChunk(
            turn_id=self._prepared.turn_id, t=ready_at, samples=samples, sample_rate=sample_rate,
            span=span, sentence_index=sentence_index))

    def would_hold(self, ready_s: float) -> bool:
        """Whether `ready_s` seconds of audio reach the hold point (to finish decoding before it)."""
        return self._gate.reached(ready_s)

    def proceed(self) -> bool:
        """Between steps: blocks while the prepared amount is ready and held; False once cancelled."""
        with self.idle():
            return self._gate.wait(self.ready_s, on_hold=self._prepared._signal_ready)


class Prepared:
    """Audio for one text, synthesized ahead. Create it through an engine's `prepare()`, from a
    running event loop; use `stream()`, `cancel()`, `ready()`, `timing()` from that loop."""

    def __init__(self, text: str, job: SynthesisJob, hold_target_s: float, *, turn_id: int = 0,
                 engine_name: str = "tts", on_finished: Callable[[SynthesisTiming], None] | None = None) -> None:
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            raise SynthesisFailed("prepare() must be called from a running asyncio event loop") from None
        self.text = text
        self.turn_id = turn_id
        self._engine_name = engine_name
        self._on_finished = on_finished
        self._gate = HoldGate(hold_target_s)
        self._queue: asyncio.Queue = asyncio.Queue()
        self._ready = asyncio.Event()
        self._done = asyncio.Event()
        self._chunk_timings: list[ChunkTiming] = []
        self._prepared_at = time.monotonic()
        self._stream_started_at: float | None = None
        self._first_delivered_at: float | None = None
        self._streamed = False
        self._cancelled = False
        self._thread = threading.Thread(target=self._work, args=(job,), daemon=True,
                                        name=f"{engine_name}-prepare-{next(_worker_ids)}")
        self._thread.start()

    # --- worker thread ---------------------------------------------------------------------

    def _work(self, job: SynthesisJob) -> None:
        try:
            job.run(ChunkSink(self))
            outcome: object = _END
        except BaseException as exc:  # handed to stream(), which raises it in the loop
            outcome = _Failure(exc)
        self._post(outcome)
        self._call(self._ready.set)
        self._call(self._done.set)
        if self._on_finished is not None and not self._gate.cancelled:
            self._on_finished(self.timing())

    def _post(self, item: object) -> None:
        self._call(self._queue.put_nowait, item)

    def _signal_ready(self) -> None:
        self._call(self._ready.set)

    def _call(self, fn, *args) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: nobody is left to hear it
            pass

    # --- event loop --------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def is_held(self) -> bool:
        """Prepared (or preparing) and neither streamed nor cancelled."""
        return not (self._streamed or self._cancelled)

    @property
    def holding(self) -> bool:
        """True while synthesis is paused at the hold point."""
        return self._gate.holding

    @property
    def hold_target_s(self) -> float:
        return self._gate.target_s

    async def ready(self) -> None:
        """Returns once the prepared amount is ready (or synthesis ended, or stream() began)."""
        await self._ready.wait()

    async def wait_done(self) -> None:
        """Returns once the worker thread has finished (after the last chunk, or a cancel)."""
        await self._done.wait()

    def timing(self) -> SynthesisTiming:
        return SynthesisTiming(self._prepared_at, tuple(self._chunk_timings),
                               self._stream_started_at, self._first_delivered_at)

    async def stream(self) -> AsyncIterator[AudioChunk]:
        """Yields the held chunks at once, then the rest as synthesis resumes. Raises
        PreparationCancelled if cancelled before; ends quietly if cancelled while streaming."""
        if self._streamed:
            raise AlreadyStreamed("stream() may be called once per preparation; prepare the text again")
        if self._cancelled:
            raise PreparationCancelled(f"this preparation was cancelled; it must not play: {self.text[:60]!r}")
        self._streamed = True
        self._stream_started_at = time.monotonic()
        self._gate.release()
        self._ready.set()
        ended = False
        try:
            while True:
                item = await self._queue.get()
                if self._cancelled or item is _END:
                    ended = True
                    return
                if isinstance(item, _Failure):
                    ended = True
                    raise _as_user_error(item.error, self._engine_name)
                if self._first_delivered_at is None:
                    self._first_delivered_at = time.monotonic()
                yield item
        finally:
            if not ended:  # the consumer stopped early: nobody will play the rest
                self.cancel()

    def cancel(self) -> None:
        """Stops synthesis and drops every chunk; idempotent."""
        if self._cancelled:
            return
        self._cancelled = True
        self._gate.cancel()
        while not self._queue.empty():
            self._queue.get_nowait()
        self._queue.put_nowait(_END)


def _as_user_error(error: BaseException, engine: str) -> BaseException:
    if isinstance(error, ForesayError):
        return error
    failure = SynthesisFailed(f"{engine} synthesis failed: {type(error).__name__}: {error}")
    failure.__cause__ = error
    return failure

"""The ASR stage on the event loop: audio in, PartialTranscript / FinalTranscript out.

Model work runs in one dedicated worker thread (the transcriber is not thread-safe and every
call to it happens there, in order). Hops are ticks of a fixed cadence; a tick that arrives
while a hop is still decoding is skipped, and the next hop decodes all audio received in
between (coalescing), so work never queues up. The final decode always runs, after any hop in
flight.
"""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from foresay.engine.asr.backends import AsrBackend
from foresay.engine.asr.errors import AsrError
from foresay.engine.asr.streaming import StreamingConfig, StreamingTranscriber
from foresay.engine.events import Event, FinalTranscript, PartialTranscript


class StreamingAsr:
    def __init__(self, backend: AsrBackend, emit: Callable[[Event], None],
                 config: StreamingConfig = StreamingConfig()) -> None:
        self.backend, self.emit, self.config = backend, emit, config
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="foresay-asr")
        self._transcriber: StreamingTranscriber | None = None
        self._pending: list[np.ndarray] = []
        self._hops: asyncio.Task | None = None
        self.hops_run = 0
        self.hops_skipped = 0

    async def warmup(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self.backend.warmup)

    def start_turn(self, turn_id: int, t: float, history: str = "") -> None:
        """Begin an utterance whose first sample is at monotonic time `t`."""
        if self._hops is not None:
            raise AsrError("a turn is already being transcribed; end it first")
        self._transcriber = StreamingTranscriber(self.backend, self.config, turn_id=turn_id,
                                                 start_time=t, history=history)
        self._pending = []
        self._hops = asyncio.get_running_loop().create_task(self._hop_loop())

    def feed(self, samples: np.ndarray) -> None:
        """Audio of the current turn (called on the event loop; copies are cheap)."""
        if self._transcriber is None:
            raise AsrError("audio arrived outside a turn; call start_turn first")
        self._pending.append(np.array(samples, dtype=np.float32, copy=True))

    async def end_turn(self) -> FinalTranscript:
        if self._transcriber is None or self._hops is None:
            raise AsrError("no turn is being transcribed")
        self._hops.cancel()
        try:
            await self._hops
        except asyncio.CancelledError:
            pass
        transcriber, audio = self._transcriber, self._take_audio()
        self._hops = self._transcriber = None

        def final() -> FinalTranscript:
            transcriber.append(audio)
            return transcriber.finish()

        event = await asyncio.get_running_loop().run_in_executor(self._executor, final)
        self.emit(event)
        return event

    async def cancel_turn(self) -> None:
        """Drop the current turn without a final transcript (e.g. the speech was a false start)."""
        if self._hops is not None:
            self._hops.cancel()
            try:
                await self._hops
            except asyncio.CancelledError:
                pass
        self._hops = self._transcriber = None
        self._pending = []

    def close(self) -> None:
        """Stop the worker thread (after the last turn ended; waits for a decode in flight)."""
        if self._hops is not None:
            self._hops.cancel()
        self._executor.shutdown(wait=True, cancel_futures=True)

    def _take_audio(self) -> np.ndarray:
        audio = np.concatenate(self._pending) if self._pending else np.zeros(0, np.float32)
        self._pending = []
        return audio

    async def _hop_loop(self) -> None:
        loop = asyncio.get_running_loop()
        hop = self.config.hop_ms / 1000
        transcriber = self._transcriber
        next_tick = loop.time() + hop
        while True:
            await asyncio.sleep(max(0.0, next_tick - loop.time()))
            if self._pending:
                audio = self._take_audio()

                def step() -> PartialTranscript:
                    transcriber.append(audio)
                    return transcriber.hop()

                partial = await loop.run_in_executor(self._executor, step)
                self.hops_run += 1
                self.emit(partial)
            late = loop.time() - next_tick
            missed = int(late // hop) if late > 0 else 0
            self.hops_skipped += missed
            next_tick += (missed + 1) * hop

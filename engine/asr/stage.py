"""The ASR stage: UserAudio in, PartialTranscript / FinalTranscript out.

Model work runs in the stage's worker thread (the transcriber is not thread-safe and every
call to it happens there, in order); each decode claims the shared compute gate, so that
speculative LLM work on the same processor yields to it. Hops are ticks of a fixed cadence; a tick that arrives
while a hop is still decoding is skipped, and the next hop decodes all audio received in
between (coalescing), so work never queues up. Ending a turn detaches it at once: audio of the
next turn, arriving while the previous final still decodes, starts a transcriber of its own and
is never mixed into the old one.

The pause decode is the final. At a voice pause (VoicePaused) the whole turn is decoded at once
(`PausedTranscript`), the decode begun already once the voice had been quiet
`StreamingConfig.pause_decode_after_ms` (its transcript held until the pause is confirmed,
dropped if the voice comes back first); when the turn then ends without new voice, that transcript is the final:
the one `TurnEnded.heard_revision` names, or the one still decoding when the end came before it
(awaited, not decoded again). Only a turn whose last words no pause decode heard is decoded after
its end. The endpointer's voice test can miss a quiet last word; when the silence goes on, the
turn is decoded once more with the silence's audio (`StreamingConfig.late_look_ms`), and a look
that hears more words is sent as the newest PausedTranscript (and is the final if the turn ends
while it decodes). A steadiness check of the pause transcript (`PauseRechecked`) runs only when
its decode was cheap (`StreamingConfig.recheck_max_ms`): on a real Whisper it would double the
wait.

The work in the voice's silences (the pause decode, its check and its second look) is written in
`turn_decodes.SilenceDecodes`, part of this class.

As a pipeline stage it consumes UserAudio (the first block of a turn starts it), TurnEnded
(the final transcript follows) and TurnClosed (the conversation so far becomes the prompt, so
names and words of earlier turns are recognized).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Callable

import numpy as np

from foresay.engine.asr.backends import AsrBackend
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.asr.streaming import StreamingConfig, StreamingTranscriber
from foresay.engine.asr.turn_decodes import EndedTurn, PauseDecode, SilenceDecodes
from foresay.engine.compute_gate import ComputeGate
from foresay.engine.errors import ForesayError
from foresay.engine.events import (Event, FinalTranscript, PartialTranscript,
                                   StatusMessage, TurnClosed, TurnEnded, TurnResumed, UserAudio, VoicePaused, VoiceResumed)
from foresay.engine.stage import Stage

log = logging.getLogger(__name__)


# A hop falling due once the voice has been quiet this long waits for the voice (or for the pause,
# 0.1 s into the silence): begun then, it would hear no new word and hold up the pause decode.
HOP_QUIET_S = 0.05


class StreamingAsr(SilenceDecodes, Stage):
    consumes = (UserAudio, VoicePaused, VoiceResumed, TurnEnded, TurnResumed, TurnClosed)
    name = "speech recognizer"
    worker = "asr"

    def __init__(self, backend: AsrBackend, emit: Callable[[Event], None],
                 config: StreamingConfig = StreamingConfig(), context_turns: int = 2,
                 gate: ComputeGate | None = None) -> None:
        """`context_turns`: how many earlier turns (user and reply text) prompt the recognizer;
        `gate`: the processor shared with other stages (each decode claims it)."""
        super().__init__(emit)
        self.backend, self.config, self.gate = backend, config, gate
        self.context_turns = context_turns
        self._transcriber: StreamingTranscriber | None = None
        self._pending: list[np.ndarray] = []
        self._hops: asyncio.Task | None = None
        self._context: list[str] = []
        self._previews: dict[int, tuple[StreamingTranscriber, FinalTranscript, int]] = {}  # + revision
        self._pause: PauseDecode | None = None  # the newest pause decode of the open turn
        self._early: PauseDecode | None = None  # one begun in the silence, before the pause is confirmed
        self._fed_samples = 0  # samples of the open turn handed to its transcriber or waiting
        self._finished: EndedTurn | None = None  # the last turn ended, kept for a resume
        self._paused = False  # the voice paused in the current turn: hops wait
        self._voiced_until: float | None = None  # the endpointer's last voiced frame in the turn
        self._pending_samples = 0
        self._hop_now = False  # much audio waits: the hop loop decodes without waiting for its tick
        # At most a third of the window (2 s at most) waits for a decode: more could not be heard.
        self._catch_up_samples = int(SAMPLE_RATE * min(2.0, backend.window_seconds / 3))
        self.hops_run = 0
        self.hops_skipped = 0

    # --- the stage contract ------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        if isinstance(event, UserAudio):
            if self._transcriber is None and self._finished is not None and self._finished.turn_id == event.turn_id:
                self._resume(TurnResumed(event.turn_id, event.t))  # a turn declared ended goes on
            if self._transcriber is None or self._transcriber.turn_id != event.turn_id:
                if self._transcriber is not None:  # a turn that never ended: finish it first
                    self._finish_in_background(self._detach())
                self._start_turn(event.turn_id, event.t)
            self._feed(event.samples)
            self._voiced_until = event.voiced_until_t
            self._watch_the_silence()
            self._maybe_look_again()
        elif isinstance(event, VoicePaused):
            if self._transcriber is not None and self._transcriber.turn_id == event.turn_id:
                self._paused = True  # no hops while the silence lasts: the preview stands
                self._begin_pause(event)
        elif isinstance(event, VoiceResumed):
            self._paused = False
            if self._pause is not None:
                self._pause.stale = True  # the words go on: a pause decode not yet begun is not needed
        elif isinstance(event, TurnEnded):
            if self._transcriber is None or self._transcriber.turn_id != event.turn_id:
                # no audio ever reached this turn: its final transcript is empty, said at once
                self.emit(FinalTranscript(event.turn_id, event.t, ""))
                return
            self._end(event)
        elif isinstance(event, TurnResumed):
            self._resume(event)
        elif isinstance(event, TurnClosed):
            if event.user_text.strip():
                self._context = (self._context + [event.user_text, event.reply_text])[-2 * self.context_turns:]

    def _end(self, event: TurnEnded) -> None:
        """The turn ended: its final is the pause decode's when that heard every voiced sample
        (out already, or still decoding), else a decode now."""
        self._drop_early()
        preview = self._previews.pop(event.turn_id, None)
        pause, self._pause = self._pause, None
        detached = self._detach()
        pause = pause if pause is not None and pause.transcriber is detached[0] else None
        heard = preview is not None and preview[0] is detached[0] and (
            event.heard_revision == preview[2] or event.last_voiced_t <= preview[1].t + 1e-3)
        decoding = (not heard and pause is not None and not pause.task.done()
                    and event.last_voiced_t <= pause.until_t + 1e-3)
        if not (heard or decoding):
            self._finish_in_background(detached, pause)
            return
        detached[1].cancel()  # every voiced sample is in the pause decode: ending costs no decode
        ended = self._finished = EndedTurn(event.turn_id, detached[0], detached[2], pause)
        if decoding:  # still running: it is the final
            self.spawn(self._final_from_pause(ended))
        elif pause is not None and pause.late is not None and not pause.late.done():
            self.spawn(self._final_after_look(ended, pause.late, preview[1]))
        else:
            self.emit(preview[1])

    async def start(self) -> None:
        await self.run_in_worker(self.backend.warmup)

    async def cancel(self) -> None:
        """Drop the open turn without a final transcript, and every final under way."""
        self._drop_early()
        self._transcriber = self._hops = None
        self._pending, self._pending_samples = [], 0
        await super().cancel()

    async def caught_up(self) -> None:
        while (self._transcriber is not None and not self._paused
               and self._pending_samples >= self._catch_up_samples):
            self._hop_now = True
            await asyncio.sleep(0.005)

    # --- inside ---------------------------------------------------------------------------------

    def _start_turn(self, turn_id: int, t: float) -> None:
        """Begin an utterance whose first sample is at monotonic time `t`."""
        self._transcriber = StreamingTranscriber(self.backend, self.config, turn_id=turn_id,
                                                 start_time=t, history=" ".join(self._context))
        self._pending, self._pending_samples, self._fed_samples = [], 0, 0
        self._paused = False
        self._pause = None
        self._drop_early()
        self._hops = self.spawn(self._hop_loop(self._transcriber), lasting=True)

    def _feed(self, samples: np.ndarray) -> None:
        """Audio of the current turn (on the event loop; copies are cheap)."""
        self._pending.append(np.array(samples, dtype=np.float32, copy=True))
        self._pending_samples += len(samples)
        self._fed_samples += len(samples)
        if self._pending_samples >= self._catch_up_samples:
            self._hop_now = True  # a decode now, before the window could overflow

    async def _decode(self, work):
        """`work()` on the worker thread, claiming the shared processor from now until it is done."""
        with self.gate.claim() if self.gate is not None else contextlib.nullcontext():
            return await self.run_in_worker(work)

    def _detach(self) -> tuple[StreamingTranscriber, asyncio.Task, np.ndarray]:
        """Take the current turn off the stage, synchronously: later audio belongs to the next."""
        detached = (self._transcriber, self._hops, self._take_audio())
        self._transcriber = self._hops = None
        return detached

    def _finish_in_background(self, detached, pause: PauseDecode | None = None) -> None:
        """The final decode after the end (its audio goes to the transcriber there, not to a resume)."""
        ended = self._finished = EndedTurn(detached[0].turn_id, detached[0], np.zeros(0, np.float32), pause)
        self.spawn(self._final_or_report(detached, ended))

    def _resume(self, event: TurnResumed) -> None:
        """The turn declared ended goes on: its transcriber (with all it heard) listens again."""
        ended = self._finished
        if ended is None or ended.turn_id != event.turn_id or self._transcriber is not None:
            return
        self._finished, ended.resumed = None, True
        if ended.pause is not None:
            ended.pause.stale = True  # its decode, if not yet begun, and its second look are not needed
        transcriber, after_pause = ended.transcriber, ended.after_pause
        self._transcriber, self._paused = transcriber, False
        self._pending, self._pending_samples = [after_pause], len(after_pause)  # heard since its pause decode
        self._hops = self.spawn(self._hop_loop(transcriber), lasting=True)

    async def _final_or_report(self, detached, ended: EndedTurn) -> None:
        try:
            await self._final(detached, ended)
        except asyncio.CancelledError:
            raise
        except ForesayError as exc:  # the turn still ends: with an empty transcript, and said why
            self._report(ended, str(exc))
        except Exception as exc:
            log.exception("final transcript of turn %d failed", ended.turn_id)
            self._report(ended, f"speech recognition failed: {exc}")

    def _report(self, ended: EndedTurn, text: str) -> None:
        start = ended.transcriber.start_time
        self.emit(StatusMessage(0, start, text, "error"))
        if not ended.resumed:
            self.emit(FinalTranscript(ended.turn_id, start, ""))

    async def _final(self, detached, ended: EndedTurn) -> FinalTranscript | None:
        transcriber, hops, audio = detached
        hops.cancel()
        await asyncio.gather(hops, return_exceptions=True)

        def final() -> FinalTranscript | None:
            transcriber.append(audio)
            return None if ended.resumed else transcriber.finish()  # resumed: the hops go on from here

        event = await self._decode(final)
        if event is not None and not ended.resumed:
            self.emit(event)
        return event

    def _heard_until(self) -> float:
        """The capture time the open turn's audio runs to."""
        return self._transcriber.start_time + self._fed_samples / SAMPLE_RATE

    def _quiet(self) -> bool:
        return (self._voiced_until is not None and self._transcriber is not None
                and self._heard_until() - self._voiced_until >= HOP_QUIET_S)

    def _take_audio(self) -> np.ndarray:
        audio = np.concatenate(self._pending) if self._pending else np.zeros(0, np.float32)
        self._pending, self._pending_samples = [], 0
        return audio

    async def _hop_loop(self, transcriber: StreamingTranscriber) -> None:
        loop = asyncio.get_running_loop()
        hop = self.config.hop_ms / 1000
        next_tick = loop.time() + hop
        while True:
            rest_until = 0.0
            # the next tick and a voice not gone quiet, or sooner when much audio waits (checked every 10 ms)
            while ((remaining := next_tick - loop.time()) > 0 or self._quiet()) and not self._hop_now:
                await asyncio.sleep(min(remaining, 0.01) if remaining > 0 else 0.01)
            self._hop_now = False
            if self._pending and self._transcriber is transcriber and not self._paused:
                audio = self._take_audio()

                def step() -> PartialTranscript | None:
                    transcriber.append(audio)
                    if self._paused or self._transcriber is not transcriber:
                        return None  # the voice paused (or the turn ended) while it waited: the pause decode comes next
                    return transcriber.hop()

                started = loop.time()
                # The audio is off the pending list now: its step must run even when the turn
                # ends (and this loop is cancelled) while the step still waits for the worker,
                # behind a pause decode, say; else those words would never be heard.
                partial = await asyncio.shield(self.spawn(self._decode(step)))
                if partial is not None:
                    self.hops_run += 1
                    # an idle worker when the voice pauses: rest as long as a costly hop took
                    rest_until = loop.time() + self.config.hop_rest * (loop.time() - started)
                if partial is not None and self._transcriber is transcriber:  # ended: no more partials
                    self.emit(partial)
            late = max(loop.time(), rest_until) - next_tick
            missed = int(late // hop) if late > 0 else 0
            self.hops_skipped += missed
            next_tick += (missed + 1) * hop

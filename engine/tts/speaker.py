"""The speaking stage: the reply's sentences in, audio to the playback sink out.

The draft's first sentence is synthesized ahead (`FirstSentenceReady`) and held; when the final
reply's first sentence is the same text, its audio plays at once. Each chunk handed to the sink
is also an `AudioChunk` event (the window shows the reply being spoken); the first one is
`ReplyStarted`. When the reply ends (`ReplyDone`, after the last chunk played) or is stopped
(`Interrupt`: what was not yet played is dropped), `ReplyHeard` says how much of its text the
user heard. When the user's voice reopens the turn being answered (`TurnResumed`), the reply
falls silent where it is, dropping nothing: it plays on from there if the turn ends with no new
word (`ReplyKept`), and stops if the user went on with the request (`Interrupt`).

The sink is any `foresay.audio.playback.PlaybackSink` (given, never imported here).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from foresay.engine.errors import ForesayError
from foresay.engine.events import (AudioChunk, Event, FirstSentenceReady, Interrupt, ReplyDone, ReplyHeard,
                                   ReplyKept, ReplyStarted, SentenceReady, StatusMessage, TurnResumed)
from foresay.engine.stage import Stage

log = logging.getLogger(__name__)

SILENT_OUTCOMES = ("empty", "failed")  # replies that are not spoken


class _Reply:
    def __init__(self, turn_id: int, underruns: int):
        self.turn_id = turn_id
        self.sentences: asyncio.Queue = asyncio.Queue()
        self.task: asyncio.Task | None = None
        self.started = False
        self.first_output_t: float | None = None
        self.underruns_before = underruns


class Speaker(Stage):
    consumes = (FirstSentenceReady, SentenceReady, ReplyDone, Interrupt, TurnResumed, ReplyKept)
    name = "voice"

    def __init__(self, tts, sink, emit: Callable[[Event], None], clock: Callable[[], float] = time.monotonic):
        """`tts`: an engine.tts engine (`prepare(text, turn_id=)`, `warmup()`); `sink`: a
        PlaybackSink."""
        super().__init__(emit)
        self.tts = tts
        self.sink = sink
        self.clock = clock
        self._prepared: dict[int, tuple[str, object]] = {}  # turn -> (text, Prepared)
        self._reply: _Reply | None = None

    # --- the stage contract ------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        if isinstance(event, FirstSentenceReady):
            self._prepare(event.turn_id, event.text)
        elif isinstance(event, SentenceReady):
            reply = self._reply_for(event.turn_id)
            reply.sentences.put_nowait(event)
        elif isinstance(event, ReplyDone):
            if event.outcome in SILENT_OUTCOMES:
                self._discard(event.turn_id)
                if self._reply is not None and self._reply.turn_id == event.turn_id:
                    self._stop(interrupted=True, report=False)
            else:
                self._reply_for(event.turn_id).sentences.put_nowait(None)
        elif isinstance(event, Interrupt):
            self._discard(event.turn_id)
            if self._reply is not None and self._reply.turn_id == event.turn_id:
                self._stop(interrupted=True, report=True)
        elif isinstance(event, (TurnResumed, ReplyKept)):
            if self._reply is None or self._reply.turn_id != event.turn_id:
                return
            if isinstance(event, TurnResumed):
                self.sink.pause()
            else:
                self.sink.resume()

    async def start(self) -> None:
        await self.tts.warmup()

    async def cancel(self) -> None:
        if self._reply is not None:
            self._stop(interrupted=True, report=False)
        for turn_id in list(self._prepared):
            self._discard(turn_id)
        await super().cancel()

    # --- inside ---------------------------------------------------------------------------------

    def _reply_for(self, turn_id: int) -> _Reply:
        if self._reply is not None and self._reply.turn_id != turn_id:
            self._stop(interrupted=True, report=True)  # a newer reply replaces an old one
        if self._reply is None:
            self._reply = _Reply(turn_id, self.sink.underruns)
            self._reply.task = self.spawn(self._speak(self._reply))
        return self._reply

    def _prepare(self, turn_id: int, text: str) -> None:
        old = self._prepared.pop(turn_id, None)
        if old is not None:
            if old[0] == text:
                self._prepared[turn_id] = old
                return
            old[1].cancel()
        try:
            self._prepared[turn_id] = (text, self.tts.prepare(text, turn_id=turn_id))
        except Exception as exc:  # an unspeakable draft is not fatal; the final sentence retries
            log.info("could not prepare %r: %s", text, exc)

    def _discard(self, turn_id: int) -> None:
        held = self._prepared.pop(turn_id, None)
        if held is not None:
            held[1].cancel()

    def _stop(self, interrupted: bool, report: bool) -> None:
        """Stop the reply now: drop the audio not yet played, say what was heard."""
        reply, self._reply = self._reply, None
        if reply.task is not None:
            reply.task.cancel()
        span = self.sink.flush()
        if report:
            heard = span.text_span[1] if span.text_span else 0
            self.emit(ReplyHeard(reply.turn_id, self.clock(), heard, interrupted, reply.first_output_t,
                                 self.sink.underruns - reply.underruns_before))

    async def _speak(self, reply: _Reply) -> None:
        try:
            await self._speak_sentences(reply)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the voice failed mid-reply: say so, and the turn still ends
            log.exception("speaking turn %d failed", reply.turn_id)
            self.emit(StatusMessage(0, self.clock(), f"could not speak the reply: {exc}", "error"))
            if self._reply is reply:
                self._stop(interrupted=True, report=True)

    async def _speak_sentences(self, reply: _Reply) -> None:
        while (sentence := await reply.sentences.get()) is not None:
            prepared = self._prepared_for(reply.turn_id, sentence.text)
            if prepared is None:
                continue
            async for chunk in prepared.stream():
                span = (sentence.start + chunk.span[0], sentence.start + chunk.span[1])
                ticket = await self.sink.enqueue(chunk.samples, chunk.sample_rate, span=span,
                                                 text=sentence.text[chunk.span[0]:chunk.span[1]])
                if not reply.started:
                    reply.started = True
                    ticket.started.add_done_callback(
                        lambda f: setattr(reply, "first_output_t", None if f.cancelled() else f.result()))
                    self.emit(ReplyStarted(reply.turn_id, self.clock()))
                self.emit(AudioChunk(reply.turn_id, self.clock(), chunk.samples, chunk.sample_rate, span,
                                     sentence.index))
        await self.sink.drain()
        if self._reply is reply:
            self._reply = None
            self.emit(ReplyHeard(reply.turn_id, self.clock(), None, False, reply.first_output_t,
                                 self.sink.underruns - reply.underruns_before))

    def _prepared_for(self, turn_id: int, text: str):
        held = self._prepared.pop(turn_id, None)
        if held is not None and held[0] == text:
            return held[1]
        if held is not None:
            held[1].cancel()
        try:
            return self.tts.prepare(text, turn_id=turn_id)
        except ForesayError as exc:  # e.g. a "sentence" of symbols only: skip it
            self.emit(StatusMessage(0, self.clock(), f"could not speak {text!r}: {exc}", "warning"))
            return None

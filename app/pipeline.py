"""The composition root: audio -> endpointing -> streaming ASR -> PredGen -> TTS -> playback.

Stages never import each other; this class connects them. Every message is a typed event from
`engine.events` that goes through `dispatch`, which routes it and shows it to the observers (the
UI bridge, the metrics log, the console). Model work runs in the stages' worker threads; this
class only runs on the event loop.

While a reply plays, the microphone feeds the barge-in detector instead of the endpointer (the
assistant's own voice must not start a turn); the last second of audio is kept, so a user who
interrupts starts their turn from the first word.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import time
from dataclasses import dataclass, field
from typing import Callable

from foresay.engine.errors import ForesayError
from foresay.engine.events import (DraftUpdated, Event, FinalTranscript, FirstSentenceReady,
                                   Interrupt, PartialTranscript, SentenceReady, SpeechStarted,
                                   StatusMessage, TurnEnded, TurnMetrics)

log = logging.getLogger(__name__)

METRIC_NAMES = ("turn", "user_text", "reply_text", "outcome", "endpoint_delay_ms", "asr_final_ms",
                "ttfs_ms", "nfetfs", "tts_first_chunk_ms", "audio_latency_ms", "voice_to_voice_ms")


@dataclass
class _TurnLog:
    """What one turn's metrics are computed from (monotonic seconds)."""
    turn_id: int
    last_voiced_t: float
    ended_t: float
    final_at: float | None = None
    first_sentence_at: float | None = None
    first_chunk_at: float | None = None
    first_output_t: float | None = None
    underruns_before: int = 0
    values: dict = field(default_factory=dict)


def _ms(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(1000 * (b - a), 2)


class Pipeline:
    def __init__(self, *, source, endpointer, asr, llm, tts, sink, bargein=None, echo=None, history=None,
                 adaptive_endpointing: bool = True, observers: list[Callable[[Event], None]] = (),
                 clock: Callable[[], float] = time.monotonic, keep_audio_s: float = 1.0,
                 wait_for_replies: bool = False):
        """`asr`: an engine.asr StreamingAsr whose emit is `self.dispatch` (see `connect`);
        `llm`: a PredGenStage likewise; `tts`: a TtsEngine; `sink`: a PlaybackSink;
        `bargein`: a BargeInDetector on the sink's playback reference (None: no barge-in);
        `echo`: an echo canceller on the same reference (None: the microphone as it is).
        `wait_for_replies`: finish each reply before reading more audio (a file replayed faster
        than real time, whose next turn would otherwise barge in)."""
        self.source = source
        self.endpointer = endpointer
        self.asr = asr
        self.llm = llm
        self.tts = tts
        self.sink = sink
        self.bargein = bargein
        self.echo = echo
        self.history = history
        self.adaptive_endpointing = adaptive_endpointing
        self.observers = list(observers)
        self.clock = clock
        self.wait_for_replies = wait_for_replies
        self.metrics: list[dict] = []
        self.muted = False
        self._diverted: collections.deque = collections.deque()  # heard only by barge-in
        self._replay_diverted = False
        self._keep_audio_s = keep_audio_s
        self._asr_turn: int | None = None
        self._fed = 0
        self._reply: asyncio.Task | None = None
        self._sentences: asyncio.Queue | None = None
        self._prepared: dict[int, tuple[str, object]] = {}
        self._log: _TurnLog | None = None

    # --- events -----------------------------------------------------------------------------

    def dispatch(self, event: Event) -> None:
        """Route one event and show it to the observers (event loop thread only)."""
        for observer in self.observers:
            try:
                observer(event)
            except Exception:  # an observer's bug must not stop the conversation
                log.exception("observer %r failed on %s", observer, type(event).__name__)
        if isinstance(event, PartialTranscript):
            self.llm.on_partial(event)
        elif isinstance(event, DraftUpdated):
            if self.adaptive_endpointing:
                self.endpointer.policy.update(event.p_end_of_turn, event.turn_id)
        elif isinstance(event, FirstSentenceReady):
            self._prepare(event.turn_id, event.text)
        elif isinstance(event, SentenceReady):
            if self._sentences is not None:
                self._sentences.put_nowait(event)
        elif isinstance(event, TurnEnded):
            self._reply = asyncio.get_running_loop().create_task(self._answer(event))
        elif isinstance(event, Interrupt):
            self._interrupt(replay_speech=self._replay_diverted)
            self._replay_diverted = False

    def status(self, text: str, level: str = "info") -> None:
        self.dispatch(StatusMessage(0, self.clock(), text, level))

    # --- audio in ---------------------------------------------------------------------------

    def on_block(self, block) -> None:
        """One block of microphone (or file) audio, in capture order."""
        raw = type(block)(block.samples * 0, block.t) if self.muted else block
        clean = self.echo.process(raw) if self.echo is not None else raw
        if self.bargein is not None and self.bargein.armed:
            self._diverted.append(clean)
            while self._diverted[0].t_end < clean.t_end - self._keep_audio_s:
                self._diverted.popleft()
            for event in self.bargein.process(clean, raw):
                self._replay_diverted = True  # the user's words start in the diverted audio
                self.dispatch(event)
            return
        self._diverted.clear()
        self._push(clean)

    def _push(self, block) -> None:
        for event in self.endpointer.push(block):
            if isinstance(event, SpeechStarted):
                self._start_asr(event)
            elif isinstance(event, TurnEnded):
                self._feed_asr()
                self._asr_turn = None
            self.dispatch(event)
        self._feed_asr()

    def _start_asr(self, event: SpeechStarted) -> None:
        if self._reply is not None and not self._reply.done():
            self._reply.cancel()  # the user spoke again before the reply began: answer the new turn
        history = " ".join(t.user + " " + t.assistant for t in self.history.turns[-2:]) \
            if self.history else ""
        turn = self.endpointer.turn
        try:
            self.asr.start_turn(event.turn_id, turn.audio_start_t(trimmed=False), history=history)
        except ForesayError as exc:  # e.g. the previous turn's recognition was cut off mid-way
            self.status(f"could not start recognizing turn {event.turn_id}: {exc}", "error")
            return
        self._asr_turn, self._fed = event.turn_id, 0

    def _feed_asr(self) -> None:
        turn = self.endpointer.turn
        if self._asr_turn is None or turn is None or turn.turn_id != self._asr_turn:
            return
        audio = turn.audio(trimmed=False)
        if len(audio) > self._fed:
            self.asr.feed(audio[self._fed:])
            self._fed = len(audio)

    # --- controls (from the UI or the terminal; event loop thread) --------------------------

    def press_ptt(self) -> None:
        self.stop_reply()  # pressing to talk over the assistant interrupts it
        self.endpointer.gate.press(self.clock())

    def release_ptt(self) -> None:
        self.endpointer.gate.release(self.clock())

    def set_mode(self, mode: str) -> None:
        self.endpointer.set_mode(mode, self.clock())

    def stop_reply(self) -> None:
        if self._reply is not None and not self._reply.done():
            self.dispatch(Interrupt(self._log.turn_id if self._log else 0, self.clock()))

    def new_conversation(self) -> None:
        if self.history is not None:
            self.history.new_conversation()
        self.llm.conv.reset()

    # --- the reply --------------------------------------------------------------------------

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

    async def _answer(self, ended: TurnEnded) -> None:
        try:
            await self._answer_turn(ended)
        except asyncio.CancelledError:
            raise
        except ForesayError as exc:
            self.status(str(exc), "error")
        except Exception as exc:  # reported, and the next turn still works
            log.exception("turn %d failed", ended.turn_id)
            self.status(f"turn {ended.turn_id} failed: {exc}", "error")

    async def _answer_turn(self, ended: TurnEnded) -> None:
        turn_log = self._log = _TurnLog(ended.turn_id, ended.last_voiced_t, ended.t,
                                        underruns_before=self.sink.underruns)
        final: FinalTranscript = await self.asr.end_turn()
        turn_log.final_at = self.clock()
        self.dispatch(final)
        if not final.text.strip():
            self._discard_prepared(ended.turn_id)
            self.status("heard nothing to answer")
            return
        self._sentences = asyncio.Queue()
        speaker = asyncio.get_running_loop().create_task(self._speak(ended.turn_id, self._sentences, turn_log))
        try:
            record = await self.llm.on_final(final)
            self._sentences.put_nowait(None)
            span = await speaker
            reply = await self.llm.commit()
            self._finish(turn_log, final.text, reply, record, interrupted=False)
        except asyncio.CancelledError:
            speaker.cancel()
            await asyncio.gather(speaker, return_exceptions=True)
            span = self.sink.flush()
            heard = span.text_span[1] if span.text_span else 0
            reply = await asyncio.shield(self.llm.commit(heard_chars=heard))
            record = self.llm.turn.record if self.llm.turn else None
            self._finish(turn_log, final.text, reply, record, interrupted=True)
        finally:
            self._sentences = None
            self._discard_prepared(ended.turn_id)
            if self.bargein is not None:
                self.bargein.disarm()

    async def _speak(self, turn_id: int, sentences: asyncio.Queue, turn_log: _TurnLog) -> None:
        if self.bargein is not None:
            self.bargein.arm(turn_id)
        while (sentence := await sentences.get()) is not None:
            if sentence.index == 0:
                turn_log.first_sentence_at = self.clock()
            held = self._prepared.pop(turn_id, None)
            if held is not None and held[0] == sentence.text:
                prepared = held[1]
            else:
                if held is not None:
                    held[1].cancel()
                try:
                    prepared = self.tts.prepare(sentence.text, turn_id=turn_id)
                except ForesayError as exc:  # e.g. a "sentence" of symbols only: skip it
                    self.status(f"could not speak {sentence.text!r}: {exc}", "warning")
                    continue
            async for chunk in prepared.stream():
                span = (sentence.start + chunk.span[0], sentence.start + chunk.span[1])
                ticket = await self.sink.enqueue(chunk.samples, chunk.sample_rate, span=span,
                                                 text=sentence.text)
                if turn_log.first_chunk_at is None:
                    turn_log.first_chunk_at = self.clock()
                    ticket.started.add_done_callback(
                        lambda f: setattr(turn_log, "first_output_t", f.result()))
        await self.sink.drain()

    def _interrupt(self, replay_speech: bool = False) -> None:
        """Stop the reply. After a barge-in, the audio that went to the detector while the reply
        played is given to the endpointer from the interruption's onset, so the user's turn
        starts with their first word."""
        if self._reply is not None and not self._reply.done():
            self._reply.cancel()
        if self.bargein is not None:
            self.bargein.disarm()
        diverted, self._diverted = list(self._diverted), collections.deque()
        if replay_speech:
            onset = getattr(self.bargein, "onset_t", None)
            for block in diverted:
                if onset is None or block.t_end >= onset - 0.3:
                    self._push(block)

    def _discard_prepared(self, turn_id: int) -> None:
        held = self._prepared.pop(turn_id, None)
        if held is not None:
            held[1].cancel()

    def _finish(self, turn_log: _TurnLog, user_text: str, reply: str, record, interrupted: bool) -> None:
        values = {
            "turn": turn_log.turn_id, "user_text": user_text, "reply_text": reply,
            "outcome": record.outcome if record else "none",
            "endpoint_delay_ms": _ms(turn_log.last_voiced_t, turn_log.ended_t),
            "asr_final_ms": _ms(turn_log.ended_t, turn_log.final_at),
            "ttfs_ms": round(1000 * record.ttfs, 2) if record else None,
            "nfetfs": record.nfetfs if record else None,
            "tts_first_chunk_ms": _ms(turn_log.first_sentence_at, turn_log.first_chunk_at),
            "audio_latency_ms": _ms(turn_log.final_at, turn_log.first_chunk_at),
            "voice_to_voice_ms": _ms(turn_log.last_voiced_t, turn_log.first_output_t),
            "underruns": self.sink.underruns - turn_log.underruns_before,
            "interrupted": interrupted,
        }
        self.metrics.append(values)
        if self.history is not None:
            from foresay.app.history import HistoryTurn
            self.history.append(HistoryTurn(user_text, reply, interrupted, time.time()))
        self.dispatch(TurnMetrics(turn_log.turn_id, self.clock(), values))

    # --- running ----------------------------------------------------------------------------

    async def warmup(self) -> None:
        """Load and warm every model before saying ready."""
        self.status("warming up the speech recognizer")
        await self.asr.warmup()
        self.status("warming up the language model")
        await self.llm.warmup()
        self.status("warming up the voice")
        await self.tts.warmup()
        self.status("ready")

    async def run(self) -> None:
        """Until the source ends (a file) or the task is cancelled (live)."""
        await self.sink.start()
        try:
            async with self.source:
                async for block in self.source:
                    self.on_block(block)
                    if self.wait_for_replies:
                        await self.settle()
            for event in self.endpointer.finish():
                if isinstance(event, TurnEnded):
                    self._feed_asr()
                    self._asr_turn = None
                self.dispatch(event)
            await self.settle()
        finally:
            await self.sink.close()

    async def settle(self) -> None:
        """Wait for the reply in progress, if any."""
        while self._reply is not None and not self._reply.done():
            await asyncio.gather(self._reply, return_exceptions=True)

    def close(self) -> None:
        self.llm.close()
        self.asr.close()

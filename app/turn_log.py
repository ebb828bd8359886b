"""Per-turn records from the events alone: latency metrics (DESIGN.md section 6) and history.

`TurnLog` watches a turn's events go by, stamps them with the one monotonic clock, and when
the turn closes emits `TurnMetrics` with the figures `foresay replay --metrics` writes. A turn the
user reopened counts from its last end, or from the end its reply answered if that reply was kept
(`ReplyKept`: the voice after it brought no words). Turns
that were never answered (empty, or unanswered: the user began a new request first) get no record.
`HistoryWriter` enters each closed turn into the saved conversation, and starts a new one when
the user asks (`NewConversation`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from foresay.engine.events import (Event, FinalTranscript, NewConversation, ReplyDone, ReplyHeard, ReplyStarted,
                                   ReplyKept, SentenceReady, StatusMessage, TurnClosed, TurnEnded, TurnMetrics,
                                   TurnResumed)
from foresay.engine.stage import Stage

METRIC_NAMES = ("turn", "user_text", "reply_text", "outcome", "endpoint_delay_ms", "asr_final_ms",
                "ttfs_ms", "nfetfs", "tts_first_chunk_ms", "audio_latency_ms", "voice_to_voice_ms")
UNANSWERED = ("empty", "unanswered")


@dataclass
class _Times:
    """What one turn's metrics are computed from (monotonic seconds)."""
    last_voiced_t: float
    ended_t: float
    final_at: float | None = None
    first_sentence_at: float | None = None
    first_chunk_at: float | None = None
    resumed: int = 0    # times the user went on after the end was declared
    done: ReplyDone | None = None
    heard: ReplyHeard | None = None
    earlier: "_Times | None" = None  # the end before the user reopened the turn


def _kept(latest: _Times, ended_t: float) -> _Times:
    """The times of the end at `ended_t`, whose reply played on through the later ones: what that
    reply did since (its text done, its playback heard) is carried over."""
    kept = latest
    while kept is not None and abs(kept.ended_t - ended_t) > 1e-9:
        kept = kept.earlier
    if kept is None:
        return latest
    kept.done, kept.heard = kept.done or latest.done, kept.heard or latest.heard
    kept.resumed, kept.earlier = latest.resumed, None
    return kept


def _ms(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(1000 * (b - a), 2)


class TurnLog(Stage):
    consumes = (TurnEnded, TurnResumed, ReplyKept, FinalTranscript, SentenceReady, ReplyStarted, ReplyDone,
                ReplyHeard, TurnClosed)
    name = "turn log"

    def __init__(self, emit: Callable[[Event], None], clock: Callable[[], float] = time.monotonic,
                 paced: bool = True):
        """`paced`: the audio came at its own pace (live, or a replay in real time); False (a
        replay faster than real time): the figures that compare the audio's time with the clock
        (ASR final, voice-to-voice) would be meaningless and are None."""
        super().__init__(emit)
        self.clock = clock
        self.paced = paced
        self.metrics: list[dict] = []
        self._turns: dict[int, _Times] = {}

    def handle(self, event: Event) -> None:
        if isinstance(event, TurnEnded):  # a resumed turn ends again: its times start over
            earlier = self._turns.get(event.turn_id)
            self._turns[event.turn_id] = _Times(event.last_voiced_t, event.t, earlier=earlier,
                                                resumed=earlier.resumed if earlier else 0)
            return
        times = self._turns.get(event.turn_id)
        if times is None:
            return
        now = self.clock()
        if isinstance(event, TurnResumed):
            times.resumed += 1
        elif isinstance(event, ReplyKept):
            self._turns[event.turn_id] = _kept(times, event.ended_t)
        elif isinstance(event, FinalTranscript) and times.final_at is None:
            times.final_at = now
        elif isinstance(event, SentenceReady) and event.index == 0:
            times.first_sentence_at = now
        elif isinstance(event, ReplyStarted):
            times.first_chunk_at = now
        elif isinstance(event, ReplyDone):
            times.done = event
        elif isinstance(event, ReplyHeard):
            times.heard = event
        elif isinstance(event, TurnClosed):
            del self._turns[event.turn_id]
            if event.outcome not in UNANSWERED:
                self._record(event, times)

    def _record(self, closed: TurnClosed, times: _Times) -> None:
        done, heard = times.done, times.heard
        ttfs = done.ttfs if done is not None else None
        values = {
            "turn": closed.turn_id, "user_text": closed.user_text, "reply_text": closed.reply_text,
            "outcome": closed.outcome,
            "endpoint_delay_ms": _ms(times.last_voiced_t, times.ended_t),
            "asr_final_ms": _ms(times.ended_t, times.final_at) if self.paced else None,
            "ttfs_ms": round(1000 * ttfs, 2) if ttfs is not None else None,
            "nfetfs": done.nfetfs if done is not None else None,
            "tts_first_chunk_ms": _ms(times.first_sentence_at, times.first_chunk_at),
            "audio_latency_ms": _ms(times.final_at, times.first_chunk_at),
            "voice_to_voice_ms": _ms(times.last_voiced_t, heard.first_output_t if heard and self.paced else None),
            "underruns": heard.underruns if heard else 0,
            "interrupted": closed.interrupted,
            "resumed": times.resumed,
        }
        self.metrics.append(values)
        self.emit(TurnMetrics(closed.turn_id, self.clock(), values))


class HistoryWriter(Stage):
    """Saves every request (its reply as far as it was heard) to the conversation file.
    A turn that cannot be written stays in memory and is written with the next one; that saving
    failed (and that it works again) is said once, as a status message."""
    consumes = (TurnClosed, NewConversation)
    name = "history"

    def __init__(self, history, emit: Callable[[Event], None] = lambda event: None,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(emit)
        self.history = history
        self.clock = clock

    def handle(self, event: TurnClosed | NewConversation) -> None:
        from foresay.app.history import HistoryTurn
        if isinstance(event, NewConversation):
            self.history.new_conversation()
        elif event.outcome not in ("empty", "failed"):  # an unanswered request is kept too
            news = self.history.keep(HistoryTurn(event.user_text, event.reply_text, event.interrupted, time.time()))
            if news is not None:
                level, text = news
                self.emit(StatusMessage(0, self.clock(), text, level))

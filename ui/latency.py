"""Latency figures as the meters and the overlay show them (see DESIGN.md section 6).

Plain Python, no Qt. `LatencyModel` keeps every turn's TurnMetrics since start, the last turn's
stages for the stacked bar, outcome counts and underruns, a live voice-to-voice clock that runs
from the user's last voiced frame until the reply's first audio chunk, and the end-of-turn meter
(`turn_end`: the silence being waited and what the decision rests on).

The live clock starts when the voice pauses (voice-to-voice counts from the last voiced frame, so
the silence waited is part of it), stops when the user goes on, and stops for good at the reply's
first audio chunk. Should no chunk reach the window, the reply's end, an interruption or the
turn's metrics stop it: it never runs on past the reply.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from foresay.engine.errors import ForesayError
from foresay.engine.events import (AudioChunk, Event, Interrupt, ReplyDone, ReplyKept, SpeechStarted, TurnEnded,
                                   TurnMetrics, TurnResumed, VoicePaused, VoiceResumed)

from .turn_end import TurnEndModel

MS_METRICS = ("endpoint_delay_ms", "asr_final_ms", "ttfs_ms", "tts_first_chunk_ms",
              "audio_latency_ms", "voice_to_voice_ms")
COUNT_METRICS = ("nfetfs", "underruns")
OUTCOMES = ("accepted", "partial", "rejected", "baseline")

# The stacked bar's stages, in order: (key, label). They add up to voice-to-voice.
STAGES = (("endpoint", "endpoint"), ("asr", "ASR final"), ("llm", "LLM to 1st sentence"),
          ("tts", "TTS"), ("output", "output"))


class BadMetrics(ForesayError):
    """A TurnMetrics record carries a value the meters cannot show."""


def check_metrics(values: dict) -> dict:
    """The record's numeric values, validated: numbers >= 0 or None (not measured)."""
    if not isinstance(values, dict):
        raise BadMetrics(f"TurnMetrics.values must be a dict, got {type(values).__name__}")
    for name in MS_METRICS + COUNT_METRICS:
        v = values.get(name)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v < 0:
            raise BadMetrics(f"TurnMetrics value {name!r} must be a number >= 0 or None, got {v!r}")
    outcome = values.get("outcome")
    if outcome not in (None, "", *OUTCOMES):
        raise BadMetrics(f"TurnMetrics outcome must be one of {OUTCOMES}, got {outcome!r}")
    return values


def stage_breakdown(values: dict) -> dict[str, float | None]:
    """The last turn's stages in ms, keyed as STAGES; None where the record lacks what it needs.

    endpoint = endpoint delay, asr = ASR final, llm = TTFS (final transcript to first sentence),
    tts = audio latency - TTFS (first sentence to first chunk handed to playback; the
    `tts_first_chunk_ms` figure when audio latency is missing), output = the rest of
    voice-to-voice (playback buffering and the device). Negative remainders (clock jitter) are 0.
    """
    endpoint, asr, llm = (values.get(k) for k in ("endpoint_delay_ms", "asr_final_ms", "ttfs_ms"))
    audio, v2v = values.get("audio_latency_ms"), values.get("voice_to_voice_ms")
    tts = max(audio - llm, 0.0) if audio is not None and llm is not None else values.get("tts_first_chunk_ms")
    known = (endpoint, asr, llm, tts)
    output = None
    if v2v is not None and all(x is not None for x in known):
        output = max(v2v - sum(known), 0.0)
    return {"endpoint": endpoint, "asr": asr, "llm": llm, "tts": tts, "output": output}


@dataclass(frozen=True)
class Summary:
    count: int
    median: float | None
    p90: float | None


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of an already sorted, non-empty list."""
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(values: list[float]) -> Summary:
    if not values:
        return Summary(0, None, None)
    ordered = sorted(values)
    return Summary(len(ordered), percentile(ordered, 50), percentile(ordered, 90))


@dataclass
class LatencyModel:
    clock: Callable[[], float] = time.monotonic  # the metrics' monotonic clock (events' `t`)
    history: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in MS_METRICS + ("nfetfs",)})
    last: dict = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=lambda: {k: 0 for k in OUTCOMES})
    underruns: int = 0
    turns: int = 0
    version: int = 0
    # the live clock: last voiced frame of the turn still waiting for its reply; the figure it
    # stopped at on the reply's first chunk, shown until that turn's metrics arrive
    _pending_from: float | None = field(default=None, init=False)
    _pending_turn: int = field(default=-1, init=False)
    _live_ms: float | None = field(default=None, init=False)
    turn_end: TurnEndModel = field(default=None)

    def __post_init__(self):
        if self.turn_end is None:
            self.turn_end = TurnEndModel(self.clock)

    def apply(self, event: Event) -> bool:
        changed = self.turn_end.apply(event)
        if isinstance(event, TurnMetrics):
            self._on_metrics(event)
        elif isinstance(event, (TurnEnded, VoicePaused)) and event.turn_id >= self._pending_turn:
            self._pending_from, self._pending_turn, self._live_ms = event.last_voiced_t or event.t, event.turn_id, None
        elif isinstance(event, (VoiceResumed, TurnResumed)) and event.turn_id == self._pending_turn:
            self._pending_from, self._live_ms = None, None   # the user goes on: no reply due yet
        elif isinstance(event, AudioChunk) and event.turn_id == self._pending_turn and self._pending_from is not None:
            self._live_ms = max(event.t - self._pending_from, 0.0) * 1000
            self._pending_from = None
        elif isinstance(event, (ReplyDone, Interrupt, ReplyKept)) and event.turn_id == self._pending_turn \
                and self._pending_from is not None:
            self._pending_from = None   # no chunk reached us: the figure comes with the metrics
        elif isinstance(event, SpeechStarted) and event.turn_id > self._pending_turn:
            self._pending_from, self._live_ms = None, None
        elif not changed:
            return False
        self.version += 1
        return True

    def _on_metrics(self, event: TurnMetrics) -> None:
        values = check_metrics(event.values)
        self.last = dict(values)
        self.turns += 1
        for name, series in self.history.items():
            if values.get(name) is not None:
                series.append(float(values[name]))
        if values.get("outcome"):
            self.outcomes[values["outcome"]] += 1
        self.underruns += int(values.get("underruns") or 0)
        if event.turn_id >= self._pending_turn:
            self._pending_from, self._live_ms = None, None

    def summary(self, metric: str) -> Summary:
        if metric not in self.history:
            raise BadMetrics(f"no history is kept for {metric!r}; known: {sorted(self.history)}")
        return summarize(self.history[metric])

    @property
    def stages(self) -> dict[str, float | None]:
        return stage_breakdown(self.last)

    def live_voice_to_voice(self) -> tuple[float | None, bool]:
        """(ms, running): the clock of the turn waiting for its reply, else the last turn's figure."""
        if self._pending_from is not None:
            return max(self.clock() - self._pending_from, 0.0) * 1000, True
        if self._live_ms is not None:
            return self._live_ms, False
        return self.last.get("voice_to_voice_ms"), False

"""Reference end-of-turn rules, replayed offline on truth-labelled recordings.

A `TurnRule` is a strategy object that sees every frame of a recording in capture order,
`push(frame, voiced, t)` (`voiced`: the VAD's verdict on that frame), and returns the events it
declares: `SpeechStarted`, `TurnEnded` (and `TurnResumed`, for a rule that reopens turns), with
the endpointer's meaning of their times. `replay` turns a rule's events on one recording into
the `Observed` that `turns.score` scores, so any rule, Foresay's own decision included once it
has this shape, is measured by the same code on the same audio.

The two reference rules follow pipecat's VAD (`VADParams`: a start once `start_s` of voiced
frames run unbroken, a stop once `stop_s` of unvoiced ones do, each rounded to whole frames;
its loudness gate is left out):

- `FixedSilenceRule(silence_s)`: the turn ends at the VAD stop, with `stop_s` = the silence
  (what a plain VAD turn taker ships; 0.7 s is a common default).
- `SmartTurnRule`: pipecat's Smart Turn stop strategy (`TurnAnalyzerUserTurnStopStrategy` with
  `LocalSmartTurnAnalyzerV3`): a short VAD stop (0.2 s, pipecat's `VAD_STOP_SECS`); at each stop
  Smart Turn hears the turn's audio so far (from `pre_speech_s` before its first voiced frame,
  the last 8 s); P > `threshold` ends the turn (`latency_s` later: the model's own time), else
  the turn waits for voice, and ends after `fallback_s` of silence after the stop (pipecat's
  `SmartTurnParams.stop_secs`, 3 s) unless the VAD starts again first, which begins the wait anew.
  Transcripts do not gate the end here (pipecat's `wait_for_transcript` waits for the STT).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from foresay.app.bench.turn_records import Observed
from foresay.audio.blocks import SAMPLE_RATE
from foresay.engine.events import Event, SpeechStarted, TurnEnded, TurnResumed

EPS = 1e-9


def _frames(seconds: float, frame_s: float) -> int:
    """A duration in whole VAD frames, rounded as pipecat's VAD rounds it (at least one)."""
    return max(1, round(seconds / frame_s))


class TurnRule:
    """Interface: `reset()` before a recording, `push(frame, voiced, t)` for each frame;
    `longest_wait_s` is the longest silence after the voice it may need to declare an end;
    `counts` what the rule did in the recording (why turns ended, ...), for the report."""
    longest_wait_s: float = 1.0
    counts: dict[str, int] = {}

    def reset(self) -> None:
        raise NotImplementedError

    def push(self, frame: np.ndarray, voiced: bool, t: float) -> list[Event]:
        raise NotImplementedError


class VadTurnRule(TurnRule):
    """Pipecat's VAD state machine (quiet, starting, speaking, stopping) and the open turn's audio;
    a subclass decides at each VAD stop (`_stopped`) and on every frame (`_tick`)."""

    def __init__(self, stop_s: float, start_s: float = 0.2, pre_speech_s: float = 0.5):
        if stop_s <= 0 or start_s <= 0 or pre_speech_s < 0:
            raise ValueError("turn rule: need stop_s > 0, start_s > 0 and pre_speech_s >= 0")
        self.stop_s, self.start_s, self.pre_speech_s = stop_s, start_s, pre_speech_s
        self.longest_wait_s = stop_s
        self.reset()

    def reset(self) -> None:
        self._speaking = False          # the VAD's state: speaking or stopping (else quiet or starting)
        self._run = 0                   # voiced frames in a row
        self._silent = 0                # unvoiced frames since the last voiced one
        self._last_voiced = 0.0         # end of the last voiced frame
        self._next_id = 1
        self.turn_id: int | None = None  # the open turn
        self._recent: list[tuple[float, np.ndarray]] = []  # frames, while no turn is open
        self.audio: list[np.ndarray] = []  # the open turn's audio
        self.counts = {}

    def push(self, frame: np.ndarray, voiced: bool, t: float) -> list[Event]:
        frame_s = len(frame) / SAMPLE_RATE
        t_end = t + frame_s
        events: list[Event] = []
        if self.turn_id is None:
            self._recent.append((t, frame))
            keep_from = t_end - self.pre_speech_s - self.start_s - 0.1
            while self._recent and self._recent[0][0] < keep_from:
                self._recent.pop(0)
        else:
            self.audio.append(frame)
        if voiced:
            self._last_voiced, self._silent = t_end, 0
            self._run = self._run + 1
            if not self._speaking and self._run >= _frames(self.start_s, frame_s):
                self._speaking = True
                events += self._started(t_end - self._run * frame_s)
        else:
            self._run, self._silent = 0, self._silent + 1
            if self._speaking and self._silent >= _frames(self.stop_s, frame_s):
                self._speaking = False
                events += self._stopped(t_end)
        if self.turn_id is not None:
            events += self._tick(t_end)
        return events

    def _started(self, first_voiced: float) -> list[Event]:
        """The VAD started: a new turn, or voice again inside the open one."""
        if self.turn_id is not None:
            self._voice_again()
            return []
        self.turn_id, self._next_id = self._next_id, self._next_id + 1
        self.audio = [f for ft, f in self._recent if ft >= first_voiced - self.pre_speech_s - EPS]
        self._recent = []
        return [SpeechStarted(turn_id=self.turn_id, t=first_voiced)]

    def end(self, t: float) -> list[Event]:
        event = TurnEnded(turn_id=self.turn_id, t=t, last_voiced_t=min(self._last_voiced, t))
        self.turn_id, self.audio = None, []
        return [event]

    def _voice_again(self) -> None:
        pass

    def _stopped(self, t: float) -> list[Event]:
        return []

    def _tick(self, t: float) -> list[Event]:
        return []


class FixedSilenceRule(VadTurnRule):
    """The turn ends once `silence_s` of VAD silence follows the voice."""

    def __init__(self, silence_s: float = 0.7, start_s: float = 0.2):
        super().__init__(stop_s=silence_s, start_s=start_s)

    def _stopped(self, t: float) -> list[Event]:
        return self.end(t) if self.turn_id is not None else []


class SmartTurnRule(VadTurnRule):
    """Pipecat's rule (see the module docstring). `predict(audio) -> P(end)` is Smart Turn on a
    turn's audio; `probabilities` keeps every answer of the current recording."""

    def __init__(self, predict: Callable[[np.ndarray], float], threshold: float = 0.5, stop_s: float = 0.2,
                 fallback_s: float = 3.0, latency_s: float = 0.0, start_s: float = 0.2, pre_speech_s: float = 0.5):
        if not 0.0 < threshold < 1.0:
            raise ValueError("smart turn rule: threshold must be between 0 and 1")
        if fallback_s <= 0 or latency_s < 0:
            raise ValueError("smart turn rule: need fallback_s > 0 and latency_s >= 0")
        self.predict, self.threshold, self.fallback_s, self.latency_s = predict, threshold, fallback_s, latency_s
        super().__init__(stop_s=stop_s, start_s=start_s, pre_speech_s=pre_speech_s)
        self.longest_wait_s = stop_s + max(fallback_s, latency_s)

    def reset(self) -> None:
        super().reset()
        self._fallback_at: float | None = None
        self.probabilities: list[float] = []
        self.counts = {"model_calls": 0, "ended_by_model": 0, "ended_by_fallback": 0}

    def _voice_again(self) -> None:
        self._fallback_at = None

    def _stopped(self, t: float) -> list[Event]:
        if self.turn_id is None:
            return []
        p = self.predict(np.concatenate(self.audio))
        self.probabilities.append(p)
        self.counts["model_calls"] += 1
        if p > self.threshold:
            self._fallback_at = None
            self.counts["ended_by_model"] += 1
            return self.end(t + self.latency_s)
        self._fallback_at = t + self.fallback_s
        return []

    def _tick(self, t: float) -> list[Event]:
        if self._fallback_at is not None and t >= self._fallback_at - EPS:
            self._fallback_at = None
            self.counts["ended_by_fallback"] += 1
            return self.end(t)
        return []


def replay(rule: TurnRule, frames: list[tuple[np.ndarray, bool, float]]) -> Observed:
    """One recording's frames (frame, voiced, t from its first sample) through `rule` (its
    `counts` then tell what it did in this recording)."""
    rule.reset()
    obs = Observed()
    for frame, voiced, t in frames:
        for event in rule.push(frame, voiced, t):
            if isinstance(event, SpeechStarted):
                obs.started[event.turn_id] = event.t
            elif isinstance(event, TurnEnded):
                obs.ends.append((event.turn_id, event.t, event.last_voiced_t))
            elif isinstance(event, TurnResumed):
                obs.resumed.append((event.turn_id, event.t))
    return obs


def vad_frames(samples: np.ndarray, probability: Callable[[np.ndarray], float], frame_samples: int,
               threshold: float, pad_s: float) -> list[tuple[np.ndarray, bool, float]]:
    """`samples` and `pad_s` of silence after them, cut into VAD frames labelled voiced when the
    VAD's probability reaches `threshold`."""
    x = np.concatenate([np.asarray(samples, np.float32), np.zeros(int(pad_s * SAMPLE_RATE), np.float32)])
    out = []
    for i in range(0, len(x) - frame_samples + 1, frame_samples):
        frame = x[i:i + frame_samples]
        out.append((frame, probability(frame) >= threshold, i / SAMPLE_RATE))
    return out

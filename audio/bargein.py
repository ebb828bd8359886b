"""Barge-in: the user talking over the assistant raises an `Interrupt`.

    canceller = make_echo_canceller(sink.reference)          # WebRTC AEC3, or a pass-through
    detector = BargeInDetector(sink.reference)
    detector.arm(turn_id)                 # the assistant starts speaking the reply to turn_id
    async for raw in mic:
        clean = canceller.process(raw)    # the same cleaned audio may feed the endpointer
        for interrupt in detector.process(clean, raw):
            ...                           # cancel the reply, sink.flush()

While armed, a frame counts as the user when the VAD calls it speech and the `EchoGate`s find
it louder than the expected echo of what is being played: after the canceller by a margin,
and before it (when `raw` is given) at all, so a moment in which the canceller lets echo
through cannot pass for the user. An interrupt fires once such frames
span `min_speech_ms` (pauses up to `max_gap_ms` bridged, at least `min_voiced_ratio` of the
span voiced); `Interrupt.t` is the capture time at which that became true, and
`onset_t` the start of the user's speech: of the first user frame before it with no gap longer
than `onset_gap_ms` since (a first word the gate let through, then quieter syllables it took for
echo, then the run that interrupts: the utterance began with that first word). The detector
then disarms itself until the next `arm()`.

When the canceller's output starts or stops being used (the cleaned audio stops or starts being
the raw audio), the gate after it forgets the echo it measured: that was of the other signal, and
an echo measured before the canceller took over would hold a user back for seconds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from foresay.engine.events import Interrupt

from .blocks import SAMPLE_RATE, AudioBlock
from .echo import EchoGate, EchoGateConfig
from .reference import PlaybackReference
from .resample import Framer
from .vad import Vad, VadConfig, make_vad


@dataclass(frozen=True)
class BargeInConfig:
    min_speech_ms: int = 300      # user speech over the assistant needed to interrupt
    max_gap_ms: int = 150         # a longer pause starts the count again
    onset_gap_ms: int = 500       # user speech this soon after earlier user speech is the same utterance
    min_voiced_ratio: float = 0.6  # share of the span that must be user speech
    # unlevelled: the echo gates weigh the user's level against the reply's, and a boost would
    # make the reply's echo sound like a voice
    vad: VadConfig = field(default_factory=lambda: VadConfig(kind="webrtc", aggressiveness=3,
                                                             frame_ms=30, max_gain_db=0.0))
    gate: EchoGateConfig = field(default_factory=EchoGateConfig)   # on the cleaned audio
    # On the audio before the canceller, when given: it must hold more than the echo too, so a
    # moment where the canceller lets echo through (re-adapting) cannot pass for the user.
    # Until it has measured the echo it assumes -10 dB: the gate after the canceller is the
    # strict one at first.
    raw_gate: EchoGateConfig = field(default_factory=lambda: EchoGateConfig(
        margin_db=0.0, initial_echo_gain_db=-10.0))

    def __post_init__(self):
        if self.min_speech_ms <= 0 or self.max_gap_ms < 0:
            raise ValueError("min_speech_ms must be positive and max_gap_ms not negative")
        if self.onset_gap_ms < self.max_gap_ms:
            raise ValueError("onset_gap_ms must be at least max_gap_ms")
        if not 0.0 < self.min_voiced_ratio <= 1.0:
            raise ValueError("min_voiced_ratio must be in (0, 1]")


class BargeInDetector:
    def __init__(self, reference: PlaybackReference, config: BargeInConfig | None = None,
                 vad: Vad | None = None):
        self.config = config or BargeInConfig()
        self.vad = vad or make_vad(self.config.vad)
        self.gate = EchoGate(reference, self.vad.frame_samples, self.config.gate)
        self.raw_gate = EchoGate(reference, self.vad.frame_samples, self.config.raw_gate)
        self._n = self.vad.frame_samples
        self._f = self._n / SAMPLE_RATE
        self._frames = Framer(self._n)
        self._raw_frames = Framer(self._n)
        self._raw: dict[int, np.ndarray] = {}   # raw frames by start time (in samples)
        self._turn_id: int | None = None
        self._run_start: float | None = None
        self._speech_start: float | None = None  # the utterance's first user frame (onset_gap_ms)
        self._last_user_end = 0.0
        self._user_frames = 0
        self._cancelling = False   # whether the cleaned audio is the canceller's output
        self.onset_t: float | None = None   # start of the speech that caused the last interrupt

    @property
    def armed(self) -> bool:
        return self._turn_id is not None

    def arm(self, turn_id: int) -> None:
        """Listen for barge-in while the reply to `turn_id` plays."""
        self._turn_id = turn_id
        self._run_start = self._speech_start = None

    @property
    def speaking_since(self) -> float | None:
        """Start of the user speech heard now that has not (yet) made an interrupt, or None."""
        return self._speech_start

    def disarm(self) -> None:
        self._turn_id = None
        self._run_start = self._speech_start = None

    def process(self, block: AudioBlock, raw: AudioBlock | None = None) -> list[Interrupt]:
        """Feed the mic audio after the echo canceller (`block`) and, better, the same audio
        before it (`raw`); returns the Interrupt, if this audio raised one."""
        if raw is not None:
            for t, frame in self._raw_frames.push(raw):
                self._raw[round(t * SAMPLE_RATE)] = frame
        events: list[Interrupt] = []
        for t, frame in self._frames.push(block):
            event = self._frame(frame, t, self._raw.pop(round(t * SAMPLE_RATE), None))
            if event is not None:
                events.append(event)
        if len(self._raw) > 64:   # raw audio with no cleaned counterpart
            for key in sorted(self._raw)[:-32]:
                del self._raw[key]
        return events

    def _frame(self, frame: np.ndarray, t: float, raw: np.ndarray | None) -> Interrupt | None:
        c = self.config
        if raw is not None and (cancelling := not np.array_equal(frame, raw)) != self._cancelling:
            self._cancelling = cancelling
            self.gate.forget_echo()
        voiced = self.vad.is_speech(frame)
        user = self.gate.user_dominant(frame, t, voiced)   # always: it keeps measuring the echo
        if raw is not None:
            user = self.raw_gate.user_dominant(raw, t, voiced) and user
        if self._turn_id is None:
            return None
        t_end = t + self._f
        if user and voiced:
            if self._speech_start is None or t - self._last_user_end > c.onset_gap_ms / 1000:
                self._speech_start = t
            if self._run_start is None or t - self._last_user_end > c.max_gap_ms / 1000:
                self._run_start, self._user_frames = t, 0
            self._last_user_end = t_end
            self._user_frames += 1
        else:
            if self._run_start is not None and t_end - self._last_user_end > c.max_gap_ms / 1000:
                self._run_start = None
            if self._speech_start is not None and t_end - self._last_user_end > c.onset_gap_ms / 1000:
                self._speech_start = None
        if self._run_start is None:
            return None
        span = t_end - self._run_start
        ratio = self._user_frames * self._f / span
        if span + 1e-9 >= c.min_speech_ms / 1000 and ratio >= c.min_voiced_ratio:
            event = Interrupt(turn_id=self._turn_id, t=t_end)
            self.onset_t = self._speech_start
            self.disarm()
            return event
        return None


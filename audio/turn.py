"""One user turn as the endpointer saw it: its times and the audio kept for it."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .blocks import SAMPLE_RATE
from .gate import Mode


@dataclass
class Turn:
    """One user turn as the endpointer saw it. Times are monotonic seconds."""
    turn_id: int
    mode: Mode
    start_t: float                     # SpeechStarted.t
    audio_t0: float                    # capture time of the first sample of the kept audio
    preroll_s: float
    tail_s: float
    first_voiced_t: float | None = None
    last_voiced_t: float | None = None  # end of the last voiced frame
    end_t: float | None = None          # TurnEnded.t; None while the turn is open
    resumed: int = 0                    # times the turn reopened after an early end
    _frames: list[np.ndarray] = field(default_factory=list, repr=False)
    _samples: int = 0
    _taken: int = 0  # frames already handed out by take_new_audio
    _taken_samples: int = 0

    @property
    def is_open(self) -> bool:
        return self.end_t is None

    def add_frame(self, frame: np.ndarray) -> None:
        self._frames.append(frame)
        self._samples += len(frame)

    def take_new_audio(self) -> tuple[float, np.ndarray] | None:
        """The audio added since the last call (untrimmed) and its first sample's time, or None:
        a consumer that streams the turn copies each sample once."""
        if self._taken == len(self._frames):
            return None
        t = self.audio_t0 + self._taken_samples / SAMPLE_RATE
        new = np.concatenate(self._frames[self._taken:])
        self._taken, self._taken_samples = len(self._frames), self._taken_samples + len(new)
        return t, new

    def audio(self, trimmed: bool = True) -> np.ndarray:
        """The turn's audio; trimmed to [first voiced - preroll, last voiced + tail] (the end
        only once the turn is over). Empty when nothing was voiced. `audio_start_t(trimmed)`
        gives the time of its first sample."""
        data = np.concatenate(self._frames) if self._frames else np.zeros(0, np.float32)
        if not trimmed:
            return data
        if self.first_voiced_t is None:
            return data[:0]
        a, b = self._trim_bounds(len(data))
        return data[a:b]

    def audio_start_t(self, trimmed: bool = True) -> float:
        if not trimmed or self.first_voiced_t is None:
            return self.audio_t0
        return self.audio_t0 + self._trim_bounds(self._samples)[0] / SAMPLE_RATE

    def _trim_bounds(self, n: int) -> tuple[int, int]:
        def index(t: float) -> int:
            return min(n, max(0, int(round((t - self.audio_t0) * SAMPLE_RATE))))
        a = index(self.first_voiced_t - self.preroll_s)
        b = n if self.is_open else index(self.last_voiced_t + self.tail_s)
        return a, max(a, b)

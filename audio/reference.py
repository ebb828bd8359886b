"""What the speaker played, kept on the monotonic clock for echo handling.

The playback sinks write every block they send to the output here, at 16 kHz, stamped with the
time its first sample reaches the output. The echo canceller and the barge-in gate read it back
at the times of microphone frames.
"""
from __future__ import annotations

import threading

import numpy as np

from .blocks import SAMPLE_RATE


class PlaybackReference:
    """A ring buffer of the last `capacity_s` of output audio, addressed by time.

    Times are quantised to 16 kHz samples of the monotonic clock; reading where nothing was
    written gives silence.
    """

    def __init__(self, capacity_s: float = 10.0, silence_db: float = -70.0):
        self._cap = int(capacity_s * SAMPLE_RATE)
        self._buf = np.zeros(self._cap, np.float32)
        self._lo: int | None = None   # oldest sample index held
        self._hi: int | None = None   # one past the newest sample index held
        self._lock = threading.Lock()
        self._silence = 10 ** (silence_db / 20)
        self.last_sound_t: float | None = None  # output time of the newest audible sample

    @staticmethod
    def _index(t: float) -> int:
        return int(round(t * SAMPLE_RATE))

    def write(self, samples: np.ndarray, t0: float) -> None:
        n = len(samples)
        if n == 0:
            return
        i0 = self._index(t0)
        with self._lock:
            if self._hi is None or i0 >= self._hi + self._cap:
                self._buf[:] = 0.0
                self._lo, self._hi = i0, i0
            elif i0 < self._lo:   # older than what is kept: only the part after it counts
                if i0 + n <= self._lo:
                    return
                samples, n, i0 = samples[self._lo - i0:], n - (self._lo - i0), self._lo
            if i0 > self._hi:   # silence between the last write and this one
                self._put(self._hi, np.zeros(i0 - self._hi, np.float32))
            if n > self._cap:
                samples, i0, n = samples[-self._cap:], i0 + n - self._cap, self._cap
            self._put(i0, np.asarray(samples, np.float32))
            self._hi = max(self._hi, i0 + n)
            self._lo = max(min(self._lo, i0), self._hi - self._cap)
        loud = np.flatnonzero(np.abs(samples) > self._silence)
        if len(loud):
            t_loud = (i0 + int(loud[-1]) + 1) / SAMPLE_RATE
            if self.last_sound_t is None or t_loud > self.last_sound_t:
                self.last_sound_t = t_loud

    def _put(self, i0: int, x: np.ndarray) -> None:
        p = i0 % self._cap
        k = min(len(x), self._cap - p)
        self._buf[p:p + k] = x[:k]
        if k < len(x):
            self._buf[:len(x) - k] = x[k:]

    def read(self, t0: float, n: int) -> np.ndarray:
        """`n` samples of what was played from time `t0` on (zeros where nothing is known)."""
        out = np.zeros(n, np.float32)
        i0 = self._index(t0)
        with self._lock:
            if self._hi is None:
                return out
            a, b = max(i0, self._lo), min(i0 + n, self._hi)
            if a >= b:
                return out
            p, m = a % self._cap, b - a
            k = min(m, self._cap - p)
            out[a - i0:a - i0 + k] = self._buf[p:p + k]
            if k < m:
                out[a - i0 + k:b - i0] = self._buf[:m - k]
        return out

    def active(self, t: float, within_s: float = 0.5) -> bool:
        """Whether anything audible was played in the `within_s` before `t` (or after it)."""
        return self.last_sound_t is not None and self.last_sound_t >= t - within_s

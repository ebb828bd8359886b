"""Mapping a device's sample counter onto the monotonic clock.

A stream delivers samples at a nominal rate; each callback also gives a noisy estimate of when
its first sample was captured (or will be played), already converted to `time.monotonic()`.
`ClockMapper` fits `t(n) = t0 + n / rate` to those estimates: it smooths callback jitter, follows
slow drift between the sound card's crystal and the system clock, ignores single late callbacks,
and re-anchors when samples were lost (an overflow) or the offset changed for good, so block
times never drift and jump only where the audio really has a gap.
"""
from __future__ import annotations


class ClockMapper:
    def __init__(self, rate: int, *, jump_s: float = 0.05, smoothing: float = 0.02,
                 persist: int = 3, max_step: float = 0.001):
        self.rate = float(rate)
        self.max_step = max_step      # largest correction of the fit per update, seconds
        self.jump_s = jump_s          # an estimate this far off the fit is an outlier ...
        self.persist = persist        # ... and this many in a row re-anchor the fit
        self.smoothing = smoothing    # weight of each new estimate in the running fit
        self._t0: float | None = None
        self._outliers = 0
        self._count = 0
        self.reanchors = 0

    def update(self, n: int, t_est: float, discontinuity: bool = False) -> float:
        """Feed the estimate `t_est` for sample `n`; returns the mapped time of sample `n`.

        `discontinuity`: the caller knows samples were lost here (an overflow); the fit is
        re-anchored at once. Otherwise a single late estimate (a callback that ran late) is
        ignored, and only a lasting offset moves the anchor.
        """
        t0_est = t_est - n / self.rate
        if self._t0 is None or discontinuity:
            self._anchor(t0_est)
        elif abs(t0_est - self._t0) > self.jump_s:
            self._outliers += 1
            if self._outliers >= self.persist:
                self._anchor(t0_est)
        else:
            self._outliers = 0
            self._count += 1   # a plain mean at first, then a running average, ...
            step = max(self.smoothing, 1.0 / self._count) * (t0_est - self._t0)
            # ... moved by at most max_step per update, so block times never jump.
            self._t0 += min(self.max_step, max(-self.max_step, step))
        return self.time_of(n)

    def _anchor(self, t0: float) -> None:
        if self._t0 is not None:
            self.reanchors += 1
        self._t0 = t0
        self._outliers = 0
        self._count = 1

    def time_of(self, n: float, rate: float | None = None) -> float:
        """Time of sample `n` counted at `rate` (default: the device rate) from the same start."""
        if self._t0 is None:
            raise RuntimeError("ClockMapper.time_of before the first update")
        return self._t0 + n / (rate or self.rate)

    @property
    def anchored(self) -> bool:
        return self._t0 is not None

"""How much audio a preparation makes before it holds, and the gate that holds it.

A policy turns (text, the engine's real-time factor) into seconds of audio to have ready. The
gate is the meeting point of the synthesis worker (which asks "may I go on?" between steps) and
the event loop (which releases the hold on `stream()` or cancels)."""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Protocol

from foresay.engine.tts.errors import InvalidTtsConfig


class HoldPolicy(Protocol):
    def target_seconds(self, text: str, rtf: float) -> float:
        """Seconds of audio to have ready before holding; math.inf means never hold."""


@dataclass(frozen=True)
class FixedHold:
    """Hold once `seconds` of audio are ready, whatever the engine's speed."""
    seconds: float = 1.0

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise InvalidTtsConfig(f"hold seconds must be positive, got {self.seconds}")

    def target_seconds(self, text: str, rtf: float) -> float:
        return self.seconds


@dataclass(frozen=True)
class UnderrunFreeHold:
    """Hold once playback could start and never run dry while the rest is synthesized.

    Playing from a buffer of B seconds while synthesis makes the remaining T - B seconds at
    `rtf` seconds of compute per second of audio never underruns when B >= (T - B)(rtf - 1),
    i.e. B >= T (rtf - 1) / rtf. T is estimated from the text length; `margin_s` covers the
    latency of resuming and the size of the next chunk."""
    margin_s: float = 0.4             # audio always prepared, even for a fast engine
    chars_per_second: float = 14.0    # speaking speed used to estimate T from the text

    def __post_init__(self) -> None:
        if not self.margin_s > 0:
            raise InvalidTtsConfig(f"margin_s must be positive, got {self.margin_s}")
        if not self.chars_per_second > 0:
            raise InvalidTtsConfig(f"chars_per_second must be positive, got {self.chars_per_second}")

    def target_seconds(self, text: str, rtf: float) -> float:
        if not rtf >= 0:
            raise InvalidTtsConfig(f"real-time factor must be non-negative, got {rtf}")
        total = len(text.strip()) / self.chars_per_second
        if rtf <= 1.0:
            return self.margin_s
        return self.margin_s + total * (rtf - 1.0) / rtf


class HoldGate:
    """Thread-safe: the worker calls `wait(ready_s)` between steps; it blocks while `ready_s`
    reaches the target and nobody released the hold, and returns False once cancelled."""

    def __init__(self, target_s: float) -> None:
        if math.isnan(target_s) or target_s < 0:
            raise InvalidTtsConfig(f"hold target must be >= 0 seconds, got {target_s}")
        self.target_s = target_s
        self._cond = threading.Condition()
        self._released = False
        self._cancelled = False
        self._holding = False

    @property
    def released(self) -> bool:
        return self._released

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def holding(self) -> bool:
        """True while the worker is blocked at the hold point."""
        return self._holding

    def reached(self, ready_s: float) -> bool:
        return not self._released and ready_s >= self.target_s

    def wait(self, ready_s: float, on_hold=None) -> bool:
        """Blocks while held; `on_hold` is called once, just before blocking."""
        with self._cond:
            if self.reached(ready_s) and not self._cancelled:
                self._holding = True
                if on_hold is not None:
                    on_hold()
                while not (self._released or self._cancelled):
                    self._cond.wait()
                self._holding = False
            return not self._cancelled

    def release(self) -> None:
        with self._cond:
            self._released = True
            self._cond.notify_all()

    def cancel(self) -> None:
        with self._cond:
            self._cancelled = True
            self._cond.notify_all()

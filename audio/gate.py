"""The user's controls for the endpointer: the mode, and push-to-talk presses and releases."""
from __future__ import annotations

import threading
import time

from foresay.engine.events import ListeningMode as Mode


class PushToTalkGate:
    """The user's controls, timestamped: push-to-talk presses and releases, and mode switches.

    Safe to call from any thread (a UI's key handler, the event loop). A time of None means now
    (`time.monotonic()`). The endpointer applies the controls in time order as its audio
    reaches them.
    """

    def __init__(self, mode: Mode | str = Mode.HANDS_FREE):
        self._lock = threading.Lock()
        self._pending: list[tuple[float, int, str, object]] = []
        self._seq = 0
        self._mode = Mode(mode)
        self._pressed = False

    @property
    def mode(self) -> Mode:
        """The mode most recently asked for (it applies once the audio reaches it)."""
        return self._mode

    @property
    def pressed(self) -> bool:
        return self._pressed

    def press(self, t: float | None = None) -> None:
        self._add(t, "press", True)
        self._pressed = True

    def release(self, t: float | None = None) -> None:
        self._add(t, "release", False)
        self._pressed = False

    def set_mode(self, mode: Mode | str, t: float | None = None) -> None:
        mode = Mode(mode)
        self._add(t, "mode", mode)
        self._mode = mode

    def _add(self, t: float | None, kind: str, value: object) -> None:
        with self._lock:
            self._seq += 1
            self._pending.append((time.monotonic() if t is None else float(t), self._seq, kind,
                                  value))
            self._pending.sort()

    def take_until(self, t: float) -> list[tuple[float, str, object]]:
        """Remove and return the controls at or before `t`, oldest first."""
        with self._lock:
            n = 0
            while n < len(self._pending) and self._pending[n][0] <= t:
                n += 1
            taken, self._pending = self._pending[:n], self._pending[n:]
        return [(t_, kind, value) for t_, _, kind, value in taken]

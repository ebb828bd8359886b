"""Taking turns on one model shared by several preparations (Zonos, Piper)."""
from __future__ import annotations

import threading


class ModelTurns:
    """One generation step at a time on the shared model; preparations being streamed go before
    those preparing ahead."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._urgent_waiting = 0

    def take(self, urgent: bool) -> None:
        with self._cond:
            self._urgent_waiting += urgent
            while self._busy or (not urgent and self._urgent_waiting):
                self._cond.wait()
            self._urgent_waiting -= urgent
            self._busy = True

    def give(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()

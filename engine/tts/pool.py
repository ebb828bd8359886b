"""The bound on how many preparations are held at once; the oldest is cancelled first."""
from __future__ import annotations

from foresay.engine.tts.errors import InvalidTtsConfig
from foresay.engine.tts.prepared import Prepared


class HeldPreparations:
    """Tracks held preparations; streamed or cancelled ones leave it by themselves."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise InvalidTtsConfig(f"at least one preparation must be allowed, got max_held={limit}")
        self.limit = limit
        self._items: list[Prepared] = []

    def add(self, prepared: Prepared) -> list[Prepared]:
        """Adds one; returns the older ones it cancelled to stay within the limit."""
        self._items = [p for p in self._items if p.is_held]
        self._items.append(prepared)
        evicted = []
        while len(self._items) > self.limit:
            oldest = self._items.pop(0)
            oldest.cancel()
            evicted.append(oldest)
        return evicted

    def held(self) -> list[Prepared]:
        return [p for p in self._items if p.is_held]

    def cancel_all(self) -> None:
        for p in self._items:
            p.cancel()
        self._items = []

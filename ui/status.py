"""What the status area shows: the latest message and each component's loading progress.

Plain Python, no Qt; fed by the bridge, read by the window on its timer.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from foresay.engine.events import Event, LoadProgress, StatusMessage


@dataclass
class StatusModel:
    message: str = ""
    level: str = "info"        # info | warning | error
    errors: list[str] = field(default_factory=list)  # every error since start, oldest first
    loading: dict[str, LoadProgress] = field(default_factory=dict)  # components not finished yet
    version: int = 0

    def apply(self, event: Event) -> bool:
        if isinstance(event, StatusMessage):
            self.message, self.level = event.text, event.level
            if event.level == "error":
                self.errors.append(event.text)
        elif isinstance(event, LoadProgress):
            if event.finished:
                self.loading.pop(event.component, None)
            else:
                self.loading[event.component] = event
        else:
            return False
        self.version += 1
        return True

    def report_error(self, text: str) -> None:
        """An error found in the UI itself (e.g. an event it could not show)."""
        self.apply(StatusMessage(0, 0.0, text=text, level="error"))

    def overall_progress(self) -> float | None:
        """Mean loaded fraction of the components still loading (units differ between them);
        None when nothing is loading or a total is unknown."""
        fractions = [p.fraction for p in self.loading.values()]
        if not fractions or None in fractions:
            return None
        return sum(fractions) / len(fractions)

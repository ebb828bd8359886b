"""Colours shared by the window and the overlay, so a stage looks the same everywhere."""
from __future__ import annotations

STAGE_COLORS = {
    "endpoint": "#5b8def",
    "asr": "#3fb68b",
    "llm": "#f0a830",
    "tts": "#e0605e",
    "output": "#9b7fd4",
}

# The three parts of a PredGen draft.
DRAFT_ACCEPTED = "#2e7d32"   # survived verification
DRAFT_REJECTED = "#c62828"   # thrown away by it (shown struck through)
DRAFT_NEW = "#1565c0"        # drafted after the accepted prefix

TENTATIVE = "#8a8a8a"        # the partial transcript's words that may still change
ERROR = "#c62828"
WARNING = "#b26a00"


def format_ms(ms: float | None) -> str:
    """'—' when not measured, '840 ms' below 10 s, '12.3 s' above."""
    if ms is None:
        return "\u2014"
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"

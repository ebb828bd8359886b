"""The records of `foresay bench turns`: the truth of a recording's turns and what a run observed."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class TruthTurn:
    start_s: float
    end_s: float
    text: str


@dataclass(frozen=True)
class Recording:
    audio: Path
    turns: tuple[TruthTurn, ...]


@dataclass
class Observed:
    """One replay's events, times relative to the recording's first sample."""
    started: dict[int, float] = field(default_factory=dict)
    ends: list[tuple[int, float, float]] = field(default_factory=list)   # (turn, t, last_voiced_t)
    resumed: list[tuple[int, float]] = field(default_factory=list)
    finals: list[tuple[int, str]] = field(default_factory=list)
    metrics: dict[int, dict] = field(default_factory=dict)
    outcomes: dict[int, str] = field(default_factory=dict)   # TurnClosed.outcome per turn
    kept: dict[int, float] = field(default_factory=dict)  # turn -> the end its reply answered, resumed or not

"""Splitting text into the pieces a TTS engine synthesizes one at a time: sentences, and over-long
sentences at clause boundaries. Each piece keeps its character span in the original text."""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass

from foresay.engine.tts.errors import InvalidTtsConfig, NothingToSay

# A sentence ends at ., !, ? or an ellipsis followed by whitespace, or right after CJK full stops.
_SENTENCE_END = re.compile(r"(?<=[.!?\u2026])\s+|(?<=[\u3002\uff01\uff1f])")
_CLAUSE_END = re.compile(r"(?<=[,;:\u3001\uff0c])\s*")


@dataclass(frozen=True)
class Segment:
    """A piece of text to synthesize; `start`/`end` index the original text (end exclusive)."""
    text: str
    start: int
    end: int

    @property
    def span(self) -> tuple[int, int]:
        return (self.start, self.end)


@dataclass(frozen=True)
class SentenceSplitter:
    """Splits at sentence ends; sentences longer than `max_chars` are split again at clause marks
    (, ; :) and, failing those, at the last space before the limit."""
    max_chars: int = 240  # longest piece handed to the engine in one call

    def __post_init__(self) -> None:
        if self.max_chars < 8:
            raise InvalidTtsConfig(f"max_chars must be at least 8, got {self.max_chars}")

    def split(self, text: str) -> tuple[Segment, ...]:
        if not text.strip():
            raise NothingToSay("there is no text to speak (empty or only whitespace)")
        pieces: list[Segment] = []
        for start, end in _pieces(text, 0, len(text), _SENTENCE_END):
            pieces.extend(self._limit(text, start, end))
        return tuple(pieces)

    def _limit(self, text: str, start: int, end: int) -> list[Segment]:
        if end - start <= self.max_chars:
            return [Segment(text[start:end], start, end)]
        out: list[Segment] = []
        for s, e in _pieces(text, start, end, _CLAUSE_END):
            while e - s > self.max_chars:
                cut = text.rfind(" ", s + 1, s + self.max_chars)
                cut = cut if cut > s else s + self.max_chars
                out.append(Segment(text[s:cut], s, cut))
                s = _skip_space(text, cut, e)
            if s < e:
                out.append(Segment(text[s:e], s, e))
        return out


def _pieces(text: str, start: int, end: int, boundary: re.Pattern) -> list[tuple[int, int]]:
    """Non-blank stretches of text[start:end] between boundary matches, whitespace trimmed."""
    out = []
    pos = start
    for m in boundary.finditer(text, start, end):
        out.append((pos, m.start()))
        pos = m.end()
    out.append((pos, end))
    trimmed = []
    for s, e in out:
        s = _skip_space(text, s, e)
        while e > s and text[e - 1].isspace():
            e -= 1
        if s < e:
            trimmed.append((s, e))
    return trimmed


def _skip_space(text: str, pos: int, end: int) -> int:
    while pos < end and text[pos].isspace():
        pos += 1
    return pos


class SegmentJob(ABC):
    """A synthesis job that speaks segments in order, asking the sink between them whether to go
    on (the hold point, or a cancel)."""

    def __init__(self, segments: tuple[Segment, ...]) -> None:
        self._segments = segments

    def run(self, sink) -> None:
        for index, segment in enumerate(self._segments):
            if not sink.proceed() or not self._speak(segment, index, sink):
                return

    @abstractmethod
    def _speak(self, segment: Segment, index: int, sink) -> bool:
        """Synthesizes one segment into the sink; False when it stopped early (cancelled)."""

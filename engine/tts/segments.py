"""Splitting text into the pieces a TTS engine synthesizes one at a time: sentences, and over-long
sentences at clause boundaries. Each piece keeps its character span in the original text."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from foresay.engine.sentences import SplitterConfig, split_sentences
from foresay.engine.tts.errors import InvalidTtsConfig, NothingToSay


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
class SegmentSplitter:
    """Splits at sentence ends (the rules of `foresay.engine.sentences`: abbreviations, decimals
    and list numbers do not end a sentence); sentences longer than `max_chars` are cut at a
    clause mark (, ; : or a dash) and, failing those, at the last space before the limit."""
    max_chars: int = 240  # longest piece handed to the engine in one call

    def __post_init__(self) -> None:
        if self.max_chars < 8:
            raise InvalidTtsConfig(f"max_chars must be at least 8, got {self.max_chars}")

    def split(self, text: str) -> tuple[Segment, ...]:
        if not text.strip():
            raise NothingToSay("there is no text to speak (empty or only whitespace)")
        config = SplitterConfig(max_chars=self.max_chars, min_cut_chars=max(1, self.max_chars // 6))
        sentences, _ = split_sentences(text, final=True, config=config)
        return tuple(Segment(s.text, s.start, s.end) for s in sentences)


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

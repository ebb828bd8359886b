"""A deterministic stand-in recognizer for testing and measuring the streaming logic.

Random Whisper fixtures do not hear words, so streaming behaviour (commits, corrections,
trimming, delays) is checked against `SyntheticUtterance`: each word is a burst of constant
level that encodes the word's index, separated by short gaps, with longer pauses where the
script says. `ScriptedBackend` "recognizes" exactly what a window contains: complete words,
a fragment of a word still being spoken, and, like a real model, a wrong guess for a
confusable word until the next word is heard.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from foresay.engine.asr.backends import AsrBackend, Hypothesis, TokenText
from foresay.engine.asr.errors import InvalidAsrConfig
from foresay.engine.asr.whisper.models import SAMPLE_RATE

BASE_LEVEL, LEVEL_STEP, SILENCE = 0.05, 0.002, 0.02


@dataclass(frozen=True)
class SyntheticUtterance:
    words: tuple[str, ...]
    word_ms: int = 300
    gap_ms: int = 60
    pause_ms: int = 500
    pause_after: frozenset[int] = frozenset()  # indices of words followed by a long pause
    lead_ms: int = 200

    def __post_init__(self) -> None:
        if not self.words or len(self.words) > 200:
            raise InvalidAsrConfig("a synthetic utterance needs 1..200 words")

    def timeline(self) -> list[tuple[int, int]]:
        """(start, end) sample of every word."""
        spans, at = [], self.lead_ms * SAMPLE_RATE // 1000
        for i in range(len(self.words)):
            end = at + self.word_ms * SAMPLE_RATE // 1000
            spans.append((at, end))
            at = end + (self.pause_ms if i in self.pause_after else self.gap_ms) * SAMPLE_RATE // 1000
        return spans

    def audio(self) -> np.ndarray:
        spans = self.timeline()
        out = np.zeros(spans[-1][1] + self.pause_ms * SAMPLE_RATE // 1000, dtype=np.float32)
        for i, (start, end) in enumerate(spans):
            out[start:end] = BASE_LEVEL + LEVEL_STEP * i
        return out

    def word_ends_s(self) -> list[float]:
        return [end / SAMPLE_RATE for _, end in self.timeline()]


class WordText(TokenText):
    """One token per word or fragment; every token starts a word."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.ids: dict[str, int] = {}

    def id(self, piece: str) -> int:
        if piece not in self.ids:
            self.ids[piece] = len(self.pieces)
            self.pieces.append(piece)
        return self.ids[piece]

    def decode(self, tokens: Sequence[int]) -> str:
        return "".join(" " + self.pieces[t] for t in tokens)

    def encode(self, text: str) -> list[int]:
        return [self.id(word) for word in text.split()]

    def is_word_start(self, token: int) -> bool:
        return True


@dataclass
class ScriptedBackend(AsrBackend):
    utterance: SyntheticUtterance
    confusions: dict[int, str] = field(default_factory=dict)  # word index -> wrong guess while it is last
    text: WordText = field(default_factory=WordText)
    calls: list[dict] = field(default_factory=list)

    def transcribe(self, audio, forced=(), prompt=(), guess=()) -> Hypothesis:
        self.calls.append({"samples": len(audio), "forced": tuple(forced), "prompt": tuple(prompt)})
        words = self._hear(np.asarray(audio))
        tokens = [self.text.id(w) for w in words]
        return Hypothesis(tuple(tokens[len(forced):]))

    def _hear(self, audio: np.ndarray) -> list[str]:
        loud = np.abs(audio) > SILENCE
        edges = np.flatnonzero(np.diff(np.concatenate([[0], loud.astype(np.int8), [0]])))
        bursts = list(zip(edges[::2], edges[1::2]))
        words = []
        for n, (start, end) in enumerate(bursts):
            index = int(round((float(np.median(audio[start:end])) - BASE_LEVEL) / LEVEL_STEP))
            if not 0 <= index < len(self.utterance.words):
                continue
            word = self.utterance.words[index]
            still_speaking = end == len(audio)
            if still_speaking:
                spoken = (end - start) / (self.utterance.word_ms * SAMPLE_RATE / 1000)
                if spoken < 1.0:
                    word = word[: max(1, int(len(word) * spoken))]
            last = n == len(bursts) - 1
            if last and index in self.confusions:
                word = self.confusions[index]
            words.append(word)
        return words

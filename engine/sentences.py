"""Incremental sentence splitting for text that arrives token by token.

A sentence ends at `.`, `?` or `!` (closing quotes and brackets stay with it) once the next
character is seen to be white space followed by something that can start a sentence, or at a line
break. Abbreviations ("e.g.", "Dr.", "U.S.", initials), decimals ("3.14"), ellipses inside a
sentence, list numbers ("1.") and URLs do not end one. A run-on sentence is cut at a soft break
(comma, semicolon, colon, dash, else a space) before `max_chars`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_TERMINATORS = ".?!…"
_CJK_TERMINATORS = "。！？"  # end a sentence without a following space
_CLOSERS = "\"')]}»”’"
ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "mt", "fig", "approx", "dept",
    "inc", "ltd", "co", "corp", "gen", "col", "lt", "sgt", "rev", "hon", "est", "ave", "blvd",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
})
_DOTTED = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]$")  # e.g, i.e, U.S, a.m (before the final dot)
_LIST_NUMBER = re.compile(r"(?:^|\n)[ \t]*(?:\d{1,3}|[A-Za-z])$")  # "1" or "a" opening a line
_SOFT_BREAK = re.compile(r"[,;:]\s|\s[–—-]\s")


@dataclass(frozen=True)
class SplitterConfig:
    """max_chars: a sentence longer than this is cut at a soft break (>= min_cut_chars in).
    abbreviations: lower-case words whose trailing dot never ends a sentence."""
    max_chars: int = 250
    min_cut_chars: int = 40
    abbreviations: frozenset = ABBREVIATIONS

    def __post_init__(self):
        if not 0 < self.min_cut_chars < self.max_chars:
            raise ValueError("SplitterConfig needs 0 < min_cut_chars < max_chars")


@dataclass(frozen=True)
class Sentence:
    text: str   # stripped
    start: int  # span in the source text, white space around the sentence excluded
    end: int


def _word_before(text: str, dot: int) -> str:
    i = dot
    while i > 0 and not text[i - 1].isspace() and text[i - 1] not in "([\"'":
        i -= 1
    return text[i:dot]


def _dot_is_not_an_end(text: str, start: int, dot: int, config: SplitterConfig) -> bool:
    """Whether the '.' at `dot` belongs to an abbreviation, an initial or a list number."""
    word = _word_before(text, dot)
    bare = word.lstrip("\"'([")
    if bare.lower() in config.abbreviations or _DOTTED.fullmatch(bare):
        return True
    if len(bare) == 1 and bare.isupper():  # an initial: "J. K. Rowling"
        return True
    return bool(_LIST_NUMBER.search(text[start:dot])) and text[start:dot].strip() == bare


def next_boundary(text: str, start: int, final: bool, config: SplitterConfig = SplitterConfig()
                  ) -> int | None:
    """End (exclusive) of the sentence that begins at `start`, or None if it is not complete yet.

    With `final`, the end of `text` ends the last sentence.
    """
    n = len(text)
    i = start
    while i < n:
        ch = text[i]
        if ch == "\n" and text[start:i].strip():
            return i
        if ch in _CJK_TERMINATORS:
            j = i + 1
            while j < n and text[j] in _CLOSERS + _CJK_TERMINATORS:
                j += 1
            if j < n or final:
                return j
            return _cap(text, start, n, final, config)
        if ch in _TERMINATORS:
            j = i
            while j < n and text[j] in _TERMINATORS:
                j += 1
            while j < n and text[j] in _CLOSERS:
                j += 1
            if j == n:
                return _cap(text, start, n, final, config) or (n if final else None)
            if text[j].isspace():
                k = j
                while k < n and text[k] in " \t":
                    k += 1
                if k == n and not final:
                    return _cap(text, start, n, final, config)  # wait for the next word
                single_dot = text[i:j].rstrip(_CLOSERS) == "."
                if single_dot and _dot_is_not_an_end(text, start, i, config):
                    i = j
                    continue
                if k < n and text[k].islower():  # "e.g. the", "wait... then": not an end
                    i = j
                    continue
                return j
            i = j
            continue
        i += 1
    capped = _cap(text, start, n, final, config)
    if capped is None and final and text[start:].strip():
        return n
    return capped


def _cap(text: str, start: int, n: int, final: bool, config: SplitterConfig) -> int | None:
    if n - start <= config.max_chars:
        return None
    window = text[start:start + config.max_chars]
    cut = None
    for match in _SOFT_BREAK.finditer(window):
        if match.start() + 1 >= config.min_cut_chars:
            cut = match.start() + 1
    if cut is None:
        space = window.rfind(" ", config.min_cut_chars)
        cut = space if space > 0 else config.max_chars
    return start + cut


def _make(text: str, start: int, end: int) -> Sentence | None:
    chunk = text[start:end]
    stripped = chunk.strip()
    if not stripped:
        return None
    lead = len(chunk) - len(chunk.lstrip())
    return Sentence(stripped, start + lead, start + lead + len(stripped))


def split_sentences(text: str, final: bool = True, config: SplitterConfig = SplitterConfig()
                    ) -> tuple[list[Sentence], int]:
    """All complete sentences of `text` and the offset where the unfinished rest begins."""
    sentences: list[Sentence] = []
    pos = 0
    while pos < len(text):
        end = next_boundary(text, pos, final, config)
        if end is None:
            break
        sentence = _make(text, pos, end)
        if sentence:
            sentences.append(sentence)
        pos = end
    return sentences, pos


def first_sentence(text: str, final: bool = False, config: SplitterConfig = SplitterConfig()
                   ) -> Sentence | None:
    pos = 0
    while pos < len(text):
        end = next_boundary(text, pos, final, config)
        if end is None:
            return None
        sentence = _make(text, pos, end)
        if sentence:
            return sentence
        pos = end
    return None


class SentenceSplitter:
    """Feeds a growing text; returns each sentence once, as soon as it is complete."""

    def __init__(self, config: SplitterConfig = SplitterConfig()):
        self.config = config
        self._text = ""
        self._pos = 0

    def feed(self, text: str, final: bool = False) -> list[Sentence]:
        if text[:self._pos] != self._text[:self._pos]:
            raise ValueError("SentenceSplitter.feed: text already split into sentences changed")
        self._text = text
        out: list[Sentence] = []
        while self._pos < len(text):
            end = next_boundary(text, self._pos, final, self.config)
            if end is None:
                break
            sentence = _make(text, self._pos, end)
            if sentence:
                out.append(sentence)
            self._pos = end
        return out

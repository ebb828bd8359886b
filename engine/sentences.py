"""Incremental sentence splitting for text that arrives token by token.

A sentence ends at `.`, `?` or `!` (closing quotes and brackets stay with it) once what follows
shows it: white space, then something that can start a sentence. Until then the splitter waits,
so a sentence, once returned, never changes. Not an end: a lower-case or digit continuation
("e.g. the", "p. 55", "Yahoo! in"), a title before a name ("Dr. Smith"), an abbreviation, initial
or dotted abbreviation ("U.S.") unless a typical sentence opener follows ("U.S. How ..."), decimals
and addresses ("3.14", "x.org"), "[...]", a spaced ellipsis (". . .") inside a sentence. Line
breaks end sentences; inline list items ("1) a 2) b", "a. x b. y", "• one • two") split before
the next item. CJK terminators need no space. A run-on sentence is cut at a soft break (comma,
semicolon, colon, dash, else a space) before `max_chars`.

Measured against pySBD's English golden rules: `tests/test_sentences_golden.py`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_CJK_TERMINATORS = "。！？"  # end a sentence without a following space
_TRAILING_MARKS = ".?!,;:…" + _CJK_TERMINATORS  # what may follow a transcript's last word
_CLOSERS = "\"')]}»”’"
_OPENERS = "\"'([{«“‘"
# Titles and other words written before a name: their dot never ends a sentence.
PREPOSITIVE = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "st", "mt", "gen", "col", "lt", "sgt", "capt", "cmdr", "rev",
    "hon", "sen", "rep", "gov", "pres", "supt", "messrs", "vs", "ft",
})
# Abbreviations that may also end a sentence ("... and Co. They left."): an end only before an opener.
ABBREVIATIONS = frozenset({
    "sr", "jr", "co", "inc", "ltd", "corp", "dept", "est", "ave", "blvd", "approx", "etc", "fig",
    "al", "no", "nos", "vol", "pp", "ch", "sec", "min", "max", "cf", "ed", "eds", "op", "cit",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "mon", "tue", "tues", "wed", "thu", "thurs", "fri", "sat", "sun",
})
# Words that typically open a sentence: after an abbreviation, an initial or "U.S.", such a
# capitalised word starts a new sentence ("I live in the U.S. How about you?"); other capitalised
# words are taken as names ("the U.S. Army", "Jonas E. Smith").
OPENERS = frozenset("""
a about after all also although an and another any anything anyway are as at because before
being besides both but by can could did do does during each even every finally first for from
good great had has have he hello her here hi his how however i if in instead is it its just let
many may maybe meanwhile millions more most my never next no not note now of ok okay on once one
only otherwise our perhaps please she should since so some sorry still such sure thank thanks that
the their then there therefore these they this those though thus to today too two unfortunately
usually was we well were what when where whether which while who why will with would yes yet you
your
""".split())
SENTENCE_ENDS = (".", "?", "!", *_CJK_TERMINATORS)


def ends_in_number(text: str) -> bool:
    """Whether a transcript's last word is a number written in digits ("dial 555-0199", "4729."):
    a Whisper writes no sentence end after one, finished or not, so its punctuation says nothing
    there about the end of the request."""
    last = text.rstrip().rstrip(_TRAILING_MARKS)
    return last[-1:].isdigit()


def ends_sentence(text: str) -> bool:
    """Whether a whole transcript ends a sentence: its last mark is . ? or ! (an ellipsis trails
    off). The recognizer's punctuation, read by the end-of-turn decision and the recognizer evals."""
    text = text.rstrip()
    return text.endswith(SENTENCE_ENDS) and not text.endswith(("..", "…"))


_DOTTED = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")       # e.g, U.S, a.m (before the final dot)
_TIME = re.compile(r"[AP]\.M")                         # "6 P.M. Mr. Smith": upper-case times end
_MARKER = re.compile(r"\s*(?:([•⁃▪◦‣])[ \t]*)?(?:(\d{1,3}|[a-z])(\.\)|\)|\.))?(?=\s)")
_SOFT_BREAK = re.compile(r"[,;:]\s|\s[–—-]\s")


@dataclass(frozen=True)
class SplitterConfig:
    """max_chars: a sentence longer than this is cut at a soft break (>= min_cut_chars in).
    prepositive: lower-case words (titles) whose dot never ends a sentence.
    abbreviations: lower-case words whose dot ends a sentence only before an opener word.
    openers: lower-case words that start a sentence after an abbreviation or initial."""
    max_chars: int = 250
    min_cut_chars: int = 40
    prepositive: frozenset = PREPOSITIVE
    abbreviations: frozenset = ABBREVIATIONS
    openers: frozenset = OPENERS

    def __post_init__(self):
        if not 0 < self.min_cut_chars < self.max_chars:
            raise ValueError("SplitterConfig needs 0 < min_cut_chars < max_chars")


@dataclass(frozen=True)
class Sentence:
    text: str   # stripped
    start: int  # span in the source text, white space around the sentence excluded
    end: int


_WAIT = -1  # a decision needs text that has not arrived yet


def _word_before(text: str, dot: int, start: int) -> str:
    i = dot
    while i > start and not text[i - 1].isspace() and text[i - 1] not in _OPENERS:
        i -= 1
    return text[i:dot]


def _next_word(text: str, k: int, final: bool) -> str | None:
    """The word of letters at `k`; None while it may still grow."""
    j = k
    while j < len(text) and text[j].isalpha():
        j += 1
    return None if j == len(text) and not final else text[k:j]


def _skip_blanks(text: str, j: int) -> int:
    while j < len(text) and text[j] in " \t":
        j += 1
    return j


def _after_closers(text: str, j: int) -> int:
    while j < len(text) and text[j] in _CLOSERS:
        j += 1
    return j


class _Scan:
    """Finds the end of the one sentence that begins at `start`."""

    def __init__(self, text: str, start: int, final: bool, config: SplitterConfig):
        self.text, self.n, self.start, self.final, self.config = text, len(text), start, final, config
        self.next_item: re.Pattern | None = None
        self.i = start
        self.pending: int | None = None  # where a decision waits for more text

    def list_marker(self) -> None:
        """A sentence opening with a list marker ("2.)", "b.", "• 9.") ends before the next one."""
        m = _MARKER.match(self.text, self.start)
        if not m or not (m.group(1) or m.group(2)):
            return
        bullet, value, punct = m.group(1), m.group(2), m.group(3)
        if bullet:
            self.next_item = re.compile(r"\s[ \t]*" + re.escape(bullet))
        else:
            succ = str(int(value) + 1) if value.isdigit() else chr(ord(value) + 1)
            self.next_item = re.compile(r"\s[ \t]*" + succ + re.escape(punct) + r"\s")
        self.i = m.end()

    def run(self) -> int | None:
        text, n = self.text, self.n
        self.list_marker()
        while self.i < n:
            ch = text[self.i]
            if ch.isspace():
                if ch == "\n" and text[self.start:self.i].strip():
                    return self.i
                if self.next_item and self.next_item.match(text, self.i):
                    return self.i
                self.i += 1
                continue
            if ch in _CJK_TERMINATORS:
                j = self.i + 1
                while j < n and text[j] in _CLOSERS + _CJK_TERMINATORS:
                    j += 1
                if j < n or self.final:
                    return j
                self.pending = self.i
                return None
            if ch in ".?!…":
                end = self.terminator()
                if end == _WAIT:
                    self.pending = self.i
                    return None
                if end is not None:
                    return end
                continue
            self.i += 1
        return n if self.final and text[self.start:].strip() else None

    def terminator(self) -> int | None:
        """At a terminator: the sentence's end, None to go on (self.i advanced), or _WAIT."""
        text, n, i = self.text, self.n, self.i
        if text[i] == "." and i > 0 and text[i - 1] == " ":
            ahead = text[i + 1:i + 3]
            if ahead == " .":
                return self.spaced_ellipsis()
            if " .".startswith(ahead) and not self.final:
                return _WAIT
        j = i
        while j < n and text[j] in ".?!…":
            j += 1
        run = text[i:j]
        if i > 0 and text[i - 1] == "[" and j < n and text[j] == "]":  # "[...]"
            self.i = j
            return None
        j = _after_closers(text, j)
        if j == n:
            return n if self.final else _WAIT
        if not text[j].isspace():  # "3.14", "x.org", "Jr.'s", "mean...see"
            self.i = j
            return None
        k = _skip_blanks(text, j)
        if k == n:
            return j if self.final else _WAIT
        if text[k] == "\n":
            return j
        nxt = text[k]
        if run != ".":
            if nxt.islower():  # "Yahoo! in", "well... then"
                self.i = j
                return None
            return j
        if nxt == ".":
            return self.dot_then_ellipsis(j)
        if nxt.islower() or nxt.isdigit():  # "e.g. the", "p. 55"
            self.i = j
            return None
        verdict = self.abbreviation(i, k)
        if verdict == _WAIT:
            return _WAIT
        if verdict:
            self.i = j
            return None
        return j

    def abbreviation(self, dot: int, k: int) -> bool | int:
        """Whether the dot at `dot` belongs to an abbreviation, given the next word at `k`."""
        bare = _word_before(self.text, dot, self.start)
        low = bare.lower()
        if low in self.config.prepositive:
            return True
        dotted = bool(_DOTTED.fullmatch(bare))
        initial = len(bare) == 1 and bare.isalpha()
        if not (dotted or initial or low in self.config.abbreviations):
            return False
        if dotted and _TIME.fullmatch(bare):
            return False
        word = _next_word(self.text, k, self.final)
        if word is None:
            return _WAIT
        word = word.lower()
        if initial and len(word) == 1:  # "J. K. Rowling", "J. A. Smith"
            return True
        return word not in self.config.openers

    def dot_then_ellipsis(self, j: int) -> int | None:
        """"word. . . . Next": the first dot ends the sentence, the next one opens with ". . ."."""
        text = self.text
        tail = text[j:j + 6]
        if len(tail) < 6 and " . . .".startswith(tail) and not self.final:
            return _WAIT
        if tail != " . . .":
            return j
        after = _after_closers(text, j + 6)
        rest = text[after:after + 80]
        if not rest.strip(" \t"):
            if not self.final:
                return _WAIT
            self.i = j
            return None
        k = _skip_blanks(text, after)
        if text[k] == "\n":  # the line ends the sentence, ellipsis included
            return after
        if text[k].islower():
            self.i = after
            return None
        return j

    def spaced_ellipsis(self) -> int | None:
        """". . ." inside a sentence goes on; ". . . ." then a capital ends it."""
        text, n, i = self.text, self.n, self.i
        j = i + 1
        dots = 1
        while j + 1 < n and text[j] == " " and text[j + 1] == ".":
            j += 2
            dots += 1
        if (j == n or (j + 1 == n and text[j] == " ")) and not self.final:
            return _WAIT
        if dots < 4:
            self.i = j
            return None
        j = _after_closers(text, j)
        k = _skip_blanks(text, j)
        if k == n:
            return n if self.final else _WAIT
        if text[k].islower():
            self.i = j
            return None
        return j


def next_boundary(text: str, start: int, final: bool, config: SplitterConfig = SplitterConfig()
                  ) -> int | None:
    """End (exclusive) of the sentence that begins at `start`, or None if it is not complete yet.

    With `final`, the end of `text` ends the last sentence. A sentence longer than
    `config.max_chars` is cut at a soft break, the same way whether found early or late.
    """
    scan = _Scan(text, start, final, config)
    end = scan.run()
    if end is not None and end - start <= config.max_chars:
        return end
    if end is None and scan.pending is not None and scan.pending - start < config.max_chars \
            and len(text) - start <= 2 * config.max_chars:
        return None  # an end inside the cap may yet be confirmed: cut only once it is refuted
    return _cap(text, start, len(text), config) or end


def _cap(text: str, start: int, n: int, config: SplitterConfig) -> int | None:
    if n - start <= config.max_chars:
        return None
    window = text[start:start + config.max_chars]
    lead = len(window) - len(window.lstrip())
    cut = None
    for match in _SOFT_BREAK.finditer(window):
        if match.start() + 1 - lead >= config.min_cut_chars:
            cut = match.start() + 1
    if cut is None:
        space = window.rfind(" ", lead + config.min_cut_chars)
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

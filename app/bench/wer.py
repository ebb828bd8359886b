"""How the benchmarks compare a transcript with its truth: words without punctuation, number
words up to twelve as digits and digit runs one digit a word ("94110", "94-110" and "9 4 1 1 0"
read the same: Whisper writes any of them, and a reader hears no difference)."""
from __future__ import annotations

_NUMBERS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}


def scored_words(text: str) -> list[str]:
    from foresay.engine.sequences import words

    out = []
    for word in words(text):
        word = _NUMBERS.get(word, word)
        out.extend(word if word.isdigit() else [word])
    return out


"""Small functions on token and word sequences shared by the LLM and the ASR code."""
from __future__ import annotations

import re
from typing import Sequence


def words(text: str) -> list[str]:
    """Lower-case words without punctuation (apostrophes kept): what transcripts are compared by."""
    return re.sub(r"[^\w' ]+", " ", text.lower()).split()


def extends(text: str, longer: str) -> bool:
    """Whether `longer` says every word of `text`, from the first, and then more."""
    before, after = words(text), words(longer)
    return len(after) > len(before) and after[:len(before)] == before


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading items `a` and `b` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i

"""Whisper's own probability that a sentence ended where its transcript ends.

A Whisper writes ". ? !" from the voice as much as from the words: trained on people's speech,
it hears a falling pitch and a lengthened last word as a sentence end, and speech that runs on
(a speaker who stops mid-request to think) as none. Its greedy transcript says only which mark
won; the distribution at that step says how sure it was. At the step right after the last word
(the first of the trailing punctuation marks, or the end-of-text when there is none) the sum of
the probabilities of the tokens that begin with ". ? !" (an ellipsis trails off: not an end) is
`p_sentence_end`. The same step's ", ; : …" (`p_goes_on`) say the clause goes on: at a speaker's
pause inside a request Whisper puts more there than after a request's last word, and that tells
the two apart better than P(". ? !") does (docs/benchmarks.md, "Why the p90 and the cuts stay").
It costs nothing: the decode returns the step's logits.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

ENDS = ".?!"
MARKS = set(".?!,;:…")


class SentenceEnd:
    """The token classes of one Whisper vocabulary (byte-level BPE: "Ġ" is a leading space)."""

    def __init__(self, vocab: Mapping[str, int]):
        ends, marks = [], set()
        for token, i in vocab.items():
            text = token.replace("Ġ", "").strip()
            if text[:1] in ENDS and not text.startswith(".."):
                ends.append(i)
            if text and set(text) <= MARKS:
                marks.add(i)
        self.end_ids = np.array(sorted(ends), dtype=np.int64)
        self.mark_ids = marks
        self.on_ids = np.array(sorted(marks - set(ends)), dtype=np.int64)

    def probabilities(self, ids: Sequence[int], logits: Sequence) -> tuple[float, float] | None:
        """(P(". ? !"), P(", ; : …")) after the last word of a decode whose tokens are `ids` (the
        forced ones included) and whose step logits are `logits` (one per token of `ids`, then the
        end-of-text step): the sentence ended, the clause goes on. None: the decode did not end
        with end-of-text (it hit its length limit)."""
        if len(logits) != len(ids) + 1:
            return None
        step = len(ids)
        while step > 0 and ids[step - 1] in self.mark_ids:
            step -= 1
        row = np.asarray(logits[step], dtype=np.float64).reshape(-1)
        p = np.exp(row - row.max())
        p /= p.sum()
        return float(p[self.end_ids[self.end_ids < len(p)]].sum()), float(p[self.on_ids[self.on_ids < len(p)]].sum())

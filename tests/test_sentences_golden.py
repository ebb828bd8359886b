"""The English "Golden Rules" of sentence boundary detection, as shipped in pySBD's source
distribution (pySBD 0.3.3, benchmarks/english_golden_rules.py; MIT License, Copyright (c) 2019
Nipun Sadvilkar), copied to `sbd_golden_rules_en.json` with their rule numbers and names.

Each case is split three ways: in one batch, incrementally character by character, and
incrementally in token-sized pieces; all must give the rule's sentences.
"""
import json
import re
from pathlib import Path

import pytest

from foresay.engine.sentences import SentenceSplitter, first_sentence, split_sentences

GOLDEN = json.loads((Path(__file__).parent / "sbd_golden_rules_en.json").read_text("utf-8"))
CASES = GOLDEN["cases"]


def _incremental(text: str, pieces: list[str]) -> list[str]:
    splitter, shown, got = SentenceSplitter(), "", []
    for piece in pieces:
        shown += piece
        got += [s.text for s in splitter.feed(shown)]
    assert shown == text
    return got + [s.text for s in splitter.feed(text, final=True)]


def _tokens(text: str) -> list[str]:
    return re.findall(r"\s*\S{1,3}|\s+$", text)


def test_the_suite_is_complete():
    assert [c["rule"] for c in CASES] == list(range(1, 49))
    assert "MIT" in GOLDEN["license"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['rule']:02d}")
def test_golden_rule(case):
    text, expected = case["text"], case["sentences"]
    sentences, _ = split_sentences(text, final=True)
    assert [s.text for s in sentences] == expected, case["name"]
    assert first_sentence(text, final=True).text == expected[0]
    assert _incremental(text, list(text)) == expected
    assert _incremental(text, _tokens(text)) == expected
    for s in sentences:
        assert text[s.start:s.end] == s.text


def test_all_rules_in_one_stream_split_as_in_batch():
    text = "\n".join(c["text"] for c in CASES)
    expected = [s for c in CASES for s in c["sentences"]]
    assert [s.text for s in split_sentences(text, final=True)[0]] == expected
    assert _incremental(text, _tokens(text)) == expected


def test_a_sentence_is_not_returned_before_its_end_is_certain():
    # each prefix could still become a sentence that goes on
    for prefix in ("I live in the U.S.", "I live in the U.S. Go", "the end of compounds. . .",
                   "1. The first item 2.", "a wait . .", "He is at 5"):
        assert first_sentence(prefix, final=False) is None, prefix
    assert first_sentence("I live in the U.S. Government", final=False) is None
    assert first_sentence("I live in the U.S. How", final=False) is None  # "However"?
    assert first_sentence("I live in the U.S. How about", final=False).text == "I live in the U.S."


def test_streaming_equals_batch_on_random_fragments():
    import random

    from foresay.engine.sentences import SplitterConfig

    pieces = list("abXY .?!…\n\"')(]•⁃12。") + ["U.S.", " . . .", "Dr.", "1.)", " a. ", "[...]", "e.g."]
    rng = random.Random(7)
    for _ in range(150):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        for config in (SplitterConfig(), SplitterConfig(max_chars=20, min_cut_chars=5)):
            batch = [s.text for s in split_sentences(text, True, config)[0]]
            splitter, got = SentenceSplitter(config), []
            for i in range(1, len(text) + 1):
                got += [s.text for s in splitter.feed(text[:i])]
            got += [s.text for s in splitter.feed(text, final=True)]
            assert got == batch, repr(text)

import pytest

from foresay.engine.tts.errors import InvalidTtsConfig, NothingToSay
from foresay.engine.tts.segments import SegmentSplitter


def test_sentences_keep_their_spans_in_the_original_text():
    text = "  Hello there.  How are you?\nFine!  "
    segments = SegmentSplitter().split(text)
    assert [s.text for s in segments] == ["Hello there.", "How are you?", "Fine!"]
    assert all(text[s.start:s.end] == s.text for s in segments)


def test_decimal_points_and_cjk_full_stops():
    segments = SegmentSplitter().split("Pi is 3.14 roughly. 你好。再见！")
    assert [s.text for s in segments] == ["Pi is 3.14 roughly.", "你好。", "再见！"]


def test_long_sentences_split_at_clauses_then_spaces_and_cover_all_words():
    text = "one two three four five six, seven eight nine ten eleven twelve thirteen fourteen fifteen"
    segments = SegmentSplitter(max_chars=30).split(text)
    assert all(len(s.text) <= 30 for s in segments)
    assert segments[0].text == "one two three four five six,"
    assert " ".join(s.text for s in segments) == text
    assert all(text[s.start:s.end] == s.text for s in segments)


def test_a_word_longer_than_the_limit_is_cut_hard():
    segments = SegmentSplitter(max_chars=8).split("x" * 20)
    assert [len(s.text) for s in segments] == [8, 8, 4]


def test_empty_text_and_bad_limits_are_refused():
    with pytest.raises(NothingToSay):
        SegmentSplitter().split(" \n\t")
    with pytest.raises(InvalidTtsConfig):
        SegmentSplitter(max_chars=3)

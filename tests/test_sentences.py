import pytest

from foresay.engine.sentences import (ends_in_number, SentenceSplitter, SplitterConfig, first_sentence,
                                      split_sentences)

CASES = [
    ("Hello there. How are you? I'm fine!", ["Hello there.", "How are you?", "I'm fine!"]),
    ("Use a tool, e.g. a hammer. Then stop.", ["Use a tool, e.g. a hammer.", "Then stop."]),
    ("That is, i.e. the best one. Yes.", ["That is, i.e. the best one.", "Yes."]),
    ("Dr. Smith is here. Mrs. Jones too.", ["Dr. Smith is here.", "Mrs. Jones too."]),
    ("He moved to the U.S. Army base. Nice.", ["He moved to the U.S. Army base.", "Nice."]),
    ("Pi is about 3.14 today. Right?", ["Pi is about 3.14 today.", "Right?"]),
    ("It costs $4.99. Cheap.", ["It costs $4.99.", "Cheap."]),
    ("Well... maybe not. Wait... What?", ["Well... maybe not.", "Wait...", "What?"]),
    ("Steps:\n1. Mix the flour.\n2. Bake it.", ["Steps:", "1. Mix the flour.", "2. Bake it."]),
    ("Visit www.example.com/a.b today. Then rest.", ["Visit www.example.com/a.b today.", "Then rest."]),
    ("See https://x.org. Done.", ["See https://x.org.", "Done."]),
    ("He said \"Stop.\" Then he left.", ["He said \"Stop.\"", "Then he left."]),
    ("(It works.) Good.", ["(It works.)", "Good."]),
    ("J. K. Rowling wrote it. True.", ["J. K. Rowling wrote it.", "True."]),
    ("Really?! Yes!!", ["Really?!", "Yes!!"]),
    ("Line one\nLine two", ["Line one", "Line two"]),
    ("It is 5 p.m. now. Go.", ["It is 5 p.m. now.", "Go."]),
    ("Ça va? Très bien. 東京は大きい。", ["Ça va?", "Très bien.", "東京は大きい。"]),
    ("東京です。大阪も！", ["東京です。", "大阪も！"]),
    ("", []),
    ("   \n  ", []),
]


@pytest.mark.parametrize("text,expected", CASES)
def test_split_table(text, expected):
    sentences, _ = split_sentences(text, final=True)
    assert [s.text for s in sentences] == expected
    for s in sentences:  # spans point at the sentence in the source
        assert text[s.start:s.end] == s.text


def test_incomplete_sentence_waits_for_next_word():
    assert first_sentence("It is done.", final=False) is None        # could be "done.com"
    assert first_sentence("It is done. ", final=False) is None       # next word unseen
    assert first_sentence("It is done. Next", final=False).text == "It is done."
    assert first_sentence("It is 3.", final=False) is None           # 3.14 may follow
    assert first_sentence("It is done.", final=True).text == "It is done."


def test_incremental_equals_batch_token_by_token():
    text = ("Dr. Who said 3.14 is pi, e.g. in math... right? Yes! Visit www.a.com now.\n"
            "1. First item here.\nThe end.")
    splitter = SentenceSplitter()
    got = []
    for i in range(1, len(text) + 1):
        got += [s.text for s in splitter.feed(text[:i])]
    got += [s.text for s in splitter.feed(text, final=True)]
    assert got == [s.text for s in split_sentences(text, final=True)[0]]


def test_run_on_text_is_capped_at_a_soft_break():
    config = SplitterConfig(max_chars=60, min_cut_chars=10)
    text = "one two three four five six, seven eight nine ten eleven twelve thirteen fourteen"
    sentences, _ = split_sentences(text, final=False, config=config)
    assert sentences[0].text == "one two three four five six,"
    assert all(len(s.text) <= 60 for s in sentences)
    words = "word " * 40
    sentences, _ = split_sentences(words, final=True, config=config)
    assert all(len(s.text) <= 60 for s in sentences)
    assert " ".join(s.text for s in sentences).split() == words.split()


def test_changing_already_split_text_is_an_error():
    splitter = SentenceSplitter()
    splitter.feed("One. Two")
    splitter.feed("One. Three")  # the unfinished part may change
    with pytest.raises(ValueError):
        splitter.feed("Uno. Three")


def test_abbreviation_before_an_opener_ends_the_sentence():
    assert [s.text for s in split_sentences("A timer for 5 min. Anything else?")[0]] == [
        "A timer for 5 min.", "Anything else?"]
    assert [s.text for s in split_sentences("Ask Dr. Who. He knows.")[0]] == ["Ask Dr. Who.", "He knows."]
    assert [s.text for s in split_sentences("It ends here . Next one.")[0]] == ["It ends here .", "Next one."]


def test_a_late_end_is_capped_as_when_found_token_by_token():
    config = SplitterConfig(max_chars=60, min_cut_chars=10)
    text = "alpha beta gamma, delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi. Rho."
    batch = [s.text for s in split_sentences(text, final=True, config=config)[0]]
    splitter, got = SentenceSplitter(config), []
    for i in range(1, len(text) + 1):
        got += [s.text for s in splitter.feed(text[:i])]
    got += [s.text for s in splitter.feed(text, final=True)]
    assert got == batch
    assert all(len(s) <= 60 for s in batch)
    assert " ".join(batch).split() == text.split()


@pytest.mark.parametrize("text, number", [
    ("dial 555-0199", True), ("My PIN is 4729.", True), ("Call 0 7 7 0 0", True), ("It is 12?", True),
    ("at 5 p.m.", False), ("10%", False), ("the 3rd", False), ("Call my brother.", False), ("", False),
])
def test_a_transcript_that_ends_in_a_number_in_digits(text, number):
    assert ends_in_number(text) is number

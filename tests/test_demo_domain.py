import json
import random

import pytest

from foresay.engine.demo import facts
from foresay.engine.demo.dialogues import (SPLITS, DialogueGenerator, DomainConfig, request_split, slot_split,
                                           truncate_request, write_jsonl)
from foresay.engine.demo.intents import FOLLOW_UPS, INTENT_BY_NAME, INTENTS, reply_for
from foresay.engine.errors import ForesayError


@pytest.fixture(scope="module")
def splits():
    return {s: [t for d in DialogueGenerator(DomainConfig(seed=3), s).dialogues(800) for t in d.turns]
            for s in SPLITS}


def test_same_seed_same_dialogues_other_seed_others():
    a = DialogueGenerator(DomainConfig(seed=1), "train").dialogues(50)
    b = DialogueGenerator(DomainConfig(seed=1), "train").dialogues(50)
    c = DialogueGenerator(DomainConfig(seed=2), "train").dialogues(50)
    assert a == b and a != c


def test_held_out_requests_never_occur_in_training(splits):
    train = {t.user.lower().rstrip(".?") for t in splits["train"]}
    for split in ("val", "test"):
        assert splits[split] and all(t.held_out in ("phrasing", "slots") for t in splits[split])
        assert not [t.user for t in splits[split] if t.user.lower().rstrip(".?") in train]
    assert {t.held_out for t in splits["test"]} == {"phrasing", "slots"}


def test_compositional_slot_holdout_is_stable_and_disjoint():
    timer = INTENT_BY_NAME["timer"]
    buckets = {s: [v for v in timer.values() if slot_split("timer", v) == s] for s in SPLITS}
    assert all(buckets.values())
    assert len(buckets["train"]) > 3 * (len(buckets["val"]) + len(buckets["test"]))
    assert slot_split("timer", {"n": 5, "unit": "minutes"}) == slot_split("timer", {"unit": "minutes", "n": 5})


def test_every_intent_and_follow_up_reaches_training_and_test(splits):
    names = {i.name for i in INTENTS} | {f.name for f in FOLLOW_UPS}
    assert len(INTENTS) >= 25
    assert {t.intent for t in splits["train"]} == names
    assert {t.intent for t in splits["test"]} == names


def test_replies_are_right_for_known_facts():
    assert reply_for("capital", {"country": "Japan"}) == "The capital of Japan is Tokyo."
    assert reply_for("add", {"a": 7, "b": 5}) == "7 plus 5 is 12."
    assert reply_for("convert", {"v": 3, "unit": "kilometers", "target": "meters", "factor": 1000}) == \
        "3 kilometers is 3000 meters."
    assert reply_for("day_before", {"day": "Monday"}) == "The day before Monday is Sunday."
    assert reply_for("reminder", {"task": "charge my phone", "time": "7 thirty"}) == \
        "Okay, I will remind you to charge your phone at 7 thirty."
    assert reply_for("spell", {"word": "river"}) == "River is spelled R, I, V, E, R."
    assert reply_for("month_days", {"month": "February"}).startswith("February has 28 days.")


def test_follow_ups_answer_about_the_previous_turn():
    gen = DialogueGenerator(DomainConfig(seed=0, max_turns=4, follow_up_prob=1.0), "train")
    seen = set()
    for dialogue in gen.dialogues(400):
        for prev, turn in zip(dialogue.turns, dialogue.turns[1:]):
            if turn.intent == "ask_capital":
                country = next(c for c in facts.COUNTRIES if c in prev.reply)
                assert turn.reply == f"The capital of {country} is {facts.COUNTRIES[country][0]}."
            elif turn.intent == "alarm_cancel":
                assert prev.reply.removeprefix("Your alarm is set for ").rstrip(".") in turn.reply
            seen.add(turn.intent)
    assert {"ask_capital", "alarm_cancel", "next_again", "operands_again"} <= seen


def test_fillers_vary_the_same_request(splits):
    starts = {t.user.split()[0].rstrip(",") for t in splits["train"]}
    assert {"Um", "Hey", "So"} <= starts
    assert any(t.user.endswith(" please?") or t.user.endswith(" please.") for t in splits["train"])


def test_truncation_drops_trailing_words_only():
    rng = random.Random(0)
    for _ in range(50):
        cut = truncate_request("Set a timer for 5 minutes please.", rng)
        assert "Set a timer for 5 minutes please".startswith(cut) and 4 <= len(cut.split()) <= 6
    assert truncate_request("Hello.", rng) == "Hello"


def test_bad_settings_are_refused():
    with pytest.raises(ForesayError, match="max_turns"):
        DomainConfig(max_turns=0)
    with pytest.raises(ForesayError, match="filler_prob"):
        DomainConfig(filler_prob=1.5)
    with pytest.raises(ForesayError, match="split"):
        DialogueGenerator(DomainConfig(), "dev")


def test_jsonl_is_readable_by_the_predgen_bench(tmp_path):
    from foresay.app.bench.predgen import load_prompts
    dialogues = DialogueGenerator(DomainConfig(), "test").dialogues(5)
    write_jsonl(dialogues, tmp_path / "test.jsonl")
    conversations = load_prompts(str(tmp_path / "test.jsonl"), None, multi_turn=True)
    assert conversations == [[t.user for t in d.turns] for d in dialogues]
    first = json.loads((tmp_path / "test.jsonl").read_text().splitlines()[0])
    assert first["replies"] == [t.reply for t in dialogues[0].turns]

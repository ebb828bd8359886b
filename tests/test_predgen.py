from dataclasses import replace

import pytest
import torch

from foresay.engine.errors import EmptyPrompt, PromptTooLong
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn
from foresay.engine.predgen.verifiers import (GreedyVerifier, ReflectionJudge, ReflectionVerifier,
                                              TopKVerifier, VerifyInput, make_verifier)
from foresay.engine.sentences import SplitterConfig

from predgen_helpers import cold_greedy, drive_word_by_word, make_prompts

# Short run-on "sentences", so the random fixture's output (which rarely has a full stop) has
# first sentences to speculate on.
SHORT = SplitterConfig(max_chars=40, min_cut_chars=10)
CONFIG = PredGenConfig(max_new_tokens=24, max_draft_tokens=20, margin_tokens=2, splitter=SHORT)


@pytest.mark.parametrize("seed,count", [(0, 50), (1, 10), (2, 10)])
def test_greedy_predgen_equals_plain_greedy(load_fixture_lm, seed, count):
    lm = load_fixture_lm("tiny-random", seed=seed)
    for prompt in make_prompts(count, seed):
        conv = Conversation(lm)
        turn = PredGenTurn(conv, CONFIG)
        drive_word_by_word(turn, prompt)
        turn.finish()
        assert turn.reply_ids() == cold_greedy(lm, turn.prompt.ids, CONFIG.max_new_tokens), prompt


def test_cache_holds_prompt_plus_accepted_tokens_after_every_verification(tiny_lm):
    conv = Conversation(tiny_lm)
    turn = PredGenTurn(conv, CONFIG)
    words = "please tell me about the weather in Paris tomorrow morning".split()
    for i in range(1, len(words) + 1):
        before = list(turn.draft)
        prompt = conv.prompt(" ".join(words[:i]))
        kept = turn._verify(prompt) if turn.prompt is None or prompt.ids != turn.prompt.ids else None
        if kept is not None:
            assert len(conv.cache) == len(prompt.ids) + kept
            assert conv.cache.tokens == list(prompt.ids) + before[:kept]
            assert turn.tokens == before[:kept]  # the draft's own tokens are kept
        turn.update(" ".join(words[:i]), i)
        assert conv.cache.tokens == list(turn.prompt.ids) + turn.tokens


def _greedy_reply(lm, text, n=24):
    conv = Conversation(lm)
    return cold_greedy(lm, conv.prompt(text).ids, n)


def _forced_turn(lm, draft):
    turn = PredGenTurn(Conversation(lm), CONFIG)
    turn.adopt_draft("tell me about the weather in", draft)
    return turn


FINAL = "tell me about the weather in Paris"


def test_outcome_accepted_when_first_sentence_survives(tiny_lm):
    greedy = _greedy_reply(tiny_lm, FINAL)
    turn = _forced_turn(tiny_lm, greedy[:16])
    record = turn.finalize(FINAL)
    assert record.outcome == "accepted"
    assert record.nfetfs == 1          # one verification pass fixes the first sentence
    assert record.final_accepted == 16
    turn.finish()
    assert turn.reply_ids() == greedy


def test_outcome_partial_and_rejected(tiny_lm):
    greedy = _greedy_reply(tiny_lm, FINAL)
    wrong = (greedy[3] + 1) % tiny_lm.model.config.vocab_size
    turn = _forced_turn(tiny_lm, greedy[:3] + [wrong] + greedy[4:16])
    record = turn.finalize(FINAL)
    assert (record.outcome, record.final_accepted) == ("partial", 3)
    turn.finish()
    assert turn.reply_ids() == greedy

    turn = _forced_turn(tiny_lm, [(greedy[0] + 1) % tiny_lm.model.config.vocab_size] + greedy[1:16])
    record = turn.finalize(FINAL)
    assert (record.outcome, record.final_accepted) == ("rejected", 0)
    assert record.nfetfs > 1
    turn.finish()
    assert turn.reply_ids() == greedy


def _rows(lm, text, draft):
    conv = Conversation(lm)
    ids = list(conv.prompt(text).ids)
    from foresay.engine.llm.dynamic_cache import DynamicKVCache
    logits = DynamicKVCache(lm).append(ids + draft)
    return logits[len(ids) - 1:]


def test_topk_keeps_draft_tokens_within_top_k(tiny_lm):
    greedy = _greedy_reply(tiny_lm, FINAL, 8)
    rows = _rows(tiny_lm, FINAL, greedy[:2])
    second = int(rows[2].topk(2).indices[1])  # the runner-up after two greedy tokens
    draft = greedy[:2] + [second] + [greedy[3]]
    rows = _rows(tiny_lm, FINAL, draft)
    inp = VerifyInput(draft, rows, FINAL, None, None)
    assert TopKVerifier(1).accept(inp) == GreedyVerifier().accept(inp) == 2
    assert TopKVerifier(2).accept(inp) >= 3
    assert TopKVerifier(tiny_lm.model.config.vocab_size).accept(inp) == len(draft)

    turn = _forced_turn(tiny_lm, draft)
    turn.verifier = TopKVerifier(2)
    turn.finalize(FINAL)
    assert turn.draft[:3] == draft[:3]  # the runner-up token itself, not the argmax, was kept
    with pytest.raises(Exception, match="k >= 1"):
        TopKVerifier(0)


class FixedJudge:
    def __init__(self, p):
        self.p, self.threshold, self.calls = p, 0.5, []

    def p_yes(self, partial, sentence):
        self.calls.append((partial, sentence))
        return self.p


def test_reflection_keeps_first_sentence_when_judge_agrees(tiny_lm):
    greedy = _greedy_reply(tiny_lm, FINAL, 8)
    wrong = [(t + 7) % tiny_lm.model.config.vocab_size for t in greedy[:6]]
    rows = _rows(tiny_lm, FINAL, wrong)
    inp = VerifyInput(wrong, rows, FINAL, "a sentence", 4)
    yes, no = ReflectionVerifier(FixedJudge(0.9)), ReflectionVerifier(FixedJudge(0.1))
    assert yes.accept(inp) == 4 + GreedyVerifier().accept(VerifyInput(wrong[4:], rows[4:], FINAL, None, None))
    assert no.accept(inp) == GreedyVerifier().accept(inp) == 0
    judge = FixedJudge(0.9)
    assert ReflectionVerifier(judge).accept(VerifyInput(wrong, rows, FINAL, None, None)) == 0
    assert judge.calls == []  # no sentence yet: greedy, no judge pass


def test_reflection_judge_is_a_probability_and_caches_its_prefix(tiny_lm):
    judge = ReflectionJudge(tiny_lm)
    p1 = judge.p_yes("what is the weather", "It is sunny.")
    assert 0.0 < p1 < 1.0
    tokens_before = tiny_lm.stats.tokens
    judge.p_yes("what is the weather in", "It is sunny.")
    computed = tiny_lm.stats.tokens - tokens_before
    assert computed < len(judge.cache) / 2  # the fixed prefix came from the judge's own cache
    verifier = make_verifier("reflection", tiny_lm)
    turn = PredGenTurn(Conversation(tiny_lm), CONFIG, verifier=verifier)
    drive_word_by_word(turn, "tell me a story about Tokyo tonight")
    assert turn.record.first_sentence


def test_unchanged_prompt_skips_verification(tiny_lm):
    turn = PredGenTurn(Conversation(tiny_lm), CONFIG)
    first = turn.update("what is the time", 1)
    again = turn.update("what  is the time ", 2)
    assert first.verified and not again.verified and again.passes == 0


def test_p_end_of_turn_is_the_end_of_message_probability(tiny_lm):
    conv = Conversation(tiny_lm)
    turn = PredGenTurn(conv, CONFIG)
    record = turn.update("what is the time", 1)
    prompt = conv.prompt("what is the time")
    from foresay.engine.llm.dynamic_cache import DynamicKVCache
    logits = DynamicKVCache(tiny_lm).append(list(prompt.ids))
    eom = prompt.end_of_message
    assert prompt.ids[eom] == tiny_lm.tokenizer.convert_tokens_to_ids("<|im_end|>")
    expected = torch.softmax(logits[eom - 1], -1)[prompt.ids[eom]].item()
    assert record.p_end_of_turn == pytest.approx(expected, rel=1e-4)


def test_stale_revisions_are_dropped_and_extension_stops(tiny_lm):
    turn = PredGenTurn(Conversation(tiny_lm), CONFIG)
    turn.announce(5)
    assert turn.update("hello there", 3).stale
    record = turn.update("hello there friend", 6, should_stop=lambda: True)
    assert record.verified and record.passes == 1 and record.draft_after == 1
    # a newer revision announced from elsewhere stops extension between steps
    steps = []
    original = turn._step

    def step():
        steps.append(1)
        turn.announce(8)
        original()
    turn._step = step
    turn.update("hello there my friend", 7)
    assert len(steps) == 1


def test_first_sentence_hook_fires_on_change(tiny_lm):
    fired = []
    turn = PredGenTurn(Conversation(tiny_lm), CONFIG, on_first_sentence=lambda t, r: fired.append((r, t)))
    drive_word_by_word(turn, "could you tell me about the weather in Paris today")
    assert fired
    assert all(a[1] != b[1] for a, b in zip(fired, fired[1:]))  # only changes are announced
    assert fired[-1][1] == turn.record.first_sentence


def test_the_estimate_comes_before_the_draft_is_extended_and_the_sentence_before_its_margin(tiny_lm):
    """The end-of-turn decision gets P(end of turn) from the verification pass itself, not after
    the extension steps; the first sentence goes to the TTS once its end is confirmed, not after
    the `margin_tokens` drafted past it."""
    seen = []
    config = replace(CONFIG, margin_tokens=8, max_draft_tokens=40)
    turn = PredGenTurn(Conversation(tiny_lm), config,
                       on_first_sentence=lambda text, revision: seen.append(("sentence", len(turn.draft), text)))
    record = turn.update("could you tell me about the weather in Paris", 1,
                         on_verified=lambda r: seen.append(("verified", r)))
    (kind, verified), *rest = seen
    assert kind == "verified" and verified.passes == 1 and verified.draft_after == 1
    assert verified.p_end_of_turn == record.p_end_of_turn is not None
    [(_, drafted, sentence)] = [s for s in rest if s[0] == "sentence"]
    assert drafted < record.draft_after  # announced before the margin was drafted
    assert turn.draft_text().startswith(sentence)
    again = []
    turn.update("could you tell me about the weather in Paris", 1, on_verified=again.append)
    assert again == []                    # the same prompt: no verification pass, nothing to say


def test_history_reuse_matches_cold_start(tiny_lm):
    conv = Conversation(tiny_lm)
    for i, text in enumerate(["hello there", "what is the weather in Paris", "and in Tokyo tomorrow"]):
        tokens_before = tiny_lm.stats.tokens
        turn = PredGenTurn(conv, CONFIG)
        history = len(conv.history_ids)
        record = turn.finalize(text)
        turn.finish()
        if i:
            new_prompt_tokens = len(turn.prompt.ids) - history
            # prefill computed just the new turn (plus the history's closing tokens), then decoded
            assert tiny_lm.stats.tokens - tokens_before <= new_prompt_tokens + 3 + len(turn.draft)
        assert turn.reply_ids() == cold_greedy(tiny_lm, turn.prompt.ids, CONFIG.max_new_tokens)
        assert record.nfetfs >= 1
        turn.commit()
    assert len(conv.messages) == 6
    # the cache built while replying is a prefix of the next turn's history: nothing to recompute
    assert conv.history_ids[:len(conv.cache)] == conv.cache.tokens


def test_barge_in_commits_only_what_was_heard(tiny_lm):
    conv = Conversation(tiny_lm)
    turn = PredGenTurn(conv, CONFIG)
    turn.finalize("tell me a long story")
    turn.finish()
    full = tiny_lm.decode(turn.reply_ids())
    heard = turn.commit(heard_chars=10)
    assert full.startswith(heard) and 10 <= len(heard) < len(full)
    assert conv.messages[-1] == {"role": "assistant", "content": heard}


def test_context_overflow_drops_oldest_turns(load_fixture_lm):
    lm = load_fixture_lm("tiny-random", max_context=400)
    conv = Conversation(lm, reserve_tokens=32)
    for i in range(12):
        turn = PredGenTurn(conv, CONFIG)
        turn.finalize(f"turn number {i} tell me about the weather in Paris and Berlin please")
        turn.finish()
        turn.commit()
    assert conv.dropped_turns > 0
    assert len(turn.prompt.ids) + 32 <= 400
    assert conv.messages[-2]["content"].startswith("turn number 11")
    with pytest.raises(PromptTooLong, match="does not fit"):
        conv.prompt("word " * 500)


def test_bad_prompts(tiny_lm):
    conv = Conversation(tiny_lm)
    turn = PredGenTurn(conv, CONFIG)
    assert turn.update("", 1).passes == 0 and turn.update("   \n\t", 2).passes == 0
    with pytest.raises(EmptyPrompt):
        turn.finalize("   ")
    record = turn.finalize("Wie spät ist es in 東京? ¿Qué tal? 😀")
    assert turn.prompt.user_text == "Wie spät ist es in 東京? ¿Qué tal? 😀"
    turn.finish()
    assert turn.reply_ids() == cold_greedy(tiny_lm, turn.prompt.ids, CONFIG.max_new_tokens)
    assert record.first_sentence


def test_saved_history_loads_into_a_new_conversation(tiny_lm):
    conv = Conversation(tiny_lm)
    conv.load([("hello", "Hi there."), ("what time is it", "It is noon.")])
    prompt = conv.prompt("thanks")
    rendered = tiny_lm.render([{"role": "system", "content": conv.system_prompt},
                               {"role": "user", "content": "hello"},
                               {"role": "assistant", "content": "Hi there."},
                               {"role": "user", "content": "what time is it"},
                               {"role": "assistant", "content": "It is noon."},
                               {"role": "user", "content": "thanks"}], True)
    assert prompt.text == rendered
    assert tiny_lm.decode(prompt.ids) == tiny_lm.decode(tiny_lm.encode(rendered))


def test_update_reports_kept_dropped_and_new_text(tiny_lm):
    greedy = _greedy_reply(tiny_lm, FINAL)
    wrong = (greedy[3] + 1) % tiny_lm.model.config.vocab_size
    turn = _forced_turn(tiny_lm, greedy[:3] + [wrong] + greedy[4:10])
    record = turn.update(FINAL, 1)
    assert record.accepted == 3
    assert record.accepted_text == tiny_lm.decode(greedy[:3])
    assert record.rejected_text == tiny_lm.decode([wrong] + greedy[4:10])
    assert record.draft_text == record.accepted_text + record.new_text

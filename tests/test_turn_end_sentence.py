"""The recognizer's sureness of a sentence end as evidence in the end-of-turn decision
(`sentence_weight`).

The values are those measured on a real reader: "He was not an ill-disposed young man." ended with
a full stop Whisper tiny.en was sure of (0.95), the chat model found it finished, and Smart Turn
v3.2 heard the voice run on (0.06), as it does after most of a LibriVox reader's sentence ends.
Without the recognizer's sureness the cue alone holds such an end for about 0.35 s.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from foresay.audio.turn_end import TurnEndConfig, TurnEndDecision

CONFIG = TurnEndConfig()
WITHOUT = replace(CONFIG, sentence_weight=0.0)


def view(p_sentence_end, p_llm=0.9999, cue=0.06, config=CONFIG, ended=True, number=False, llm=True):
    policy = TurnEndDecision(config, audio_cue=cue is not None)
    policy.begin_turn(1)
    policy.observe(np.zeros(480, np.float32), True, 0.97)   # the last voiced frame ends at 1.0 s
    policy.sentence_ended(1, 0, ended=ended, p=p_sentence_end, number=number)
    if llm:
        policy.update(p_llm, 1, revision=0, audio_until_t=1.0)
    if cue is not None:
        policy.audio_cue(1, cue, audio_until_t=1.0)
    return policy.view()


def test_a_sure_full_stop_outweighs_a_cue_that_heard_the_voice_run_on():
    held = view(0.95, config=WITHOUT)
    assert held.verdict == "unsure" and held.wait_s > 0.3
    now = view(0.95)
    assert now.verdict == "sounds finished" and now.wait_s == CONFIG.complete_s
    # the surer the recognizer, the sooner, and never later than without it
    at_threshold = CONFIG.sentence_end_p
    waits = [view(p).wait_s for p in (at_threshold, 0.84, 0.88, 0.95)]
    assert waits == sorted(waits, reverse=True) and waits[0] == view(at_threshold, config=WITHOUT).wait_s


def test_an_unsure_missing_or_numeric_sentence_end_hastens_nothing():
    unsure = CONFIG.sentence_end_p - 0.01
    for p, ended, number in ((unsure, True, False), (0.95, False, False), (None, True, False), (0.95, True, True)):
        assert view(p, ended=ended, number=number).wait_s == view(p, ended=ended, number=number, config=WITHOUT).wait_s


def test_the_recognizer_alone_never_ends_a_turn():
    """Without the LLM's current estimate the decision waits as it would: the sureness weighs an
    estimate in, it is not one."""
    alone = view(0.999, cue=None, llm=False)
    assert alone.verdict == "listening" and alone.wait_s == CONFIG.no_estimate_s
    cue_only = view(0.999, cue=0.9, llm=False)
    assert cue_only.wait_s >= CONFIG.no_estimate_s


def test_an_unfinished_request_stays_unfinished():
    """A fragment the chat model finds unfinished, written with a full stop, still waits long."""
    fragment = view(0.9, p_llm=0.001, cue=0.3)
    assert fragment.wait_s > 0.6


def test_the_weight_is_checked():
    with pytest.raises(ValueError, match="sentence_weight"):
        TurnEndConfig(sentence_weight=-0.5)


def goes_on_view(goes_on, config=None, number=False):
    """"How do you marry the more?" ("Had he married a more [pause] amiable woman"): a full stop
    Whisper was fairly sure of, the chat model and Smart Turn hearing an end; only Whisper's
    P(", ; : ...") after the last word says the clause went on."""
    config = config or replace(CONFIG, goes_on_p=0.08)
    policy = TurnEndDecision(config, audio_cue=True)
    policy.begin_turn(1)
    policy.observe(np.zeros(480, np.float32), True, 0.97)
    policy.sentence_ended(1, 0, ended=True, p=0.85, number=number, goes_on=goes_on)
    policy.update(0.9999, 1, revision=0, audio_until_t=1.0)
    policy.audio_cue(1, 0.95, audio_until_t=1.0)
    return policy.view()


def test_a_clause_the_recognizer_heard_go_on_waits_whatever_else_says_it_ended():
    on = goes_on_view(0.14)
    assert on.verdict == "clause goes on" and on.wait_s == CONFIG.open_sentence_s
    assert goes_on_view(0.14, number=True).verdict == "clause goes on"     # "33, 4, 6," too
    ended = goes_on_view(0.02)
    assert ended.verdict == "sounds finished" and ended.wait_s == CONFIG.complete_s
    assert goes_on_view(0.14, config=replace(CONFIG, goes_on_p=0.0)).verdict == "sounds finished"  # off
    assert goes_on_view(None).verdict == "sounds finished"                 # a recognizer that does not say
    with pytest.raises(ValueError, match="goes_on_p"):
        TurnEndConfig(goes_on_p=1.0)

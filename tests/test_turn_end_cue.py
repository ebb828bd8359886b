"""The audio cue in the end-of-turn decision's sentence-end judgment (`cue_sentence_weight`).

The values are those measured on real speakers (Whisper tiny.en's P(sentence end), Smart Turn
v3.2's P(end of turn) at the same pause): "ten of clubs" said with a final fall, written without a
full stop (0.32) where Smart Turn heard the end (0.988); "And Mr." before a pause, written with a
full stop (0.86) where Smart Turn heard the voice run on (0.026). A cue that hears the voice run on
lengthens the wait through the fused estimate, not through the sentence judgment as well.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from foresay.audio.turn_end import TurnEndConfig, TurnEndDecision

CONFIG = TurnEndConfig(complete_s=0.25, incomplete_s=1.0, no_estimate_s=0.6)  # cue_sentence_weight 0.5


def judged(p_sentence_end, cue=None, config=CONFIG, ended=None, cue_until=1.0):
    policy = TurnEndDecision(config, audio_cue=cue is not None)
    policy.begin_turn(1)
    policy.observe(np.zeros(480, np.float32), True, 0.97)   # the last voiced frame ends at 1.0 s
    written = p_sentence_end is not None and p_sentence_end > 0.5 if ended is None else ended
    policy.sentence_ended(1, 0, ended=written, p=p_sentence_end)
    policy.update(0.999, 1, revision=0, audio_until_t=1.0)
    if cue is not None:
        policy.audio_cue(1, cue, audio_until_t=cue_until)
    return policy.view()


def test_how_the_voice_stopped_weighs_in_on_whether_the_sentence_ended():
    assert judged(0.32).verdict == "no sentence end"                    # Whisper alone: open
    closed = judged(0.32, cue=0.988)                                     # the final fall closes it
    assert closed.verdict == "sounds finished" and closed.wait_s == CONFIG.complete_s
    assert judged(0.86).verdict == "sounds finished"                    # Whisper alone: a full stop
    ran_on = judged(0.86, cue=0.026)                                     # the voice ran on: unsure
    assert ran_on.verdict == "unsure" and CONFIG.complete_s < ran_on.wait_s < CONFIG.open_sentence_s


def test_a_cue_that_hears_the_voice_run_on_is_counted_once():
    """It lengthens the fused wait; it does not also hold a sure full stop open, nor close an
    unsure one (a low cue leaves the sentence judgment to the recognizer)."""
    sure = judged(0.93, cue=0.05)                       # "Why is the sky blue?" in Piper's voice
    assert sure.verdict == "unsure" and sure.wait_s < CONFIG.open_sentence_s
    assert judged(0.93, cue=0.05).wait_s > judged(0.93, cue=0.5).wait_s == judged(0.93, cue=0.95).wait_s == CONFIG.complete_s
    unsure = judged(0.6, cue=0.3)
    assert unsure.verdict == "no sentence end" and unsure.wait_s == CONFIG.open_sentence_s


def test_the_cue_counts_only_when_it_heard_the_pause_and_is_weighed_in():
    assert judged(0.32, cue=0.988, cue_until=0.5).verdict == "no sentence end"  # an earlier pause's cue
    alone = replace(CONFIG, cue_sentence_weight=0.0)
    assert judged(0.32, cue=0.988, config=alone).verdict == "no sentence end"
    assert judged(0.86, cue=0.026, config=alone).verdict != "no sentence end"
    # a recognizer that gives no P(sentence end): its written mark decides, as without a cue
    assert judged(None, cue=0.988, ended=False).verdict == "no sentence end"
    assert judged(None, cue=0.026, ended=True).verdict != "no sentence end"
    with pytest.raises(ValueError, match="cue_sentence_weight"):
        TurnEndConfig(cue_sentence_weight=-1.0)

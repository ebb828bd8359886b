"""The window shows the end of the user's turn in words, and its live clocks stop where they should."""
from __future__ import annotations

import pytest
from ui_support import qapp  # noqa: F401  (fixture)

from foresay.engine.events import (AudioChunk, DraftUpdated, EndOfTurnEstimate, FinalTranscript, Interrupt, ReplyDone,
                                   ReplyHeard, ReplyKept, SentenceReady, SpeechStarted, TurnEnded, TurnMetrics,
                                   TurnResumed, VoicePaused, VoiceResumed)
from foresay.ui.conversation import LISTENING, SPEAKING, USER_SPEAKING, ConversationModel
from foresay.ui.conversation_view import conversation_html
from foresay.ui.latency import LatencyModel


def test_the_meter_says_how_long_the_silence_is_waited_and_why():
    now = [10.0]
    model = LatencyModel(clock=lambda: now[0])
    model.apply(SpeechStarted(1, 8.0))
    assert model.turn_end.text() == ""
    model.apply(VoicePaused(1, 9.96, last_voiced_t=9.9))
    assert model.turn_end.text() == "silence 100 ms: waiting"
    model.apply(EndOfTurnEstimate(1, 9.97, p_end_of_turn=0.01, wait_s=1.0, verdict="sounds unfinished"))
    now[0] = 10.3
    assert model.turn_end.text() == "silence 400 ms of 1000 ms: waiting: sounds unfinished"
    # the user goes on: no silence is being waited
    model.apply(VoiceResumed(1, 10.31))
    assert model.turn_end.text() == "" and not model.turn_end.waiting
    model.apply(VoicePaused(1, 11.06, last_voiced_t=11.0))
    model.apply(EndOfTurnEstimate(1, 11.07, p_end_of_turn=0.9, wait_s=0.15, verdict="sounds finished"))
    now[0] = 11.1
    assert model.turn_end.text() == "silence 100 ms of 150 ms: sounds finished"
    model.apply(TurnEnded(1, 11.15, last_voiced_t=11.0))
    now[0] = 12.0
    assert model.turn_end.text() == "turn ended after 150 ms of silence (it sounded finished)"
    model.apply(TurnResumed(1, 11.5, ended_t=11.15))
    assert model.turn_end.resumed == 1 and model.turn_end.text() == ""
    # the words sound finished, but the recognizer did not hear the last one the same twice
    model.apply(VoicePaused(1, 12.06, last_voiced_t=12.0))
    model.apply(EndOfTurnEstimate(1, 12.07, p_end_of_turn=0.9999, wait_s=0.8, verdict="unclear words"))
    now[0] = 12.3
    assert model.turn_end.text() == "silence 300 ms of 800 ms: waiting: not sure what was said"
    model.apply(TurnEnded(1, 12.8, last_voiced_t=12.0))
    now[0] = 13.0
    assert model.turn_end.text() == "turn ended after 800 ms of silence (not sure what was said)"


def test_the_live_clock_runs_from_the_pause_and_never_past_the_reply():
    now = [10.0]
    model = LatencyModel(clock=lambda: now[0])
    model.apply(VoicePaused(1, 10.0, last_voiced_t=9.94))
    assert model.live_voice_to_voice() == (pytest.approx(60.0), True)   # the silence counts
    model.apply(VoiceResumed(1, 10.1))
    assert model.live_voice_to_voice()[1] is False                     # the user went on
    model.apply(TurnEnded(1, 10.9, last_voiced_t=10.75))
    model.apply(AudioChunk(1, 11.544))                                  # first reply audio
    now[0] = 12.0
    assert model.live_voice_to_voice() == (pytest.approx(794.0), False)
    # a turn whose audio never reaches the window: the clock stops with the reply, it does not
    # run on to "1263 ms"; the measured figure comes with the metrics
    model.apply(SpeechStarted(2, 20.0))
    model.apply(TurnEnded(2, 21.0, last_voiced_t=20.8))
    now[0] = 21.3
    assert model.live_voice_to_voice() == (pytest.approx(500.0), True)
    model.apply(ReplyDone(2, 22.063, text="Okay.", outcome="accepted"))
    now[0] = 23.0
    assert model.live_voice_to_voice()[1] is False
    model.apply(TurnMetrics(2, 23.0, values={"voice_to_voice_ms": 794.0}))
    assert model.live_voice_to_voice() == (794.0, False)
    # a breath reopened turn 3 while its reply played, and the reply was kept: no new clock runs
    model.apply(TurnEnded(3, 30.0, last_voiced_t=29.8))
    model.apply(AudioChunk(3, 30.1))
    model.apply(TurnResumed(3, 30.5, ended_t=30.0))
    model.apply(TurnEnded(3, 31.2, last_voiced_t=30.7))
    model.apply(ReplyKept(3, 31.21, ended_t=30.0))
    now[0] = 32.0
    assert model.live_voice_to_voice()[1] is False


def test_the_draft_legend_speaks_words_and_nothing_before_an_estimate():
    model = ConversationModel()
    model.apply(SpeechStarted(1, 1.0))
    model.apply(DraftUpdated(1, 1.1, revision=1, draft="The capital", p_end_of_turn=0.0))
    html = conversation_html(model)
    assert "P(end of turn)" not in html and "0.00" not in html and "sounds" not in html
    model.apply(EndOfTurnEstimate(1, 1.2, p_end_of_turn=None, wait_s=0.6, verdict="listening"))
    assert "sounds" not in conversation_html(model)
    model.apply(EndOfTurnEstimate(1, 1.3, p_end_of_turn=0.01, wait_s=1.0, verdict="sounds unfinished"))
    assert "what you said sounds unfinished" in conversation_html(model)
    model.apply(DraftUpdated(1, 1.4, revision=2, draft="The capital of France", p_end_of_turn=0.97))
    model.apply(EndOfTurnEstimate(1, 1.5, p_end_of_turn=0.97, wait_s=0.15, verdict="sounds finished"))
    assert "what you said sounds finished" in conversation_html(model)


def _answered_then_reopened(model: ConversationModel) -> None:
    model.apply(SpeechStarted(1, 1.0))
    model.apply(TurnEnded(1, 2.0, last_voiced_t=1.8))
    model.apply(FinalTranscript(1, 2.03, text="Set a timer for"))
    model.apply(SentenceReady(1, 2.05, index=0, text="Okay, a timer for 5 minutes starts now."))
    model.apply(AudioChunk(1, 2.1))
    model.apply(TurnResumed(1, 2.3, ended_t=2.0))


def test_a_resumed_turn_whose_reply_stops_drops_it_and_listens_again():
    model = ConversationModel()
    _answered_then_reopened(model)
    assert model.phase == USER_SPEAKING
    assert [t.role for t in model.turns] == ["user", "assistant"]  # held until the words decide
    model.apply(Interrupt(1, 2.6))
    assert [t.role for t in model.turns] == ["user"] and model.phase == USER_SPEAKING
    model.apply(FinalTranscript(1, 3.5, text="Set a timer for ten minutes."))
    assert [(t.role, t.text) for t in model.turns] == [("user", "Set a timer for ten minutes.")]


def test_a_resumed_turn_whose_reply_is_kept_shows_it_after_the_request_until_it_is_heard():
    model = ConversationModel()
    _answered_then_reopened(model)
    model.apply(TurnEnded(1, 2.8, last_voiced_t=2.5))
    model.apply(FinalTranscript(1, 2.82, text="Set a timer for."))
    model.apply(ReplyKept(1, 2.83, ended_t=2.0))
    assert [(t.role, t.text) for t in model.turns] == [("user", "Set a timer for."),
                                                       ("assistant", "Okay, a timer for 5 minutes starts now.")]
    assert model.phase == SPEAKING
    model.apply(ReplyHeard(1, 4.0))
    assert model.phase == LISTENING
    model.apply(Interrupt(1, 4.1))  # a later stop marks the reply, it does not withdraw it
    assert [t.role for t in model.turns] == ["user", "assistant"] and model.turns[1].interrupted


def test_the_meters_panel_shows_the_line(qapp):  # noqa: F811
    from foresay.ui.meters import LatencyPanel
    now = [5.0]
    model = LatencyModel(clock=lambda: now[0])
    model.apply(VoicePaused(1, 4.9, last_voiced_t=4.8))
    model.apply(EndOfTurnEstimate(1, 4.9, p_end_of_turn=0.01, wait_s=1.0, verdict="sounds unfinished"))
    panel = LatencyPanel()
    panel.refresh(model)
    assert panel.turn_end.text() == "silence 200 ms of 1000 ms: waiting: sounds unfinished"


def test_every_verdict_of_the_decision_has_words_while_waiting_and_once_ended():
    from foresay.audio.hangover import VERDICTS
    from foresay.ui.turn_end import ENDED_WORDS, WAITING_WORDS, verdict_words
    assert set(WAITING_WORDS) == set(ENDED_WORDS) == set(VERDICTS)
    assert verdict_words("checking words") == "waiting: checking what was heard"
    assert verdict_words("checking words", ended=True) == "what was heard was still being checked"

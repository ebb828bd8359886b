"""The turn log's figures for a turn the user reopened: from the end its reply answered."""
from __future__ import annotations

from foresay.app.turn_log import TurnLog
from foresay.engine.events import (FinalTranscript, Interrupt, ReplyDone, ReplyHeard, ReplyKept, ReplyStarted,
                                   SentenceReady, TurnClosed, TurnEnded, TurnResumed)


def _log_reopened_turn(kept: bool) -> dict:
    now = [0.0]
    log = TurnLog(lambda event: None, clock=lambda: now[0])

    def at(t, event):
        now[0] = t
        log.handle(event)
    at(10.25, TurnEnded(1, 10.25, last_voiced_t=10.0))
    at(10.26, FinalTranscript(1, 10.26, "what is the capital of France"))
    at(10.28, SentenceReady(1, 10.28, 0, "Paris.", 0))
    at(10.31, ReplyStarted(1, 10.31))
    at(10.6, TurnResumed(1, 10.6, ended_t=10.25))   # a breath, while the reply plays
    if not kept:
        at(10.9, Interrupt(1, 10.9))
    at(11.2, TurnEnded(1, 11.2, last_voiced_t=10.8))
    at(11.21, FinalTranscript(1, 11.21, "what is the capital of France"))
    if kept:
        at(11.22, ReplyKept(1, 11.22, ended_t=10.25))
    else:
        at(11.24, SentenceReady(1, 11.24, 0, "Paris.", 0))
        at(11.27, ReplyStarted(1, 11.27))
    at(11.3, ReplyDone(1, 11.3, "Paris.", "accepted"))
    at(12.0, ReplyHeard(1, 12.0, first_output_t=10.32 if kept else 11.28))
    at(12.01, TurnClosed(1, 12.01, "what is the capital of France", "Paris.", False, "accepted"))
    [values] = log.metrics
    return values


def test_a_kept_reply_counts_from_the_end_it_answered():
    values = _log_reopened_turn(kept=True)
    assert values["endpoint_delay_ms"] == 250.0 and values["asr_final_ms"] == 10.0
    assert values["voice_to_voice_ms"] == 320.0 and values["resumed"] == 1


def test_a_reply_stopped_by_the_user_going_on_counts_from_the_last_end():
    values = _log_reopened_turn(kept=False)
    assert values["endpoint_delay_ms"] == 400.0 and values["asr_final_ms"] == 10.0
    assert values["voice_to_voice_ms"] == 480.0 and values["resumed"] == 1

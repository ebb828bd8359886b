"""The turn-taking state machine alone: a sequence of events in, decisions out (no audio, no clock).

Frames are 30 ms; `speak` and `silence` play the endpointer's part (a frame voiced or not), and
the tests play the pipeline's (a transcript at a pause, its P(end of turn), a check's answer).
"""
from __future__ import annotations

import numpy as np
import pytest

from foresay.audio.turn_end import TurnEndConfig, TurnEndDecision
from foresay.audio.turn_taking import TurnTaking, TurnTakingConfig
from foresay.engine.events import (AudioTurnCue, DraftUpdated, EndOfTurnEstimate, PausedTranscript, PauseRechecked, SpeechStarted,
                                   TurnEnded, TurnResumed, VoicePaused, VoiceResumed)

F = 0.03
DECISION = TurnEndConfig(complete_s=0.24, incomplete_s=1.0, no_estimate_s=0.6, unsteady_s=0.8, open_sentence_s=0.9,
                          cue_weight=1.0)
FRAME = np.zeros(480, np.float32)


class Run:
    """Drives a machine frame by frame; `log` collects every decision."""

    def __init__(self, tt: TurnTaking, t: float = 10.0):
        self.tt, self.t, self.log = tt, t, []

    def frames(self, seconds: float, voiced: bool, on_event=None, before_frame=None) -> None:
        for _ in range(int(round(seconds / F))):
            if before_frame:
                before_frame(self.t)
            if not self.tt.is_open:
                if voiced:
                    self.log.append(self.tt.onset(self.t))
                    self.tt.hear(self.t, FRAME, True)
                self.t += F
                continue
            for e in self.tt.frame(self.t, self.t + F, voiced, FRAME):
                self.log.append(e)
                if on_event:
                    on_event(e)
            self.t += F

    def of(self, kind):
        return [e for e in self.log if isinstance(e, kind)]


def machine(**config) -> TurnTaking:
    return TurnTaking(TurnEndDecision(DECISION), TurnTakingConfig(**config))


def answer_pauses(tt: TurnTaking, text="Set a timer for ten minutes.", p=0.999, rechecking=False):
    """At each VoicePaused, the pipeline's work: the whole turn decoded through the pause, then its
    estimate (revision n for the n-th pause)."""
    count = [0]

    def on_event(e):
        if isinstance(e, VoicePaused):
            count[0] += 1
            tt.feed(PausedTranscript(e.turn_id, e.t, count[0], text, audio_until_t=e.t, rechecking=rechecking))
            tt.feed(DraftUpdated(e.turn_id, e.t, count[0], "", 0, p, audio_until_t=e.t))
    return on_event


def test_a_finished_request_ends_at_the_short_wait_and_its_pause_transcript_is_the_final():
    tt = machine()
    run = Run(tt)
    run.frames(1.2, True)
    last_voiced = run.t
    run.frames(1.5, False, answer_pauses(tt))
    [started] = run.of(SpeechStarted)
    [paused] = run.of(VoicePaused)
    [end] = run.of(TurnEnded)
    assert paused.t - paused.last_voiced_t == pytest.approx(tt.config.pause_s, abs=F)
    assert end.turn_id == started.turn_id and end.last_voiced_t == pytest.approx(last_voiced)
    assert DECISION.complete_s - 1e-6 <= end.t - end.last_voiced_t < DECISION.complete_s + F
    assert end.heard_revision == 1          # no decode after the end: the pause's transcript is final
    assert [e.verdict for e in run.of(EndOfTurnEstimate)][-1] == "sounds finished"


def test_a_transcript_that_did_not_hear_the_last_words_is_not_the_final():
    tt = machine()
    run = Run(tt)
    run.frames(1.0, True)

    def stale(e):
        if isinstance(e, VoicePaused):
            tt.feed(PausedTranscript(e.turn_id, e.t, 1, "Set a timer", audio_until_t=e.last_voiced_t - 0.2))
    run.frames(1.5, False, stale)
    [end] = run.of(TurnEnded)
    assert end.heard_revision is None
    assert end.t - end.last_voiced_t == pytest.approx(DECISION.no_estimate_s, abs=F)  # and no estimate counts


def test_voice_after_an_early_end_resumes_the_turn_and_later_voice_is_a_new_turn():
    tt = machine(resume_window_s=1.0, resume_max_gap_s=1.2)
    run = Run(tt)
    run.frames(0.9, True)
    run.frames(0.5, False, answer_pauses(tt, "Set a timer."))     # heard as finished: ended in the pause
    run.frames(0.6, True)                                         # "ten minutes": the same turn
    run.frames(1.2, False, answer_pauses(tt))
    run.frames(2.5 - 1.2, False)
    run.frames(0.6, True)                                         # 2.5 s later: a new request
    run.frames(1.2, False, answer_pauses(tt))
    kinds = [(type(e).__name__, e.turn_id) for e in run.log if isinstance(e, (SpeechStarted, TurnEnded, TurnResumed))]
    assert kinds == [("SpeechStarted", 1), ("TurnEnded", 1), ("TurnResumed", 1), ("TurnEnded", 1),
                     ("SpeechStarted", 2), ("TurnEnded", 2)]
    first_end, resumed = run.of(TurnEnded)[0], run.of(TurnResumed)[0]
    assert resumed.ended_t == first_end.t
    # the resumed turn's final is the transcript of its second pause, which heard all of it
    assert [e.heard_revision for e in run.of(TurnEnded)] == [1, 1, 1]


def test_two_requests_are_two_turns_whatever_the_recognizers_latency():
    """No estimate ever comes in time (a slow recognizer): the end waits `no_estimate_s`; voice
    2.5 s after the last word is a new turn, and the late estimate of turn 1 changes nothing of turn 2."""
    tt = machine()
    run = Run(tt)
    run.frames(1.0, True)
    run.frames(2.5, False)
    tt.feed(DraftUpdated(1, run.t, 1, "", 0, 0.999, audio_until_t=run.t - 2.5))   # turn 1's, late
    run.frames(1.0, True)
    tt.feed(DraftUpdated(1, run.t, 2, "", 0, 0.999, audio_until_t=run.t))         # still turn 1's
    run.frames(1.0, False)
    assert [(type(e).__name__, e.turn_id) for e in run.log if isinstance(e, (SpeechStarted, TurnEnded, TurnResumed))] \
        == [("SpeechStarted", 1), ("TurnEnded", 1), ("SpeechStarted", 2), ("TurnEnded", 2)]
    second = run.of(TurnEnded)[1]
    assert second.t - second.last_voiced_t == pytest.approx(DECISION.no_estimate_s, abs=F)


def test_a_long_silence_ends_the_resume_chance_even_when_the_end_came_late():
    tt = machine(resume_window_s=1.0, resume_max_gap_s=0.8)
    run = Run(tt)
    run.frames(1.0, True)
    run.frames(0.6 + 0.03, False)   # no estimate: ended at 0.6 s
    assert run.of(TurnEnded) and tt.resumable(run.t)
    run.frames(0.3, False)
    assert not tt.resumable(run.t)  # within 1 s of the end, but 0.93 s after the last word
    run.frames(0.5, True)
    assert [e.turn_id for e in run.of(SpeechStarted)] == [1, 2] and not run.of(TurnResumed)


def test_voice_in_a_pause_is_reported_and_supersedes_the_pause_transcript():
    tt = machine()
    run = Run(tt)
    run.frames(0.6, True)
    run.frames(0.3, False, answer_pauses(tt, "Set a timer for", p=0.01))   # sounds unfinished: waits
    run.frames(0.6, True)
    run.frames(0.3, False)                   # a second pause, whose transcript never comes
    run.frames(1.0, False)
    assert len(run.of(VoicePaused)) == 2 and len(run.of(VoiceResumed)) == 1
    [end] = run.of(TurnEnded)
    assert end.heard_revision is None        # the first transcript did not hear the words after it


def test_an_unsteady_or_unpunctuated_pause_transcript_waits_longer():
    for rechecked, text, wait in ((None, "Set a timer for ten minutes.", DECISION.complete_s),
                                  (False, "Set a timer for ten minutes.", DECISION.unsteady_s),
                                  (True, "Set a timer for ten minutes.", DECISION.complete_s),
                                  (None, "Set a timer for", DECISION.open_sentence_s)):
        tt = machine()
        run = Run(tt)
        run.frames(1.0, True)
        on_pause = answer_pauses(tt, text, rechecking=rechecked is not None)

        def on_event(e):
            on_pause(e)
            if isinstance(e, VoicePaused) and rechecked is not None:
                tt.feed(PauseRechecked(e.turn_id, e.t, 1, steady=rechecked))
        run.frames(1.5, False, on_event)
        [end] = run.of(TurnEnded)
        assert end.t - end.last_voiced_t == pytest.approx(wait, abs=F), (rechecked, text)


def test_an_audio_cue_is_fused_with_the_llm_and_never_ends_a_turn_alone():
    def wait_with(cue_p, llm_p, cue_after_s=0.05):
        """The silence waited when the cue answers `cue_after_s` after the pause (None: never)."""
        tt = TurnTaking(TurnEndDecision(DECISION, audio_cue=True), TurnTakingConfig())
        run = Run(tt)
        run.frames(1.0, True)
        answer = answer_pauses(tt, p=llm_p) if llm_p is not None else None
        pauses = []

        def on_event(e):
            if answer is not None:
                answer(e)
            if isinstance(e, VoicePaused):
                pauses.append(e)

        def frame_hook(t):
            if pauses and cue_p is not None and t >= pauses[-1].t + cue_after_s - 1e-9:
                tt.feed(AudioTurnCue(pauses[-1].turn_id, t, p_end_of_turn=cue_p, audio_until_t=pauses[-1].t))
                pauses.clear()

        run.frames(1.5, False, on_event, before_frame=frame_hook)
        [end] = run.of(TurnEnded)
        return end.t - end.last_voiced_t

    assert wait_with(0.9999, None) == pytest.approx(DECISION.no_estimate_s, abs=F)  # alone: not trusted
    assert wait_with(0.01, None) == pytest.approx(DECISION.incomplete_s, abs=F)     # alone it may lengthen
    assert wait_with(0.9999, 0.9999) == pytest.approx(DECISION.complete_s, abs=F)
    assert wait_with(0.5, 0.9999) == pytest.approx(DECISION.complete_s, abs=F)      # 0.5 says nothing
    assert DECISION.complete_s + 2 * F < wait_with(0.01, 0.9999) < DECISION.incomplete_s  # they disagree
    # the decision waits for the cue of the pause, up to cue_wait_s, however sure the LLM is
    assert wait_with(None, 0.9999) == pytest.approx(DECISION.cue_wait_s, abs=F)
    assert wait_with(0.01, 0.9999, cue_after_s=0.5) == pytest.approx(DECISION.cue_wait_s, abs=F)  # too late


def test_push_to_talk_turns_end_only_when_told_and_never_resume():
    tt = machine()
    assert isinstance(tt.onset(5.0, silence_ends=False), SpeechStarted)
    for i in range(40):   # 1.2 s of silence: no end
        assert not [e for e in tt.frame(5.0 + i * F, 5.0 + (i + 1) * F, False) if isinstance(e, TurnEnded)]
    end = tt.end(6.5)
    assert end.t == 6.5 and end.last_voiced_t == 5.0 and tt.end(7.0) is None
    assert not tt.resumable(6.6)
    assert isinstance(tt.onset(6.6), SpeechStarted)


def test_a_turn_past_its_longest_length_ends_between_words():
    tt = machine(max_turn_s=1.0)
    run = Run(tt)
    run.frames(1.2, True)
    assert not run.of(TurnEnded)
    run.frames(0.06, False)
    [end] = run.of(TurnEnded)
    assert end.t - 10.0 == pytest.approx(1.23, abs=F)
    with pytest.raises(ValueError, match="resume_max_gap_s"):
        TurnTakingConfig(resume_max_gap_s=0)
    with pytest.raises(ValueError, match="still open"):
        tt.onset(20.0)
        tt.onset(21.0)


def _ended_after(text: str, p_sentence_end: float, p_end_of_turn: float, decision=DECISION) -> float:
    """Seconds from the last voiced frame to the end, for one request whose pause transcript is
    `text` (with the recognizer's P(sentence end)) and whose estimate is `p_end_of_turn`."""
    tt = TurnTaking(TurnEndDecision(decision), TurnTakingConfig())
    run = Run(tt)
    run.frames(1.2, True)

    def on_event(e):
        if isinstance(e, VoicePaused):
            tt.feed(PausedTranscript(e.turn_id, e.t, 1, text, audio_until_t=e.t, p_sentence_end=p_sentence_end))
            tt.feed(DraftUpdated(e.turn_id, e.t, 1, "", 0, p_end_of_turn, audio_until_t=e.t))
    run.frames(1.5, False, on_event)
    [end] = run.of(TurnEnded)
    return end.t - end.last_voiced_t


def test_after_a_number_the_recognizers_punctuation_does_not_hold_the_turn():
    """Whisper writes no full stop after "dial 555-0199" whether or not the request is finished
    (P(sentence end) 0.15-0.34 after whole requests): a request the LLM finds finished ends at the
    short wait, where words without a sentence end wait `open_sentence_s`; a number the LLM finds
    unfinished still waits."""
    assert _ended_after("Dial 555-0199", 0.2, 0.999) == pytest.approx(DECISION.complete_s, abs=F)
    assert _ended_after("Call my brother", 0.2, 0.999) == pytest.approx(DECISION.open_sentence_s, abs=F)
    assert _ended_after("Call 0 7 7 0 0", 0.02, 0.02) == pytest.approx(DECISION.incomplete_s, abs=F)
    judged = TurnEndConfig(**{**DECISION.__dict__, "sentence_end_after_number": True})
    assert _ended_after("Dial 555-0199", 0.2, 0.999, judged) == pytest.approx(DECISION.open_sentence_s, abs=F)


def _request(run: Run, tt: TurnTaking, first: str, pause_s: float | None = None, rest: str | None = None) -> None:
    """One request 2.5 s after the last: `first` said, then (with `pause_s`) a pause and `rest`,
    which the pipeline hears as `first` and `rest` together; the silence after it runs 1.2 s."""
    run.frames(2.5, False)
    run.frames(0.9, True)
    if pause_s is not None:
        run.frames(pause_s, False, answer_pauses(tt, first))
        run.frames(0.6, True)
        first = f"{first.rstrip('.')} {rest}"
    run.frames(1.2, False, answer_pauses(tt, first))


def _waits(run: Run) -> list[float]:
    """The silence each end waited."""
    return [e.t - e.last_voiced_t for e in run.of(TurnEnded)]


def test_a_user_who_went_on_after_an_end_is_waited_for_in_the_next_turns():
    """"Set a timer. [0.6 s] For ten minutes." sounds finished at its pause and is ended there;
    the user goes on with more words, so the next `learned_pause_turns` turns (not the rest of
    this one) wait at least that pause and a margin, and a pause as long in one of them is not cut;
    after them, the short wait again."""
    decision = TurnEndConfig(**{**DECISION.__dict__, "learned_pause_turns": 2, "learned_pause_margin_s": 0.15})
    tt = TurnTaking(TurnEndDecision(decision), TurnTakingConfig())
    run = Run(tt)
    _request(run, tt, "Set a timer.", 0.6, "for ten minutes.")
    assert len(run.of(TurnResumed)) == 1
    assert _waits(run) == pytest.approx([DECISION.complete_s] * 2, abs=F)  # the pause, and the resumed turn's end
    learned = 0.6 + 0.15
    _request(run, tt, "What time is it?")                                   # waited for
    assert _waits(run)[-1] == pytest.approx(learned, abs=F)
    assert [e.verdict for e in run.of(EndOfTurnEstimate)][-1] == "pauses like before"
    _request(run, tt, "Call my brother.", 0.6, "on his mobile.")           # not cut this time
    assert len(run.of(TurnResumed)) == 1 and _waits(run)[-1] == pytest.approx(learned, abs=F)
    _request(run, tt, "What time is it?")                                   # the learned turns are over
    assert _waits(run)[-1] == pytest.approx(DECISION.complete_s, abs=F)
    assert [e.turn_id for e in run.of(SpeechStarted)] == [1, 2, 3, 4]


def test_a_reopened_turn_that_brings_no_words_teaches_nothing():
    """A cough after the end reopens the turn, but its transcript says what it said at the end:
    the next turn ends at the short wait; with `learned_pause_turns` 0 nothing is ever learned."""
    tt = machine()
    run = Run(tt)
    _request(run, tt, "Set a timer for ten minutes.", 0.6, "")
    assert len(run.of(TurnResumed)) == 1
    _request(run, tt, "What time is it?")
    assert _waits(run)[-1] == pytest.approx(DECISION.complete_s, abs=F)
    never = TurnEndConfig(**{**DECISION.__dict__, "learned_pause_turns": 0})
    tt = TurnTaking(TurnEndDecision(never), TurnTakingConfig())
    run = Run(tt)
    _request(run, tt, "Set a timer.", 0.6, "for ten minutes.")
    _request(run, tt, "What time is it?")
    assert len(run.of(TurnResumed)) == 1 and _waits(run)[-1] == pytest.approx(DECISION.complete_s, abs=F)
    with pytest.raises(ValueError, match="learned_pause"):
        TurnEndConfig(learned_pause_margin_s=-0.1)

"""The end-of-turn decision and early-endpoint recovery, on espeak-ng speech.

The test plays the pipeline's part: on `VoicePaused` it hands the policy an estimate of P(end of
turn) for the transcript of all audio so far, as PredGen would after an ASR hop.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from audio_kit import speech_clip

from foresay.audio.blocks import SAMPLE_RATE, AudioBlock
from foresay.audio.endpoint import Endpointer, EndpointerConfig, Mode
from foresay.audio.hangover import FixedHangover
from foresay.audio.turn_end import TurnEndConfig, TurnEndDecision
from foresay.audio.vad import WebRtcVad
from foresay.engine.events import (EndOfTurnEstimate, SpeechStarted, TurnEnded, TurnResumed, VoicePaused,
                                   VoiceResumed)

T0 = 100.0
FRAME = 0.030
CONFIG = TurnEndConfig(complete_s=0.25, incomplete_s=1.0, no_estimate_s=0.6)


def run(x, p_at_pause=None, config=EndpointerConfig(), policy=None, stale=False, steady_at_pause=None):
    """Feed `x`; on each VoicePaused give `p_at_pause(n)` (n-th pause) for the audio heard so far,
    and `steady_at_pause(n)`, whether that transcript was heard steadily, when given."""
    policy = policy or TurnEndDecision(CONFIG)
    ep = Endpointer(WebRtcVad(2, 30), config, policy=policy)
    events, pauses = [], 0
    for i in range(0, len(x), 320):
        for e in ep.push(AudioBlock(x[i:i + 320], T0 + i / SAMPLE_RATE)):
            events.append(e)
            if isinstance(e, VoicePaused) and p_at_pause is not None:
                heard = e.last_voiced_t - (0.2 if stale else 0.0)
                if steady_at_pause is not None:
                    ep.heard(e.turn_id, pauses, steady_at_pause(pauses))
                policy.update(p_at_pause(pauses), e.turn_id, revision=pauses, audio_until_t=heard)
                pauses += 1
    return ep, events + ep.finish()


def ended(events):
    return [e for e in events if isinstance(e, TurnEnded)]


@pytest.fixture(scope="module")
def request_clip(tmp_path_factory):
    return speech_clip(tmp_path_factory.mktemp("req"), "What is the capital of France?", before_s=0.5,
                       after_s=2.0)


@pytest.fixture(scope="module")
def paused_clip(tmp_path_factory):
    """'Set a timer for' ... 0.6 s ... 'ten minutes.' as one recording; (samples, pause start, resume)."""
    tmp = tmp_path_factory.mktemp("paused")
    a = speech_clip(tmp, "Set a timer for", before_s=0.5, after_s=0.0)
    b = speech_clip(tmp, "ten minutes.", before_s=0.0, after_s=2.0, seed=1)
    gap = np.random.default_rng(2).normal(0, 10 ** (-55 / 20), int(0.6 * SAMPLE_RATE)).astype(np.float32)
    return np.concatenate([a.samples, gap, b.samples]), a.speech_end, a.speech_end + 0.6


def test_a_complete_request_ends_fast_and_a_cut_one_waits(request_clip):
    x, end = request_clip.samples, request_clip.speech_end
    _, events = run(x, lambda n: 0.999)
    [e] = ended(events)
    assert abs(e.last_voiced_t - T0 - end) <= FRAME + 1e-6
    assert CONFIG.complete_s - 1e-6 <= e.t - e.last_voiced_t < CONFIG.complete_s + FRAME
    _, events = run(x, lambda n: 0.01)
    [e] = ended(events)
    assert CONFIG.incomplete_s - 1e-6 <= e.t - e.last_voiced_t < CONFIG.incomplete_s + FRAME
    # no estimate, or one whose transcript did not hear the last words: the middle wait
    for p, stale in ((None, False), (lambda n: 0.999, True)):
        _, events = run(x, p, stale=stale)
        [e] = ended(events)
        assert CONFIG.no_estimate_s - 1e-6 <= e.t - e.last_voiced_t < CONFIG.no_estimate_s + FRAME


def test_voice_pauses_are_reported_once_per_pause_and_estimates_in_words(request_clip):
    _, events = run(request_clip.samples, lambda n: 0.999)
    paused = [e for e in events if isinstance(e, VoicePaused)]
    pause_s = EndpointerConfig().pause_ms / 1000
    assert paused and all(p.t - p.last_voiced_t == pytest.approx(pause_s, abs=FRAME) for p in paused)
    # every pause but the last is followed by voice again, inside the same turn
    assert len([e for e in events if isinstance(e, VoiceResumed)]) == len(paused) - 1
    verdicts = [e.verdict for e in events if isinstance(e, EndOfTurnEstimate)]
    assert verdicts[0] == "listening" and verdicts[-1] == "sounds finished"
    _, events = run(request_clip.samples, lambda n: 0.01)
    assert [e.verdict for e in events if isinstance(e, EndOfTurnEstimate)][-1] == "sounds unfinished"


def test_speech_resumed_after_an_early_end_joins_the_same_turn_with_all_its_audio(paused_clip):
    x, pause_at, resume_at = paused_clip
    # the pause sounds finished (wrongly): the end comes early, then the user goes on
    ep, events = run(x, lambda n: 0.999)
    kinds = [type(e).__name__ for e in events if isinstance(e, (SpeechStarted, TurnEnded, TurnResumed))]
    assert kinds == ["SpeechStarted", "TurnEnded", "TurnResumed", "TurnEnded"]
    first_end, resumed, last_end = [e for e in events if isinstance(e, (TurnEnded, TurnResumed))]
    assert first_end.turn_id == resumed.turn_id == last_end.turn_id == 1
    assert first_end.t - T0 < resume_at and resumed.ended_t == first_end.t
    assert abs(resumed.t - T0 - resume_at) <= 2 * FRAME
    turn = ep.turn
    assert turn.resumed == 1 and not turn.is_open
    # the turn's audio is the recording from its first kept sample on, without a gap
    a = int(round((turn.audio_start_t(trimmed=False) - T0) * SAMPLE_RATE))
    audio = turn.audio(trimmed=False)
    assert np.array_equal(audio, x[a:a + len(audio)])
    assert (a + len(audio)) / SAMPLE_RATE >= last_end.last_voiced_t - T0
    # the trimmed audio holds both parts
    assert len(turn.audio()) / SAMPLE_RATE >= last_end.last_voiced_t - T0 - pause_at + 0.3


def test_the_same_pause_is_waited_out_when_the_request_sounds_unfinished(paused_clip):
    x, _, _ = paused_clip
    _, events = run(x, lambda n: 0.01 if n == 0 else 0.999)
    assert not any(isinstance(e, TurnResumed) for e in events)
    assert len(ended(events)) == 1


def test_speech_after_the_recovery_window_is_a_new_turn(paused_clip):
    x, _, _ = paused_clip
    _, events = run(x, lambda n: 0.999, EndpointerConfig(resume_window_s=0.2))
    assert [e.turn_id for e in ended(events)] == [1, 2]
    assert not any(isinstance(e, TurnResumed) for e in events)


def test_a_pause_longer_than_the_resume_gap_starts_a_new_turn_even_when_the_end_came_late(paused_clip):
    # no estimate: the end is declared no_estimate_s after the last word, so the second half
    # starts inside the resume window; the 0.6 s pause is still a pause inside one request...
    x, _, _ = paused_clip
    _, events = run(x, None)
    assert any(isinstance(e, TurnResumed) for e in events) and len({e.turn_id for e in ended(events)}) == 1
    # ...but a user who stays silent longer than resume_max_gap_s has started a new request
    _, events = run(x, None, EndpointerConfig(resume_max_gap_s=0.4))
    assert [e.turn_id for e in ended(events)] == [1, 2]
    assert not any(isinstance(e, TurnResumed) for e in events)


def test_fixed_hangover_still_works_and_push_to_talk_never_resumes(paused_clip):
    x, _, _ = paused_clip
    _, events = run(x, None, policy=FixedHangover(0.3))
    assert any(isinstance(e, TurnResumed) for e in events) and len({e.turn_id for e in ended(events)}) == 1
    ep = Endpointer(WebRtcVad(2, 30), EndpointerConfig(mode=Mode.PUSH_TO_TALK))
    ep.gate.press(T0 + 0.1)
    ep.gate.release(T0 + 1.0)
    ep.gate.press(T0 + 1.3)
    ep.gate.release(T0 + 2.5)
    events = []
    for i in range(0, len(x), 320):
        events += ep.push(AudioBlock(x[i:i + 320], T0 + i / SAMPLE_RATE))
    assert [e.turn_id for e in ended(events)] == [1, 2]


def test_a_pause_whose_words_were_not_heard_steadily_is_waited_out_though_it_sounds_finished(paused_clip):
    """"Set a timer for" heard as a whole request: the LLM finds it finished, but the recognizer's
    last word changed when the audio was decoded again (`PauseRechecked`), so the
    decision waits `unsteady_s` and the user's "ten minutes" is not cut off."""
    x, pause_at, resume_at = paused_clip
    assert CONFIG.complete_s < resume_at - pause_at < CONFIG.unsteady_s
    _, events = run(x, lambda n: 0.999, steady_at_pause=lambda n: n != 0)
    assert not any(isinstance(e, TurnResumed) for e in events)
    assert len(ended(events)) == 1 and ended(events)[0].t - T0 > resume_at
    # heard steadily, the same estimate ends the turn in the pause (and the user resumes it)
    _, events = run(x, lambda n: 0.999, steady_at_pause=lambda n: True)
    assert sum(isinstance(e, TurnResumed) for e in events) == 1


def test_a_finished_sounding_pause_is_not_ended_before_its_steadiness_check_answers(request_clip):
    """On a busy machine the check's answer may come after `complete_s`: until it comes, the
    decision waits as for unclear words; once it says steady, the turn ends at the next frame."""
    def end_with_answer_after(delay_s):
        policy = TurnEndDecision(CONFIG)
        ep = Endpointer(WebRtcVad(2, 30), EndpointerConfig(), policy=policy)
        events, due = [], None
        for i in range(0, len(request_clip.samples), 320):
            t = T0 + i / SAMPLE_RATE
            if due is not None and t >= due[0]:
                ep.heard(due[1], 0, steady=True)
                due = None
            for e in ep.push(AudioBlock(request_clip.samples[i:i + 320], t)):
                events.append(e)
                if isinstance(e, VoicePaused) and e.t - T0 > request_clip.speech_end - 0.1:
                    ep.rechecking(e.turn_id, 0)
                    policy.update(0.999, e.turn_id, revision=0, audio_until_t=e.last_voiced_t)
                    if policy.view().verdict != "checking words":
                        return None, None
                    due = (e.t + delay_s, e.turn_id) if delay_s is not None else None
        end = ended(events)[0]
        return end.t - end.last_voiced_t, (due or (None,))[0]

    quick, _ = end_with_answer_after(0.0)
    assert quick == pytest.approx(CONFIG.complete_s, abs=FRAME)     # an early answer costs nothing
    slow, _ = end_with_answer_after(0.3)
    assert CONFIG.complete_s + FRAME < slow < 0.15 + 0.3 + 2 * FRAME  # ended when the answer came
    never, _ = end_with_answer_after(None)
    assert never == pytest.approx(CONFIG.unsteady_s, abs=FRAME)     # no answer: the unclear-words wait


def test_an_unsteady_transcript_lengthens_only_its_own_estimate():
    policy = TurnEndDecision(CONFIG)
    policy.begin_turn(3)
    policy.heard(3, 5, steady=False)
    policy.heard(4, 6, steady=False)             # another turn's transcript: ignored
    policy.update(0.999, 3, revision=5, audio_until_t=1.0)
    view = policy.view()
    assert view.verdict == "unclear words" and view.wait_s == CONFIG.unsteady_s
    assert view.p_end_of_turn == pytest.approx(0.999)  # the estimate is kept, only the wait grows
    policy.update(0.01, 3, revision=5, audio_until_t=1.0)  # sounding unfinished waits longer still
    assert policy.view().verdict == "sounds unfinished" and policy.hangover_s() == CONFIG.incomplete_s
    policy.update(0.999, 3, revision=6, audio_until_t=1.0)  # a newer transcript, not marked
    assert policy.view().verdict == "sounds finished" and policy.hangover_s() == CONFIG.complete_s
    policy.heard(3, 6, steady=False)
    assert policy.hangover_s() == CONFIG.unsteady_s
    policy.heard(3, 6, steady=True)
    assert policy.hangover_s() == CONFIG.complete_s
    policy.heard(3, 7, steady=False)
    policy.begin_turn(4)                          # a new turn forgets the old turn's marks
    policy.update(0.999, 4, revision=7, audio_until_t=1.0)
    assert policy.hangover_s() == CONFIG.complete_s
    for bad in (0.1, 1.5):
        with pytest.raises(ValueError):
            TurnEndConfig(complete_s=0.25, incomplete_s=1.0, unsteady_s=bad)


def test_a_transcript_the_recognizer_left_without_a_sentence_end_waits_longer():
    """"Convert 14 kilometers" written without a full stop: the LLM may find it whole (p 0.6-0.93
    measured on such fragments), the recognizer did not; the wait is at least `open_sentence_s`."""
    policy = TurnEndDecision(CONFIG)
    policy.begin_turn(3)
    policy.sentence_ended(3, 5, ended=False)
    policy.sentence_ended(4, 6, ended=False)      # another turn's transcript: ignored
    policy.update(0.93, 3, revision=5, audio_until_t=1.0)
    view = policy.view()
    assert view.verdict == "no sentence end" and view.wait_s == CONFIG.open_sentence_s
    assert view.p_end_of_turn == pytest.approx(0.93)
    policy.update(0.01, 3, revision=5, audio_until_t=1.0)  # sounding unfinished already waits longer
    assert policy.view().verdict == "sounds unfinished" and policy.hangover_s() == CONFIG.incomplete_s
    policy.heard(3, 5, steady=False)              # both floors: the longer one
    policy.update(0.999, 3, revision=5, audio_until_t=1.0)
    assert policy.hangover_s() == max(CONFIG.open_sentence_s, CONFIG.unsteady_s)
    policy.sentence_ended(3, 6, ended=True)       # a newer transcript with its full stop
    policy.update(0.999, 3, revision=6, audio_until_t=1.0)
    assert policy.view().verdict == "sounds finished" and policy.hangover_s() == CONFIG.complete_s
    policy.begin_turn(4)                          # a new turn forgets the old turn's marks
    policy.update(0.999, 4, revision=6, audio_until_t=1.0)
    assert policy.hangover_s() == CONFIG.complete_s
    off = TurnEndDecision(replace(CONFIG, open_sentence_s=0.0))  # a recognizer that writes no punctuation
    off.begin_turn(1)
    off.sentence_ended(1, 0, ended=False)
    off.update(0.999, 1, revision=0, audio_until_t=1.0)
    assert off.view().verdict == "sounds finished"
    for bad in (0.1, 1.5):
        with pytest.raises(ValueError, match="open_sentence_s"):
            TurnEndConfig(complete_s=0.25, incomplete_s=1.0, open_sentence_s=bad)


def test_a_full_stop_the_recognizer_was_unsure_of_counts_as_none():
    """"Call my brother." heard where the speaker only stopped to think: the mark was written, but
    the recognizer gave it less than `sentence_end_p`; the wait is at least `open_sentence_s`."""
    policy = TurnEndDecision(CONFIG)
    policy.begin_turn(1)
    for revision, (ended, p, verdict) in enumerate([(True, 0.55, "no sentence end"), (True, 0.97, "sounds finished"),
                                                    (False, 0.97, "no sentence end"), (True, None, "sounds finished")]):
        policy.sentence_ended(1, revision, ended=ended, p=p)
        policy.update(0.999, 1, revision=revision, audio_until_t=1.0)
        assert policy.view().verdict == verdict, (ended, p)
    text_only = TurnEndDecision(replace(CONFIG, sentence_end_p=0.0))
    text_only.begin_turn(1)
    text_only.sentence_ended(1, 0, ended=True, p=0.1)
    text_only.update(0.999, 1, revision=0, audio_until_t=1.0)
    assert text_only.view().verdict == "sounds finished"
    with pytest.raises(ValueError, match="sentence_end_p"):
        TurnEndConfig(sentence_end_p=1.0)


def test_sentence_ends_are_full_stops_question_and_exclamation_marks_not_an_ellipsis():
    from foresay.engine.sentences import ends_sentence
    assert all(ends_sentence(t) for t in ("Set a timer for ten minutes.", "Where is Peru? ", "Stop!", "停下。"))
    assert not any(ends_sentence(t) for t in ("Convert 14 kilometers", "Um,", "Set a timer for...", "So…", ""))


def test_a_pause_after_words_without_a_sentence_end_is_waited_out_though_they_sound_finished(paused_clip):
    """"Set a timer for" ... "ten minutes.": the LLM finds the first words finished (p 0.93), the
    recognizer wrote them without a full stop, and the user's "ten minutes" is not cut off."""
    x, pause_at, resume_at = paused_clip
    assert CONFIG.complete_s < resume_at - pause_at < CONFIG.open_sentence_s
    for ended_sentence, resumed in ((False, 0), (True, 1)):
        policy = TurnEndDecision(CONFIG)
        ep = Endpointer(WebRtcVad(2, 30), EndpointerConfig(), policy=policy)
        events, pauses = [], 0
        for i in range(0, len(x), 320):
            for e in ep.push(AudioBlock(x[i:i + 320], T0 + i / SAMPLE_RATE)):
                events.append(e)
                if isinstance(e, VoicePaused):
                    ep.sentence_ended(e.turn_id, pauses, ended_sentence or pauses > 0)
                    policy.update(0.93 if pauses == 0 else 0.999, e.turn_id, revision=pauses,
                                  audio_until_t=e.last_voiced_t)
                    pauses += 1
        events += ep.finish()
        assert sum(isinstance(e, TurnResumed) for e in events) == resumed
        assert len(ended(events)) == 1 + resumed and ended(events)[-1].t - T0 > resume_at


def test_the_decision_combines_estimate_and_cues_and_ignores_stale_or_foreign_estimates():
    policy = TurnEndDecision(CONFIG)
    policy.begin_turn(3)
    assert policy.view().verdict == "listening" and policy.hangover_s() == CONFIG.no_estimate_s
    policy.update(0.9, 4, audio_until_t=1.0)   # another turn's estimate
    assert policy.view().p_end_of_turn is None
    policy.update(0.9, 3)                        # says nothing of what it heard: not current
    assert policy.view().p_end_of_turn is None
    policy.update(0.995, 3, revision=5, audio_until_t=1.0)
    assert policy.view().verdict == "sounds finished" and policy.hangover_s() == CONFIG.complete_s
    policy.update(0.01, 3, revision=4, audio_until_t=1.0)    # older than the newest revision: ignored
    assert policy.hangover_s() == CONFIG.complete_s
    policy.update(0.01, 3, revision=6, audio_until_t=1.0)
    assert policy.view().verdict == "sounds unfinished" and policy.hangover_s() == CONFIG.incomplete_s
    policy.update(0.2, 3, revision=7, audio_until_t=1.0)
    assert policy.view().verdict == "unsure" and CONFIG.complete_s < policy.hangover_s() < CONFIG.incomplete_s
    # the audio cue adds its log-odds to the LLM's (clipped to [incomplete_p, complete_p]); alone it
    # is the estimate but may not shorten the wait below no_estimate_s
    half = TurnEndDecision(CONFIG)   # the default weight, 0.5: half the cue's log-odds
    half.begin_turn(1)
    half.audio_cue(1, 0.9, audio_until_t=1.0)
    assert half.view().p_end_of_turn == pytest.approx(0.75)
    cued = TurnEndDecision(replace(CONFIG, cue_weight=1.0))
    cued.begin_turn(1)
    cued.audio_cue(1, 0.9, audio_until_t=1.0)
    assert cued.view().p_end_of_turn == pytest.approx(0.9) and cued.hangover_s() == CONFIG.no_estimate_s
    cued.update(0.1, 1, audio_until_t=1.0)
    assert cued.view().p_end_of_turn == pytest.approx(0.5)
    cued.update(0.9999999, 1, audio_until_t=1.0)
    assert cued.view().p_end_of_turn == pytest.approx(1 / (1 + (0.01 / 0.99) * (0.1 / 0.9)))
    cued.audio_cue(1, 0.5, audio_until_t=1.0)    # a cue of 0.5 says nothing
    assert cued.view().p_end_of_turn == pytest.approx(0.99) and cued.hangover_s() == CONFIG.complete_s
    cued.audio_cue(2, 0.01, audio_until_t=1.0)   # another turn's cue
    assert cued.hangover_s() == CONFIG.complete_s
    cued.audio_cue(1, 0.01, audio_until_t=1.0)
    assert CONFIG.complete_s < cued.hangover_s() < CONFIG.incomplete_s
    with pytest.raises(ValueError):
        TurnEndConfig(complete_p=0.2, incomplete_p=0.5)
    with pytest.raises(ValueError):
        EndpointerConfig(hold_margin_db=12)
    with pytest.raises(ValueError):
        TurnEndConfig(complete_s=0.05, min_silence_s=0.1)
    with pytest.raises(ValueError):
        EndpointerConfig(resume_window_s=-1)
    with pytest.raises(ValueError):
        EndpointerConfig(resume_max_gap_s=0)


def test_the_wait_is_graded_by_how_finished_the_request_sounds():
    """The default decision waits the shortest only when the request clearly sounds finished; the
    wait never grows as P(end of turn) rises, and a merely likely end (0.9) is waited longer."""
    policy = TurnEndDecision()
    c = policy.config
    policy.begin_turn(1)
    waits = []
    for revision, p in enumerate((0.001, 0.05, 0.2, 0.5, 0.9, 0.98, 0.99, 0.9999)):
        policy.update(p, 1, revision=revision, audio_until_t=1.0)
        waits.append(policy.hangover_s())
    assert waits == sorted(waits, reverse=True)
    assert waits[0] == waits[1] == c.incomplete_s and waits[-1] == waits[-2] == c.complete_s
    assert c.complete_s + 0.15 < waits[4] < c.no_estimate_s


def test_a_word_fading_into_noise_stays_voiced_to_its_end(tmp_path):
    """At 20 dB SNR the end of "please" falls under the 10 dB start margin; right after voice
    the lower hold margin keeps it (with the hold margin at 10 dB it is cut about 0.1 s early)."""
    clip = speech_clip(tmp_path, "Set a timer for ten minutes please", before_s=0.5, after_s=1.5, noise_db=-40)

    def last_voiced(hold_db):
        ep = Endpointer(WebRtcVad(2, 30), EndpointerConfig(hold_margin_db=hold_db), policy=FixedHangover(0.5))
        events = [e for i in range(0, len(clip.samples), 320)
                  for e in ep.push(AudioBlock(clip.samples[i:i + 320], i / SAMPLE_RATE))]
        [e] = ended(events)
        return e.last_voiced_t

    assert abs(last_voiced(6.0) - clip.speech_end) <= 2 * FRAME
    assert last_voiced(10.0) < clip.speech_end - 2 * FRAME

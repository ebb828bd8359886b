"""Endpointing on espeak-ng speech: hands-free turns, the hangover policy, push-to-talk, modes."""
from __future__ import annotations

import numpy as np
import pytest
from audio_kit import speech_clip

from foresay.audio.blocks import SAMPLE_RATE, AudioBlock, rms_db
from foresay.audio.endpoint import Endpointer, EndpointerConfig, Mode, PushToTalkGate
from foresay.audio.hangover import AdaptiveHangover, AdaptiveHangoverConfig, FixedHangover
from foresay.audio.vad import SileroVad, Vad, VadConfig, WebRtcVad, make_vad
from foresay.engine.events import SpeechStarted, TurnEnded

T0 = 500.0   # an arbitrary monotonic start time for the recordings
FRAME = 0.030
EPS = 1e-6


def within(x: float, lo: float, hi: float) -> bool:
    """lo <= x < hi, up to float rounding of the time arithmetic."""
    return lo - EPS <= x < hi + EPS


def feed(ep: Endpointer, x: np.ndarray, t0: float = T0, block: int = 320, finish: bool = True):
    events = []
    for i in range(0, len(x), block):
        events += ep.push(AudioBlock(x[i:i + block], t0 + i / SAMPLE_RATE))
    if finish:
        events += ep.finish()
    return events


def turns(events):
    """[(start, last_voiced, end)] relative to T0."""
    out, open_ = [], {}
    for e in events:
        if isinstance(e, SpeechStarted):
            open_[e.turn_id] = e.t - T0
        elif isinstance(e, TurnEnded):
            out.append((open_.pop(e.turn_id), e.last_voiced_t - T0, e.t - T0))
    assert not open_
    return out


SENTENCES = [
    ("Hello there, could you tell me what the weather will be like tomorrow?", None),
    ("Please set a timer for twenty minutes.", "en+f3"),
    ("What is the capital of Australia?", "en-us"),
]


@pytest.mark.parametrize("frame_ms", [10, 20, 30])
@pytest.mark.parametrize("text,voice", SENTENCES)
def test_hands_free_endpoint_times_match_the_truth(tmp_path, text, voice, frame_ms):
    clip = speech_clip(tmp_path, text, voice=voice, before_s=1.2, after_s=2.0)
    hangover, frame = 0.6, frame_ms / 1000
    ep = Endpointer(WebRtcVad(2, frame_ms), EndpointerConfig(), FixedHangover(hangover))
    [(start, last_voiced, end)] = turns(feed(ep, clip.samples))
    # Within one frame of the truth (the VAD decides per frame) ...
    assert abs(start - clip.speech_start) <= frame + EPS
    assert abs(last_voiced - clip.speech_end) <= frame + EPS
    # ... and the end is declared one hangover after the last voiced frame, within a frame.
    assert within(end - last_voiced, hangover, hangover + frame)
    assert abs(end - (clip.speech_end + hangover)) <= frame + EPS
    # The turn's audio: pre-roll before the speech, trimmed to a short tail after it.
    turn = ep.turn
    assert turn.audio_start_t() - T0 == pytest.approx(start - 0.3, abs=frame)
    assert len(turn.audio()) / SAMPLE_RATE == pytest.approx(
        last_voiced + 0.15 - (start - 0.3), abs=frame)


def test_silero_vad_endpoints_too(tmp_path):
    clip = speech_clip(tmp_path, SENTENCES[0][0], before_s=1.0, after_s=2.0)
    vad = make_vad(VadConfig(kind="silero"))
    assert isinstance(vad.vad, SileroVad) and vad.frame_samples == 512  # levelled (`LevelledVad`)
    ep = Endpointer(vad, EndpointerConfig(), FixedHangover(0.5))
    [(start, last_voiced, end)] = turns(feed(ep, clip.samples))
    frame = 512 / SAMPLE_RATE
    assert abs(start - clip.speech_start) <= 2 * frame
    assert abs(last_voiced - clip.speech_end) <= 2 * frame
    assert within(end - last_voiced, 0.5, 0.5 + frame)


def test_two_utterances_make_two_turns_and_noise_makes_none(tmp_path):
    a = speech_clip(tmp_path, "Turn on the lights.", before_s=0.8, after_s=1.5).samples
    b = speech_clip(tmp_path, "And close the blinds.", voice="en+f3", before_s=0.0, after_s=1.5,
                    seed=1).samples
    # 0.8 s after the first end, inside the default recovery window: turned off here
    ep = Endpointer(WebRtcVad(2, 30), EndpointerConfig(resume_window_s=0), policy=FixedHangover(0.7))
    result = turns(feed(ep, np.concatenate([a, b])))
    assert [t[0] for t in result] == pytest.approx([0.8, len(a) / SAMPLE_RATE], abs=FRAME)

    noise = np.random.default_rng(3).normal(0, 10 ** (-45 / 20), 5 * SAMPLE_RATE).astype(np.float32)
    assert turns(feed(Endpointer(WebRtcVad(3, 30)), noise)) == []


def test_adaptive_hangover_follows_p_end_of_turn(tmp_path):
    clip = speech_clip(tmp_path, "What time is it?", before_s=0.5, after_s=3.0)
    cfg = AdaptiveHangoverConfig(min_s=0.2, max_s=1.5, default_s=0.8)

    def run(p_updates):
        policy = AdaptiveHangover(cfg)
        ep = Endpointer(WebRtcVad(2, 30), policy=policy)
        events = []
        for i in range(0, len(clip.samples), 320):
            t = T0 + i / SAMPLE_RATE
            for at, p, turn_id in p_updates:
                if abs((t - T0) - at) < 1e-9:
                    policy.update(p, turn_id)
            events += ep.push(AudioBlock(clip.samples[i:i + 320], t))
        return turns(events + ep.finish())

    end = clip.speech_end
    # No estimate: the default hangover.
    [(_, lv, e)] = run([])
    assert within(e - lv, 0.8, 0.8 + FRAME)
    # The utterance looks complete 0.1 s into the silence: the end comes after min_s.
    [(_, lv, e)] = run([(round(end + 0.1, 2), 0.97, 1)])
    assert within(e - lv, 0.2, 0.2 + FRAME)
    # Complete only at 0.5 s into the silence: already longer than min_s, so it ends at once.
    [(_, lv, e)] = run([(round(end + 0.5, 2), 0.97, 1)])
    assert e - (end + 0.5) < 2 * FRAME
    # Looks unfinished: the long hangover.
    [(_, lv, e)] = run([(round(end + 0.1, 2), 0.02, 1)])
    assert within(e - lv, 1.5, 1.5 + FRAME)
    # An estimate about another turn is ignored.
    [(_, lv, e)] = run([(round(end + 0.1, 2), 0.97, 99)])
    assert within(e - lv, 0.8, 0.8 + FRAME)


def test_hangover_policy_bounds_and_interpolation():
    policy = AdaptiveHangover(AdaptiveHangoverConfig(min_s=0.2, max_s=1.0, default_s=0.6,
                                                     complete_p=0.8, incomplete_p=0.2))
    policy.begin_turn(4)
    assert policy.hangover_s() == 0.6
    policy.update(0.5, 4)
    assert policy.hangover_s() == pytest.approx(0.6)
    policy.update(2.0)      # clamped
    assert policy.hangover_s() == 0.2
    policy.update(-1.0)
    assert policy.hangover_s() == 1.0
    policy.begin_turn(5)    # a new turn starts from the default
    assert policy.hangover_s() == 0.6
    with pytest.raises(ValueError):
        AdaptiveHangoverConfig(min_s=1.0, max_s=0.5, default_s=0.7)
    with pytest.raises(ValueError):
        FixedHangover(0)


def test_push_to_talk_press_starts_release_ends_at_once_and_vad_trims(tmp_path):
    clip = speech_clip(tmp_path, "Remind me to call my mother tonight.", before_s=1.0, after_s=1.5)
    gate = PushToTalkGate(Mode.PUSH_TO_TALK)
    ep = Endpointer(WebRtcVad(2, 30), EndpointerConfig(mode=Mode.PUSH_TO_TALK),
                    FixedHangover(0.7), gate)
    press, release = T0 + 0.4, T0 + clip.speech_end + 0.8
    gate.press(press)
    gate.release(release)
    events = feed(ep, clip.samples)
    [(start, last_voiced, end)] = turns(events)
    assert start == pytest.approx(0.4)
    assert end == pytest.approx(release - T0)          # no hangover after the release
    assert abs(last_voiced - clip.speech_end) <= FRAME + 1e-6
    turn = ep.turn
    assert turn.mode is Mode.PUSH_TO_TALK
    # Leading silence (press to speech) and trailing silence (speech to release) are trimmed.
    a0 = turn.audio_start_t() - T0
    assert a0 == pytest.approx(clip.speech_start - 0.3, abs=FRAME)
    assert len(turn.audio()) / SAMPLE_RATE == pytest.approx(
        clip.speech_end + 0.15 - a0, abs=FRAME)
    assert len(turn.audio(trimmed=False)) / SAMPLE_RATE >= release - press


def test_push_to_talk_ignores_speech_without_a_press_and_cuts_at_release(tmp_path):
    clip = speech_clip(tmp_path, "Play some quiet music in the kitchen please.", before_s=0.5,
                       after_s=1.0)
    ep = Endpointer(WebRtcVad(2, 30), EndpointerConfig(mode="push-to-talk"))
    assert turns(feed(ep, clip.samples)) == []          # no press: the VAD starts nothing

    ep = Endpointer(WebRtcVad(2, 30), EndpointerConfig(mode="push-to-talk"))
    middle = (clip.speech_start + clip.speech_end) / 2
    ep.gate.press(T0 + 0.2)
    ep.gate.release(T0 + middle)                         # let go mid-sentence
    ep.gate.press(T0 + clip.speech_end + 0.5)            # a press with nothing said
    ep.gate.release(T0 + clip.speech_end + 0.8)
    result = turns(feed(ep, clip.samples))
    assert len(result) == 2
    assert result[0][2] == pytest.approx(middle)
    assert result[0][1] <= middle + 1e-9                  # last voiced is never after the end
    assert result[1][1] == pytest.approx(result[1][0])    # empty turn: last voiced = press
    assert len(ep.turn.audio()) == 0


def test_switching_modes_at_run_time(tmp_path):
    clip = speech_clip(tmp_path, "Tell me a story about a dragon and a knight.", before_s=0.5,
                       after_s=0.5)
    x = np.concatenate([clip.samples, clip.samples])
    n = len(clip.samples) / SAMPLE_RATE
    ep = Endpointer(WebRtcVad(2, 30))
    assert ep.mode is Mode.HANDS_FREE
    switch = T0 + (clip.speech_start + clip.speech_end) / 2
    ep.set_mode("push-to-talk", switch)                  # mid-utterance: the turn ends there
    ep.gate.press(T0 + n + 0.3)
    ep.gate.release(T0 + n + clip.speech_end + 0.2)
    ep.gate.set_mode(Mode.HANDS_FREE, T0 + n + 0.5)      # switched back while the key is down
    events = feed(ep, x)
    result = turns(events)
    assert result[0][2] == pytest.approx(switch - T0)
    assert result[1][0] == pytest.approx(n + 0.3)
    assert result[1][2] == pytest.approx(n + 0.5)        # the switch ended the PTT turn
    assert ep.mode is Mode.HANDS_FREE
    ids = [e.turn_id for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(result)


def test_gaps_in_block_times_are_survived(tmp_path):
    clip = speech_clip(tmp_path, "Good morning.", before_s=0.5, after_s=1.5)
    ep = Endpointer(WebRtcVad(2, 30))
    events = []
    for i in range(0, len(clip.samples), 320):
        t = T0 + i / SAMPLE_RATE + (0.25 if i >= 8000 else 0.0)   # 250 ms lost after 0.5 s
        events += ep.push(AudioBlock(clip.samples[i:i + 320], t))
    events += ep.finish()
    assert ep.gaps == 1
    [(start, _, end)] = turns(events)
    assert start == pytest.approx(clip.speech_start + 0.25, abs=FRAME)


def test_config_validation():
    with pytest.raises(ValueError):
        EndpointerConfig(start_voiced_ms=400, start_window_ms=300)
    with pytest.raises(ValueError):
        EndpointerConfig(mode="always-on")
    with pytest.raises(ValueError):
        EndpointerConfig(word_tail_gap_ms=400, word_tail_max_ms=300)
    with pytest.raises(ValueError):
        VadConfig(kind="webrtc", frame_ms=25)
    with pytest.raises(ValueError):
        WebRtcVad(2, 30).is_speech(np.zeros(100, np.float32))


def test_a_turn_past_max_turn_s_ends_between_words_not_inside_one(tmp_path):
    """Continuous speech longer than max_turn_s is cut at a gap between words, so no word is
    split across two turns."""
    clip = speech_clip(tmp_path, "One two three four five six seven eight nine ten eleven twelve.",
                       before_s=0.5, after_s=1.0)
    ep = Endpointer(WebRtcVad(2, 10), EndpointerConfig(max_turn_s=1.5), FixedHangover(5.0))
    events = feed(ep, clip.samples, finish=False)
    ends = [e for e in events if isinstance(e, TurnEnded)]
    assert ends, "the forced end happened"
    x = clip.samples
    t = ends[0].t - T0
    frame = x[int((t - 0.01) * SAMPLE_RATE): int(t * SAMPLE_RATE)]
    assert not WebRtcVad(2, 10).is_speech(frame) or float(np.sqrt(np.mean(frame ** 2))) < 0.01
    assert ends[0].t - T0 >= 1.5 + clip.speech_start - 0.05


def _hiss(seconds: float, level_db: float, seed: int) -> np.ndarray:
    """A voiceless fricative's noise ("s"): white noise above 5 kHz, at `level_db`."""
    n = int(seconds * SAMPLE_RATE)
    spectrum = np.fft.rfft(np.random.default_rng(seed).normal(0, 1, n))
    spectrum[np.fft.rfftfreq(n, 1 / SAMPLE_RATE) < 5000] = 0
    x = np.fft.irfft(spectrum, n)
    return (x / np.sqrt(np.mean(x ** 2)) * 10 ** (level_db / 20)).astype(np.float32)


def _with_word_tail(clip, closure_s: float, hiss_s: float, level_db: float = -38.0) -> np.ndarray:
    """The clip with a stop's closure after its voice, then the burst's hiss ("... light" + "s")."""
    x = clip.samples.copy()
    a = int((clip.speech_end + closure_s) * SAMPLE_RATE)
    x[a:a + int(hiss_s * SAMPLE_RATE)] += _hiss(hiss_s, level_db, seed=4)
    return x


def test_the_hiss_after_a_final_stop_is_part_of_the_turn(tmp_path):
    """A word's voiceless end ("lights": closure, burst, hiss) that the VAD calls silence still
    belongs to the turn: its last voiced frame is where the hiss stops, so a decode made in the
    silence hears the whole word."""
    clip = speech_clip(tmp_path, "Turn off the kitchen light.", before_s=0.8, after_s=1.5)
    x = _with_word_tail(clip, closure_s=0.07, hiss_s=0.15)
    hiss_end = clip.speech_end + 0.07 + 0.15
    # the premise: the VAD alone hears no speech in the hiss
    vad, frame = WebRtcVad(2, 30), int(FRAME * SAMPLE_RATE)
    heard = [vad.is_speech(x[i:i + frame]) for i in range(0, len(x) - frame + 1, frame)]
    hiss_frames = range(int(np.ceil((clip.speech_end + 0.07) / FRAME)), int(hiss_end / FRAME))
    assert not any(heard[i] for i in hiss_frames)

    [(_, last_voiced, _)] = turns(feed(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.6)), x))
    assert abs(last_voiced - hiss_end) <= FRAME + EPS
    off = EndpointerConfig(word_tail_gap_ms=0)
    [(_, voice_end, _)] = turns(feed(Endpointer(WebRtcVad(2, 30), off, FixedHangover(0.6)), x))
    assert voice_end <= hiss_end - 0.1


def test_sound_long_after_the_voice_or_running_on_is_not_a_word_tail(tmp_path):
    clip = speech_clip(tmp_path, "Turn off the kitchen light.", before_s=0.8, after_s=2.0)
    config = EndpointerConfig(word_tail_gap_ms=120, word_tail_max_ms=300)

    def last_voiced(x, config=config):
        [(_, t, _)] = turns(feed(Endpointer(WebRtcVad(2, 30), config, FixedHangover(0.6)), x))
        return t

    voice_end = last_voiced(clip.samples, EndpointerConfig(word_tail_gap_ms=0))
    # a noise 0.4 s after the voice (a cough, a door) is not the word's end
    assert last_voiced(_with_word_tail(clip, closure_s=0.4, hiss_s=0.15)) == pytest.approx(voice_end)
    # a hiss that runs on (a fan switched on as the user stops) counts only up to word_tail_max_ms
    # after the VAD's last voiced frame (which may be the hiss's first)
    run_on = last_voiced(_with_word_tail(clip, closure_s=0.03, hiss_s=1.0))
    assert voice_end + 0.1 < run_on <= voice_end + 0.3 + 2 * FRAME + EPS


class _ScriptedVad(Vad):
    """Speech exactly in the frames whose start lies in one of `spans` (seconds from T0)."""

    def __init__(self, spans):
        self.frame_samples, self.spans, self._t = 480, spans, 0.0

    def probability(self, frame):
        t, self._t = self._t, self._t + FRAME
        return 1.0 if any(a - EPS <= t < b - EPS for a, b in self.spans) else 0.0


def test_a_word_tail_only_ends_a_turn_it_never_starts_one():
    """A noise the VAD hears for one frame (a knock) with a loud ring after it is not a start of
    speech: the tail rule lengthens a turn's words, it does not make voice out of noise."""
    rng = np.random.default_rng(5)
    x = rng.normal(0, 10 ** (-60 / 20), 3 * SAMPLE_RATE).astype(np.float32)
    x[int(1.0 * SAMPLE_RATE):int(1.27 * SAMPLE_RATE)] += _hiss(0.27, -30.0, seed=6)
    ep = Endpointer(_ScriptedVad([(1.0, 1.03)]), EndpointerConfig(), FixedHangover(0.5))
    assert turns(feed(ep, x, block=480)) == []


def test_a_final_s_in_a_rooms_hum_is_heard_in_its_high_frequencies(tmp_path):
    """In a low rumble louder than the "s" over the whole band, the hiss still stands out in its
    high frequencies; the word's end is found there."""
    clip = speech_clip(tmp_path, "Pass me the olive.", before_s=1.5, after_s=1.5, noise_db=-80)
    rng = np.random.default_rng(7)
    rumble = np.cumsum(rng.normal(0, 1, len(clip.samples)))
    rumble -= np.convolve(rumble, np.ones(400) / 400, mode="same")  # high-passed near 40 Hz: no drift
    rumble = (rumble / np.sqrt(np.mean(rumble ** 2)) * 10 ** (-38 / 20)).astype(np.float32)
    x = _with_word_tail(clip, closure_s=0.0, hiss_s=0.15, level_db=-44.0) + rumble
    hiss_end = clip.speech_end + 0.15
    frame = int(FRAME * SAMPLE_RATE)
    quiet = x[:int(1.0 * SAMPLE_RATE)]
    assert rms_db(x[int(clip.speech_end * SAMPLE_RATE) + frame:int(hiss_end * SAMPLE_RATE)]) < rms_db(quiet) + 10

    def last_voiced(config):
        [(_, t, _)] = turns(feed(Endpointer(WebRtcVad(2, 30), config, FixedHangover(0.6)), x))
        return t

    assert abs(last_voiced(EndpointerConfig()) - hiss_end) <= FRAME + EPS
    assert last_voiced(EndpointerConfig(word_tail_hiss_db=0)) <= hiss_end - 0.09


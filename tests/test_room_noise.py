"""The room's noise as the endpointer hears it: the speech band (hum, rumble and DC out, speech
in, the same filtering however the stream is cut), and turns that zeros, a DC offset or mains hum
leave where they are."""
import numpy as np
import pytest
from audio_kit import speech_clip
from test_audio_endpoint import EPS, FRAME, feed, turns

from foresay.audio.blocks import SAMPLE_RATE, rms_db
from foresay.audio.endpoint import Endpointer, EndpointerConfig
from foresay.audio.hangover import FixedHangover
from foresay.audio.room_noise import SpeechBand
from foresay.audio.vad import WebRtcVad


def through(x: np.ndarray, frame: int = 480) -> np.ndarray:
    band = SpeechBand()
    return np.concatenate([band(x[i:i + frame]) for i in range(0, len(x), frame)])


def gain_db(hz: float) -> float:
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    x = np.sin(2 * np.pi * hz * t) if hz else np.ones(SAMPLE_RATE)
    return rms_db(through(x)[SAMPLE_RATE // 2:]) - rms_db(x[SAMPLE_RATE // 2:])


def test_hum_and_dc_are_taken_out_and_speech_frequencies_kept():
    assert gain_db(0) < -60
    assert gain_db(50) < -20 and gain_db(60) < -15
    assert abs(gain_db(100) + 3.0) < 0.5  # the cutoff
    for hz in (200, 1000, 4000):
        assert abs(gain_db(hz)) < 0.2


def test_the_stream_is_filtered_the_same_however_it_is_cut():
    x = np.random.default_rng(0).normal(0, 0.1, SAMPLE_RATE).astype(np.float32)
    np.testing.assert_allclose(through(x, 160), through(x, 480), atol=1e-12)
    np.testing.assert_allclose(through(x, 480), through(x, 7), atol=1e-12)


def test_a_bad_cutoff_is_refused():
    with pytest.raises(ValueError, match="cutoff_hz"):
        SpeechBand(cutoff_hz=9000)


def test_zeros_in_the_stream_teach_the_noise_floor_nothing(tmp_path):
    """A waking microphone's first blocks, a mute key, a dropout: zeros, before the request or in
    the room before it. The turn starts and ends as it would without them (a floor pulled down to
    zeros let the room pass as voice: turns ended late or not at all)."""
    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=1.0, after_s=1.5, noise_db=-55.0)

    def turn_with(zeros_s: float, at_s: float):
        n, at = (int(round(s / FRAME)) * round(FRAME * SAMPLE_RATE) for s in (zeros_s, at_s))  # whole frames
        x = np.concatenate([clip.samples[:at], np.zeros(n, np.float32), clip.samples[at:]])
        [(start, last, _)] = turns(feed(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.6)), x))
        return start - n / SAMPLE_RATE, last - n / SAMPLE_RATE

    start, last = turn_with(0.0, 0.0)
    assert abs(last - clip.speech_end) <= 2 * FRAME
    for zeros_s, at_s in ((0.3, 0.0), (1.5, 0.0), (2.0, 0.3)):
        assert turn_with(zeros_s, at_s) == pytest.approx((start, last), abs=EPS)


def test_a_room_of_digital_silence_still_hears_every_word(tmp_path):
    """A gated microphone: zeros around the speech, opening inside the first word. The first
    sound after them is then speech, so it sets no floor above a quiet room's, and the words
    after it still pass the energy check."""
    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=1.0, after_s=1.5)
    x = clip.samples.copy()
    opens = clip.speech_start + 0.05
    t = np.arange(len(x)) / SAMPLE_RATE
    x[(t < opens) | (t > clip.speech_end + 0.02)] = 0.0
    [(start, last, _)] = turns(feed(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.6)), x))
    assert abs(start - opens) <= 2 * FRAME and abs(last - clip.speech_end) <= 2 * FRAME


def test_a_microphones_dc_offset_changes_no_turn(tmp_path):
    """Many microphones add a DC offset (here 1% of full scale, -40 dBFS): the energy check
    measures the sound, not the offset, so the turn starts and ends where it would without it."""
    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=1.0, after_s=1.5, noise_db=-60.0)

    def turn(x):
        [(start, last, _)] = turns(feed(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.6)), x))
        return start, last

    assert turn(clip.samples + np.float32(0.01)) == pytest.approx(turn(clip.samples), abs=EPS)


def test_mains_hum_does_not_end_a_turn_inside_a_request(tmp_path):
    """50 Hz hum at -35 dBFS (a ground loop) under quiet speech (-30 dBFS): the energy check reads
    the speech band, so the speech stands over the floor and the request is one turn where it is
    (read over the whole band, the hum hid all of it)."""
    clip = speech_clip(tmp_path, "Hello there, could you tell me what the weather will be like tomorrow?",
                       before_s=1.0, after_s=1.5, noise_db=-60.0, level_db=-30.0)
    hum = (0.025 * np.sin(2 * np.pi * 50 * np.arange(len(clip.samples)) / SAMPLE_RATE)).astype(np.float32)
    found = turns(feed(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.6)), clip.samples + hum))
    assert len(found) == 1
    [(start, last, _)] = found
    assert abs(start - clip.speech_start) <= 2 * FRAME and abs(last - clip.speech_end) <= 2 * FRAME

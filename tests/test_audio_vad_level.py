"""The levelled VAD: a quiet microphone is heard as a loud one (`LevelledVad`, `audio/vad.py`)."""
from __future__ import annotations

import numpy as np
import pytest
from audio_kit import speech_clip

from foresay.audio.vad import LevelledVad, VadConfig, WebRtcVad, make_vad

TEXT = "Hello there, could you tell me what the weather will be like tomorrow?"


def decisions(config: VadConfig, x: np.ndarray) -> np.ndarray:
    vad = make_vad(config)
    n = vad.frame_samples
    return np.array([vad.is_speech(x[i:i + n]) for i in range(0, len(x) - n + 1, n)])


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return speech_clip(tmp_path_factory.mktemp("levelled_vad"), TEXT, level_db=-20.0, noise_db=-60.0)


def test_a_quiet_reading_is_heard_as_the_loud_one(clip):
    n = 480
    speech = slice(int(clip.speech_start * 16000) // n, int(clip.speech_end * 16000) // n)
    loud = decisions(VadConfig(max_gain_db=0.0), clip.samples)[speech]
    quiet = (clip.samples * 10 ** (-40 / 20)).astype(np.float32)   # a microphone 40 dB quieter
    raw = decisions(VadConfig(max_gain_db=0.0), quiet)[speech]
    levelled = decisions(VadConfig(), quiet)[speech]
    assert (raw == loud).mean() < 0.95       # unlevelled, WebRTC loses the quiet frames of words
    assert (levelled == loud).mean() >= 0.98


def test_levelling_never_lowers_and_is_bounded(clip):
    vad = LevelledVad(WebRtcVad(2, 30), speech_level_db=-25.0, max_gain_db=30.0)
    n = vad.frame_samples
    assert vad.gain_db == 0.0    # nothing heard yet
    assert not vad.is_speech(np.zeros(n, np.float32))
    assert vad.gain_db == 0.0    # zeros are not heard: they teach the levelling nothing
    vad.is_speech(np.full(n, 1e-4, np.float32))
    assert vad.gain_db == 30.0   # a quiet sound: the cap
    assert not vad.is_speech(np.zeros(n, np.float32))
    loud = clip.samples * 10 ** (15 / 20)    # louder than the level: heard as it came
    vad.reset()
    for i in range(0, len(loud) - n + 1, n):
        vad.is_speech(np.clip(loud[i:i + n], -1, 1).astype(np.float32))
    assert vad.gain_db == 0.0


def test_the_settings_say_whether_the_vad_is_levelled():
    assert isinstance(make_vad(VadConfig()), LevelledVad)
    assert isinstance(make_vad(VadConfig(max_gain_db=0.0)), WebRtcVad)
    with pytest.raises(ValueError, match="speech_level_db"):
        VadConfig(speech_level_db=6.0)
    with pytest.raises(ValueError, match="max_gain_db"):
        VadConfig(max_gain_db=-1.0)

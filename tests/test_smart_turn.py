"""Smart Turn v3.2 as an end-of-turn cue: Whisper's log-mel in numpy, the 8 s window, the model on
real speech (a Piper voice), and a cue that runs the model once per pause."""
import numpy as np
import pytest

from foresay.audio.smart_turn import (SmartTurnConfig, SmartTurnCue, SmartTurnModel, last_window, log_mel,
                                      normalize, smart_turn_features)
from foresay.engine.errors import ModelUnavailable

SR = 16000


@pytest.fixture(scope="module")
def piper_speech(registry_model):
    """`speak(text)`: 16 kHz float32 speech of the registry's Piper voice, deterministic."""
    from piper import PiperVoice, SynthesisConfig

    from foresay.audio.resample import resample

    folder = registry_model("piper-en_US-joe-medium")
    voice = PiperVoice.load(str(folder / "en_US-joe-medium.onnx"))
    still = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)

    def speak(text: str) -> np.ndarray:
        audio = np.concatenate([c.audio_float_array for c in voice.synthesize(text, syn_config=still)])
        return resample(audio, voice.config.sample_rate, SR)
    return speak


@pytest.fixture(scope="module")
def model(registry_model):
    return SmartTurnModel(SmartTurnConfig(model_path=str(registry_model("smart-turn-v3.2") / "smart-turn-v3.2-cpu.onnx")))


def _then_silence(speech: np.ndarray, silence_s: float = 0.2) -> np.ndarray:
    return np.concatenate([np.zeros(SR // 2, np.float32), speech, np.zeros(int(silence_s * SR), np.float32)])


def test_log_mel_equals_the_whisper_feature_extractor_on_real_speech(piper_speech):
    from transformers import WhisperFeatureExtractor

    speech = _then_silence(piper_speech("Could you set a timer for ten minutes, please?"))
    reference = WhisperFeatureExtractor(chunk_length=8)(
        last_window(speech), sampling_rate=SR, padding="max_length", max_length=8 * SR, truncation=True,
        do_normalize=True, return_tensors="np").input_features
    mine = smart_turn_features(speech)
    assert mine.shape == reference.shape == (1, 80, 800) and mine.dtype == np.float32
    assert np.abs(mine - reference).max() < 1e-4
    assert np.abs(log_mel(last_window(speech)) - reference[0]).max() > 0.1  # the normalization matters


def test_the_window_is_the_last_8_s_zero_padded_in_front_and_normalized():
    rng = np.random.default_rng(0)
    short = rng.normal(0, 0.1, 3 * SR).astype(np.float32)
    padded = last_window(short)
    assert len(padded) == 8 * SR and not padded[:5 * SR].any() and np.array_equal(padded[5 * SR:], short)
    long = rng.normal(0, 0.1, 10 * SR).astype(np.float32)
    assert np.array_equal(last_window(long), long[2 * SR:])
    unit = normalize(padded)
    assert abs(unit.mean()) < 1e-5 and abs(unit.std() - 1) < 1e-3
    assert np.isfinite(normalize(np.zeros(8 * SR, np.float32))).all()  # silence does not divide by zero
    # normalization makes the features blind to the gain; the padding is zeros before it
    assert np.abs(smart_turn_features(short) - smart_turn_features(4 * short)).max() < 1e-4
    assert np.array_equal(smart_turn_features(short), log_mel(normalize(padded))[None])
    # a shorter window hears only the end: the same as the end given alone
    assert np.array_equal(smart_turn_features(long, window_s=2.0), smart_turn_features(long[-2 * SR:]))


def test_a_whole_request_sounds_more_finished_than_the_same_request_cut_mid_phrase(model, piper_speech):
    for text in ("Set a timer for ten minutes and then remind me to call my mother.",
                 "I would like to book a table for two people tomorrow evening."):
        speech = piper_speech(text)
        whole = model.predict(_then_silence(speech))
        cut = [model.predict(_then_silence(speech[:int(f * len(speech))])) for f in np.arange(0.2, 0.81, 0.05)]
        assert 0.0 <= min(cut) and max(cut + [whole]) <= 1.0
        assert whole > 0.9, text
        assert np.mean(cut) < whole - 0.3, (text, np.round(cut, 2))


def test_the_cue_runs_the_model_once_per_pause(model, piper_speech):
    cue = SmartTurnCue(model, SmartTurnConfig(pause_s=0.2))
    frame = 480
    speech = piper_speech("What is the capital of France?")
    cue.begin_turn(1)
    t = 0.0
    for i in range(0, len(speech) - frame, frame):
        cue.observe(speech[i:i + frame], True, t)
        t += frame / SR
    assert cue.p_end() is None   # no silence after the voice yet
    calls = model.calls
    for _ in range(3):           # 90 ms of silence: still shorter than pause_s
        cue.observe(np.zeros(frame, np.float32), False, t)
        t += frame / SR
    assert cue.p_end() is None and model.calls == calls
    for _ in range(10):
        cue.observe(np.zeros(frame, np.float32), False, t)
        t += frame / SR
    first = cue.p_end()
    assert 0.0 <= first <= 1.0 and model.calls == calls + 1
    for _ in range(10):          # more silence: the same pause, the same answer
        cue.observe(np.zeros(frame, np.float32), False, t)
        assert cue.p_end() == first
    assert model.calls == calls + 1
    cue.observe(speech[:frame], True, t)   # the voice again: a new pause gets a new answer
    for _ in range(8):
        cue.observe(np.zeros(frame, np.float32), False, t)
    cue.p_end()
    assert model.calls == calls + 2
    cue.begin_turn(2)
    assert cue.p_end() is None


def test_the_cue_judges_the_audio_up_to_pause_s_after_the_voice_however_late_it_is_asked(model, piper_speech):
    speech = piper_speech("Set a timer for ten minutes.")
    answers = []
    for silence_frames in (7, 40):
        cue = SmartTurnCue(model, SmartTurnConfig(pause_s=0.2))
        for i in range(0, len(speech) - 480, 480):
            cue.observe(speech[i:i + 480], True, 0.0)
        for _ in range(silence_frames):
            cue.observe(np.zeros(480, np.float32), False, 0.0)
        answers.append(cue.p_end())
    assert answers[0] == answers[1]


def test_a_missing_model_names_the_fetch_command(tmp_path, monkeypatch):
    with pytest.raises(ModelUnavailable, match="foresay models fetch smart-turn-v3.2"):
        SmartTurnModel(SmartTurnConfig(model_path=str(tmp_path / "nothing.onnx")))
    monkeypatch.setenv("FORESAY_REGISTRY_DIR", str(tmp_path))
    with pytest.raises(ModelUnavailable, match="foresay models fetch smart-turn-v3.2"):
        SmartTurnModel()


def test_config_is_checked():
    for bad in ({"threads": 0}, {"window_s": 9.0}, {"window_s": 0.0}, {"pause_s": -0.1}, {"weight": -1.0}):
        with pytest.raises(ValueError):
            SmartTurnConfig(**bad)

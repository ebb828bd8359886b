"""Smart Turn v3.2 as an end-of-turn cue: Whisper's log-mel in numpy, the 8 s window, the model on
real speech (a Piper voice), and the stage that judges each voice pause on its own thread."""
import asyncio
import threading

import numpy as np
import pytest

from foresay.audio.smart_turn import (SmartTurnConfig, SmartTurnModel, last_window, log_mel, normalize,
                                      smart_turn_features, wanted)
from foresay.audio.smart_turn_stage import SmartTurnStage
from foresay.engine.asr.factory import AsrConfig
from foresay.engine.errors import ModelUnavailable
from foresay.engine.events import AudioTurnCue, UserAudio, VoicePaused

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


class _Recorded:
    """The real model, remembering each call's audio and thread."""
    def __init__(self, model):
        self.model, self.config, self.calls = model, model.config, []

    def predict(self, audio):
        self.calls.append((np.array(audio), threading.current_thread().name))
        return self.model.predict(audio)


def _blocks(audio, t0, turn_id=1, n=320):
    return [UserAudio(turn_id, t0 + i / SR, audio[i:i + n]) for i in range(0, len(audio), n)]


def test_the_stage_judges_each_pause_on_its_worker_through_the_pause(model, piper_speech):
    """At a VoicePaused the turn's audio through the pause's `t` is judged once, off the event loop;
    the answer says which turn and which audio it heard. A pause asked before its audio arrived
    waits for it; a new turn starts from its own audio."""
    speech = _then_silence(piper_speech("What is the capital of France?"), 0.3)
    recorded, out = _Recorded(model), []
    stage = SmartTurnStage(recorded, out.append)
    t0 = 100.0
    pause_t = t0 + (len(speech) - int(0.2 * SR)) / SR  # 0.1 s of silence after the voice

    async def drive():
        blocks = _blocks(speech, t0)
        at = int((pause_t - t0) * SR) // 320
        for block in blocks[:at]:
            stage.handle(block)
        stage.handle(VoicePaused(1, pause_t, last_voiced_t=pause_t - 0.1))  # its last block not yet here
        await stage.settle()
        assert not out
        for block in blocks[at:]:
            stage.handle(block)
        await stage.settle()
        for block in _blocks(speech[:SR], t0 + 10, turn_id=2):  # a new turn: its own audio only
            stage.handle(block)
        stage.handle(VoicePaused(2, t0 + 10.5, last_voiced_t=t0 + 10.4))
        await stage.settle()
        stage.close()

    asyncio.run(drive())
    first, second = out
    assert isinstance(first, AudioTurnCue) and (first.turn_id, first.t, first.audio_until_t) == (1, pause_t, pause_t)
    heard, thread = recorded.calls[0]
    assert len(heard) == round((pause_t - t0) * SR) and np.array_equal(heard, speech[:len(heard)])
    assert thread.startswith("foresay-smart-turn")
    assert first.p_end_of_turn == pytest.approx(model.predict(heard)) and first.took_ms > 0
    assert second.turn_id == 2 and len(recorded.calls[1][0]) == SR // 2


def test_a_pause_superseded_before_its_call_began_is_not_judged(model, piper_speech):
    speech = _then_silence(piper_speech("Turn off the lights."), 0.3)
    recorded, out = _Recorded(model), []
    stage = SmartTurnStage(recorded, out.append)

    async def drive():
        for block in _blocks(speech, 0.0):
            stage.handle(block)
        busy = threading.Event()
        blocker = asyncio.ensure_future(stage.run_in_worker(busy.wait, 5))  # the worker is busy
        stage.handle(VoicePaused(1, 1.0, last_voiced_t=0.9))
        stage.handle(VoicePaused(1, 1.2, last_voiced_t=1.1))
        busy.set()
        await blocker
        await stage.settle()
        stage.close()

    asyncio.run(drive())
    assert [e.audio_until_t for e in out] == [1.2] and len(recorded.calls) == 1


def test_a_missing_model_names_the_fetch_command(tmp_path, monkeypatch):
    with pytest.raises(ModelUnavailable, match="foresay models fetch smart-turn-v3.2"):
        SmartTurnModel(SmartTurnConfig(model_path=str(tmp_path / "nothing.onnx")))
    monkeypatch.setenv("FORESAY_REGISTRY_DIR", str(tmp_path))
    with pytest.raises(ModelUnavailable, match="foresay models fetch smart-turn-v3.2"):
        SmartTurnModel()


def test_auto_uses_the_model_only_when_it_is_at_hand(tmp_path, monkeypatch):
    monkeypatch.setenv("FORESAY_REGISTRY_DIR", str(tmp_path / "registry"))
    assert SmartTurnConfig().use == "auto"
    auto = SmartTurnConfig(use="auto", model_path=str(tmp_path / "x.onnx"))
    assert not wanted(SmartTurnConfig(use="auto")) and not wanted(auto)
    (tmp_path / "x.onnx").write_bytes(b"onnx")
    assert wanted(auto) and wanted(SmartTurnConfig(model_path=str(tmp_path / "x.onnx")))
    assert wanted(SmartTurnConfig(use="on")) and not wanted(SmartTurnConfig(use="off", model_path=str(tmp_path / "x.onnx")))


def test_auto_leaves_the_cue_out_beside_an_ear_for_synthetic_voices(tmp_path):
    (tmp_path / "x.onnx").write_bytes(b"onnx")
    auto = SmartTurnConfig(model_path=str(tmp_path / "x.onnx"))
    for target, draft, people in (("demo", "demo-draft", False), ("tiny-random", "tiny-random-draft", False),
                                  ("demo-llm", "demo-llm-draft", False), ("tiny.en", None, True),
                                  (str(tmp_path), None, True), ("Qwen/Qwen3-ASR-0.6B", None, True)):
        ear = AsrConfig(target=target, draft=draft)
        assert ear.hears_people is people, target
        assert wanted(auto, ear.hears_people) is people
    assert wanted(SmartTurnConfig(use="on"), hears_people=False)


def test_config_is_checked():
    for bad in ({"threads": 0}, {"window_s": 9.0}, {"window_s": 0.0}, {"use": "always"}):
        with pytest.raises(ValueError):
            SmartTurnConfig(**bad)

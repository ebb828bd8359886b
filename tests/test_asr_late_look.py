"""Nothing the user said is lost to the voice test: a last word spoken low over room noise fails
the endpointer's test (the VAD and a margin over the noise), so the pause decode stops before it;
the recognizer's second look in the silence hears it (real Whisper tiny.en on a Piper reading)."""
import asyncio
import wave
from dataclasses import replace

import numpy as np
import pytest

from foresay.audio.blocks import SAMPLE_RATE, AudioBlock
from foresay.engine.sequences import words

REQUEST = "Could you summarise the news headlines in a few sentences?"
NOISE = 0.002   # room noise RMS, about -54 dBFS
LAST_WORD_OVER_NOISE = 1.6  # the last word's RMS over the noise's: 4 dB, under the margins of the voice test


@pytest.fixture(scope="module")
def quiet_last_word(registry_model, tmp_path_factory):
    """A recording of REQUEST whose last word is spoken low, and the time that word begins."""
    registry_model("piper-en_US-joe-medium")
    from foresay.engine.demo.piper_sets import Reading, load_voice, read_aligned, room_noise

    samples, boundaries = read_aligned(load_voice(alignments=True), REQUEST, Reading(1.0, 0.667, 0.8))
    last = boundaries[-1]
    loud = samples[last:][np.abs(samples[last:]) > 0.1 * np.abs(samples[last:]).max()]
    samples = samples.copy()
    samples[last:] *= LAST_WORD_OVER_NOISE * NOISE / np.sqrt(np.mean(loud ** 2))
    lead, tail = int(0.5 * SAMPLE_RATE), int(2.5 * SAMPLE_RATE)
    audio = np.concatenate([np.zeros(lead, np.float32), samples, np.zeros(tail, np.float32)])
    audio = audio + room_noise(len(audio), NOISE, np.random.default_rng(3))
    path = tmp_path_factory.mktemp("late_look") / "request.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes())
    return path, audio, (lead + last) / SAMPLE_RATE


def test_the_voice_test_misses_the_quiet_last_word(quiet_last_word):
    """The premise of the next test: the endpointer's last voiced frame lies before the last word."""
    from foresay.audio.endpoint import Endpointer
    from foresay.audio.vad import VadConfig, make_vad
    from foresay.engine.events import VoicePaused

    _, audio, last_word_t = quiet_last_word
    endpointer = Endpointer(make_vad(VadConfig()))
    paused = []
    for at in range(0, len(audio), 320):
        paused += [e for e in endpointer.push(AudioBlock(audio[at:at + 320], at / SAMPLE_RATE))
                   if isinstance(e, VoicePaused)]
    assert paused and paused[-1].last_voiced_t < last_word_t + 0.05


def test_a_quiet_last_word_reaches_the_final_transcript(quiet_last_word, tmp_path, fixture_dir, tiny_en):
    """With the second look the final holds a word after "a few" (low over the noise, Whisper may
    mishear it); without it (`late_look_ms = 0`) the final stops at "few": the word is lost."""
    from foresay.app.commands import replay
    from foresay.app.config import load_settings

    config = tmp_path / "config.toml"
    config.write_text(f'[app]\nprofile = "tiny-random"\nhistory_dir = "{tmp_path / "history"}"\n'
                      '[asr]\nbackend = "faster-whisper"\ntarget = "tiny.en"\n'
                      '[predgen]\nmax_new_tokens = 8\n[tts]\nengine = "espeak"\n')
    settings = load_settings(config)
    heard = {}
    for late_look_ms in (350, 0):
        chosen = replace(settings, streaming=replace(settings.streaming, late_look_ms=late_look_ms))
        metrics = asyncio.run(replay(chosen, quiet_last_word[0], None))
        assert len(metrics) == 1  # one turn
        heard[late_look_ms] = words(metrics[0]["user_text"])
    assert heard[0][:3] == ["could", "you", "summarize"] and heard[0][-2:] == ["a", "few"], heard
    assert heard[350] == heard[0] + heard[350][len(heard[0]):] and len(heard[350]) == len(heard[0]) + 1, heard

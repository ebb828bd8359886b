"""A real Whisper writes words over audio that holds none ("you" over room noise or a breath);
with `no_speech_p` set, Foresay hears such audio as nothing, by Whisper's own rule, and a turn
that heard nothing is not answered. A quiet request is still heard."""
import asyncio
import wave

import numpy as np
import pytest

from foresay.engine.asr.errors import InvalidAsrConfig
from foresay.engine.asr.whisper.faster import FasterWhisperBackend, FasterWhisperConfig
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.sequences import words

ROOM = 0.002  # room noise RMS, about -54 dBFS
REQUEST = "What time is it in Tokyo?"


def room(n: int, seed: int) -> np.ndarray:
    from foresay.engine.demo.piper_sets import room_noise
    return room_noise(n, ROOM, np.random.default_rng(seed))


def breath(level: float = 0.03, seconds: float = 0.35) -> np.ndarray:
    """A burst of air: low-passed noise under a smooth envelope, as a breath or a sigh sounds."""
    from foresay.engine.demo.piper_sets import room_noise
    n = int(seconds * SAMPLE_RATE)
    return room_noise(n, level, np.random.default_rng(5)) * np.hanning(n).astype(np.float32)


@pytest.fixture(scope="module")
def tiny_en(registry_model):
    """The registry's tiny.en as configured by default: Whisper's own no-speech threshold."""
    registry_model("whisper-tiny.en")
    return FasterWhisperBackend(FasterWhisperConfig("tiny.en", cpu_threads=1))  # the default: the rule on


@pytest.fixture(scope="module")
def said(registry_model):
    """`said(text, gain)`: Piper's joe voice reading `text`, scaled by `gain`, in room noise."""
    registry_model("piper-en_US-joe-medium")
    from foresay.engine.demo.piper_sets import Reading, load_voice, read

    voice = load_voice()

    def say(text: str, gain: float = 1.0) -> np.ndarray:
        pad = np.zeros(int(0.3 * SAMPLE_RATE), np.float32)
        audio = np.concatenate([pad, gain * read(voice, text, Reading(1.0, 0.667, 0.8)), pad])
        return audio + room(len(audio), 1)
    return say


def test_room_noise_and_a_breath_are_heard_as_nothing(tiny_en):
    quiet = room(SAMPLE_RATE, 0)
    sigh = quiet.copy()
    sigh[3200:3200 + len(breath())] += breath()
    unfiltered = FasterWhisperBackend(FasterWhisperConfig("tiny.en", cpu_threads=1, no_speech_p=0))
    for audio in (quiet, sigh):
        heard = tiny_en.transcribe(audio)
        assert heard.tokens == () and heard.p_no_speech > 0.6, tiny_en.text.decode(heard.tokens)
        assert unfiltered.transcribe(audio).tokens  # Whisper alone writes "you" or "." 


def test_a_request_said_quietly_is_still_heard(tiny_en, said):
    assert words(tiny_en.text.decode(tiny_en.transcribe(said(REQUEST)).tokens)) == words(REQUEST)
    quiet = words(tiny_en.text.decode(tiny_en.transcribe(said(REQUEST, 0.05)).tokens))
    assert quiet[:2] == ["what", "time"] and quiet[-1] == "tokyo", quiet  # heard, if not word for word
    heard = tiny_en.transcribe(said("Stop.", 0.05))
    assert words(tiny_en.text.decode(heard.tokens)) == ["stop"]


def test_words_already_forced_are_never_taken_back(tiny_en):
    """After a forced prefix (words the turn's earlier hops agreed on) the rule does not apply."""
    noise = room(2 * SAMPLE_RATE, 0)
    stop = tuple(tiny_en.text.encode(" Stop"))
    assert tiny_en.transcribe(noise).tokens == ()
    assert not tiny_en._no_speech(tiny_en.transcribe(noise, forced=stop), stop)


def test_the_threshold_is_checked():
    from foresay.engine.asr.factory import AsrConfig
    with pytest.raises(InvalidAsrConfig, match="no_speech_p"):
        AsrConfig(no_speech_p=1.5)
    with pytest.raises(InvalidAsrConfig, match="no_speech_p"):
        FasterWhisperConfig("tiny.en", no_speech_p=1.0)
    with pytest.raises(InvalidAsrConfig, match="no_speech_p"):
        FasterWhisperConfig("tiny.en", no_speech_p=-0.1)


def test_a_breath_after_a_request_opens_a_turn_that_is_not_answered(said, tiny_en, tmp_path):
    """The voice test lets the breath through (two turns); only the request is answered. Without
    the rule Whisper hears "You", and the assistant answers it."""
    from foresay.app.commands import replay
    from foresay.app.config import load_settings
    from foresay.audio.blocks import AudioBlock
    from foresay.audio.endpoint import Endpointer
    from foresay.audio.vad import VadConfig, make_vad
    from foresay.engine.events import SpeechStarted

    gap = room(int(2.5 * SAMPLE_RATE), 4)
    gap[SAMPLE_RATE:SAMPLE_RATE + len(breath())] += breath()
    audio = np.concatenate([said(REQUEST), gap, room(2 * SAMPLE_RATE, 5)])
    endpointer = Endpointer(make_vad(VadConfig()))
    starts = [e for at in range(0, len(audio), 320)
              for e in endpointer.push(AudioBlock(audio[at:at + 320], at / SAMPLE_RATE)) if isinstance(e, SpeechStarted)]
    assert len(starts) == 2  # the premise: the breath opens a turn of its own

    path = tmp_path / "request.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes())
    config = tmp_path / "config.toml"
    config.write_text(f'[app]\nprofile = "tiny-random"\nhistory_dir = "{tmp_path / "history"}"\n'
                      '[asr]\nbackend = "faster-whisper"\ntarget = "tiny.en"\nno_speech_p = 0.6\n'
                      '[predgen]\nmax_new_tokens = 8\n[tts]\nengine = "espeak"\n')
    metrics = asyncio.run(replay(load_settings(config), path, None))
    assert [words(m["user_text"]) for m in metrics] == [words(REQUEST)]

"""The real Whisper tiny.en through CTranslate2 decodes a request in a 10 s encoder window as it
does in 30 s, picks the next window for longer audio, redoes a looped decode, and still decodes
audio longer than 30 s; tiny.en and base resolve to the registry copies."""
import numpy as np
import pytest

from foresay.engine.asr.backends import Hypothesis
from foresay.engine.asr.whisper.faster import FasterWhisperConfig, _source
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.sequences import words

REQUESTS = ("What time is it in Tokyo?", "Remind me to call the dentist tomorrow at 9.")
LONG = "Please write down that the meeting with the architects went well and they will send new drawings on Monday."


@pytest.fixture(scope="module")
def spoken(registry_model):
    """Piper's joe voice at its default settings, half a second of silence either side."""
    registry_model("piper-en_US-joe-medium")
    from foresay.engine.demo.piper_sets import Reading, load_voice, read

    voice, reading = load_voice(), Reading(1.0, 0.667, 0.8)
    silence = np.zeros(SAMPLE_RATE // 2, np.float32)
    return {text: np.concatenate([silence, read(voice, text, reading), silence]) for text in (*REQUESTS, LONG)}


def said(backend, hypothesis: Hypothesis) -> list[str]:
    return words(backend.text.decode(hypothesis.tokens))


def test_registry_names_resolve_to_the_fetched_copies(registry_model):
    tiny_en, base = registry_model("whisper-tiny.en"), registry_model("whisper-base")
    for name, folder in (("tiny.en", tiny_en), ("Systran/faster-whisper-tiny.en", tiny_en), ("base", base),
                         ("Systran/faster-whisper-base", base)):
        assert _source(FasterWhisperConfig(name)) == str(folder)
    assert _source(FasterWhisperConfig("small.en")) == "small.en"  # other names still go to the hub


def test_a_request_decodes_to_the_same_words_in_10_s_as_in_30_s(tiny_en, spoken):
    for text in REQUESTS:
        audio = spoken[text]
        assert said(tiny_en, tiny_en.decode_in_window(audio, 30.0)) == words(text)
        hypothesis = tiny_en.transcribe(audio)
        assert hypothesis.stats.windows == (10.0,)
        assert said(tiny_en, hypothesis) == words(text)


def test_a_forced_prefix_continues_in_the_short_window(tiny_en, spoken):
    audio = spoken[REQUESTS[0]]
    full = tiny_en.transcribe(audio).tokens
    continued = tiny_en.transcribe(audio, forced=full[:2])
    assert continued.stats.windows == (10.0,) and continued.tokens == full[2:]


def test_a_clip_longer_than_half_a_bucket_takes_the_next_one(tiny_en, spoken):
    audio = spoken[LONG]
    seconds = len(audio) / SAMPLE_RATE
    assert 5.0 < seconds <= 10.0
    hypothesis = tiny_en.transcribe(audio)
    assert hypothesis.stats.windows == ((12.0,) if seconds <= 6.0 else (15.0,) if seconds <= 7.5 else (20.0,))
    assert said(tiny_en, hypothesis) == words(LONG)


def test_a_looped_decode_is_redone_in_the_next_window(tiny_en, spoken, monkeypatch):
    audio, real = spoken[REQUESTS[0]], tiny_en.decode_in_window

    def loops_in_10_s(clip, window_s, forced=(), prompt=(), max_new_tokens=None):
        if window_s == 10.0:  # what a loop looks like: the same words until the token cap
            return Hypothesis(tuple(tiny_en.text.encode(" What time is it?")) * 20)
        return real(clip, window_s, forced, prompt, max_new_tokens)

    monkeypatch.setattr(tiny_en, "decode_in_window", loops_in_10_s)
    hypothesis = tiny_en.transcribe(audio)
    assert hypothesis.stats.windows == (10.0, 12.0)
    assert said(tiny_en, hypothesis) == words(REQUESTS[0])


def test_a_35_s_clip_still_decodes(tiny_en, spoken):
    request = spoken[REQUESTS[1]]
    audio = np.concatenate([request, np.zeros(35 * SAMPLE_RATE - len(request), np.float32)])
    hypothesis = tiny_en.transcribe(audio)
    assert hypothesis.stats.windows == ()  # faster-whisper's moving 30 s windows
    assert said(tiny_en, hypothesis) == words(REQUESTS[1])

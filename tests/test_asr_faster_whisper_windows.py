"""The real Whisper tiny.en through CTranslate2 decodes a request in a 10 s encoder window as it
does in 30 s, picks the next window for longer audio, redoes a looped decode, and still decodes
audio longer than 30 s; tiny.en and base resolve to the registry copies."""
import numpy as np
import pytest

from foresay.engine.asr.backends import Hypothesis
from foresay.engine.asr.whisper.faster import FasterWhisperBackend, FasterWhisperConfig, _source
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

    def loops_in_10_s(clip, window_s, forced=(), prompt=(), max_new_tokens=None, guess=()):
        if window_s == 10.0:  # what a loop looks like: the same words until the token cap
            return Hypothesis(tuple(tiny_en.text.encode(" What time is it?")) * 20)
        return real(clip, window_s, forced, prompt, max_new_tokens, guess)

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


@pytest.fixture(scope="module")
def guessing(tiny_en):
    return FasterWhisperBackend(FasterWhisperConfig("tiny.en", cpu_threads=1, decoder="guess"))


def test_the_decoder_checks_a_guess_in_one_pass_and_the_words_stay(guessing, spoken):
    """tiny.en's float16 weights run in the guess decoder: a right guess is kept whole in one pass,
    and no guess (right, short, wrong) changes what is heard."""
    assert guessing.guess_decoder is not None
    for text in (*REQUESTS, LONG):
        audio = spoken[text]
        plain = guessing.transcribe(audio)
        tokens = plain.tokens
        assert said(guessing, plain) == words(text)
        right = guessing.transcribe(audio, guess=tokens)
        assert right.tokens == tokens and right.stats.accepted_per_round == (len(tokens),)
        assert right.stats.target_passes == 1
        for guess in (tokens[:3], tokens[:-2], (tokens[0] + 1,) + tokens[1:]):
            again = guessing.transcribe(audio, guess=guess)
            assert again.tokens == tokens
            assert again.p_sentence_end == plain.p_sentence_end
        assert guessing.transcribe(audio, forced=tokens[:4], guess=tokens[4:]).tokens == tokens[4:]


def test_the_guess_decoder_hears_what_ctranslate2_hears(guessing, tiny_en, spoken):
    """The same weights through CTranslate2's own decoder: the same words, and the sentence-end
    and no-speech probabilities the turn decision reads within a few points."""
    ct2 = tiny_en
    assert ct2.guess_decoder is None
    for text in REQUESTS:
        ours, theirs = guessing.transcribe(spoken[text]), ct2.transcribe(spoken[text])
        assert said(guessing, ours) == said(ct2, theirs)
        assert ours.p_sentence_end == pytest.approx(theirs.p_sentence_end, abs=0.1)
        assert ours.p_no_speech == pytest.approx(theirs.p_no_speech, abs=0.05)
        assert ours.avg_logprob == pytest.approx(theirs.avg_logprob, abs=0.3)

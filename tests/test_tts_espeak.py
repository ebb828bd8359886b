"""The espeak-ng engine with the real espeak-ng: audio of plausible length and level, spans,
prepare / hold / stream / cancel, voice options, and clear errors."""
import numpy as np
import pytest

from foresay.engine.tts.base import PreparationOptions
from foresay.engine.tts.errors import InvalidTtsConfig, NothingToSay, PreparationCancelled, TtsUnavailable
from foresay.engine.tts.espeak import EspeakConfig, EspeakEngine, EspeakVoice
from foresay.engine.tts.factory import build_engine
from foresay.engine.tts.hold import FixedHold
from tts_support import collect, run_async

TEXT = "The weather is fine today. Shall we walk to the station, or take the bus?"


def _engine(hold_s: float = 0.3, block_s: float = 0.1, max_held: int = 3) -> EspeakEngine:
    return EspeakEngine(EspeakConfig(block_s=block_s, preparation=PreparationOptions(
        hold=FixedHold(hold_s), max_held=max_held)))


def _audio(chunks) -> np.ndarray:
    return np.concatenate([c.samples for c in chunks])


@run_async
async def test_speaks_sentences_with_plausible_length_and_level():
    engine = _engine()
    chunks = await collect(engine.prepare(TEXT))
    audio = _audio(chunks)
    seconds = audio.size / engine.sample_rate
    assert engine.sample_rate == 22050 and all(c.sample_rate == 22050 for c in chunks)
    assert 2.5 < seconds < 9.0  # 74 characters at 175 words per minute
    rms = float(np.sqrt(np.mean(audio ** 2)))
    assert 0.03 < rms < 0.5 and np.abs(audio).max() <= 1.0
    assert audio.dtype == np.float32


@run_async
async def test_chunk_spans_cover_the_text_sentence_by_sentence():
    chunks = await collect(_engine().prepare(TEXT))
    spans = sorted({c.span for c in chunks})
    assert [TEXT[a:b] for a, b in spans] == ["The weather is fine today.",
                                             "Shall we walk to the station, or take the bus?"]
    assert [c.sentence_index for c in chunks] == sorted(c.sentence_index for c in chunks)
    assert len(chunks) > len(spans)  # streamed in blocks, not one chunk per sentence


@run_async
async def test_non_ascii_text_is_spoken():
    engine = EspeakEngine(EspeakConfig(voice=EspeakVoice(voice="de")))
    text = "Grüße aus Köln. Das Wetter ist schön!"
    chunks = await collect(engine.prepare(text))
    assert [text[a:b] for a, b in sorted({c.span for c in chunks})] == ["Grüße aus Köln.", "Das Wetter ist schön!"]
    assert _audio(chunks).size / engine.sample_rate > 1.5


@run_async
async def test_empty_text_is_refused():
    with pytest.raises(NothingToSay):
        _engine().prepare("   ")


@run_async
async def test_prepared_audio_is_held_then_streamed_at_once():
    engine = _engine(hold_s=0.3, block_s=0.1)
    prepared = engine.prepare(TEXT)
    await prepared.ready()
    held = prepared.timing().chunks
    assert prepared.holding and sum(c.audio_s for c in held) == pytest.approx(0.3, abs=0.01)
    chunks = await collect(prepared)
    await prepared.wait_done()
    assert _audio(chunks).size / engine.sample_rate > 2.5
    timing = prepared.timing()
    assert timing.chunks[0].ready_at < timing.stream_started_at  # the first chunk played was prepared


@run_async
async def test_cancelled_preparation_stops_and_never_plays():
    engine = _engine()
    prepared = engine.prepare(TEXT)
    await prepared.ready()
    prepared.cancel()
    await prepared.wait_done()
    assert len(prepared.timing().chunks) == 3
    with pytest.raises(PreparationCancelled):
        await collect(prepared)


@run_async
async def test_new_preparations_beyond_the_bound_cancel_the_oldest():
    engine = _engine(max_held=2)
    drafts = [engine.prepare(f"Draft number {i}.") for i in range(3)]
    assert [p.cancelled for p in drafts] == [True, False, False]
    assert engine.held() == drafts[1:]
    engine.close()
    for p in drafts:
        await p.wait_done()
    assert all(p.cancelled for p in drafts)


@run_async
async def test_rate_and_pitch_options_change_the_audio():
    engine = _engine(hold_s=100)

    async def speak(**voice):
        return _audio(await collect(engine.prepare("Testing one two three.", EspeakVoice(**voice))))

    normal, fast = await speak(rate_wpm=175), await speak(rate_wpm=350)
    assert fast.size < 0.75 * normal.size
    low, high = await speak(pitch=10), await speak(pitch=90)
    assert low.size != high.size or not np.array_equal(low, high)


@run_async
async def test_warmup_measures_the_real_time_factor():
    engine = _engine()
    timing = await engine.warmup()
    assert timing.audio_s > 0.3 and 0 < timing.rtf < 1.0  # espeak-ng is much faster than real time
    assert engine.rtf_estimate == timing.rtf


@run_async
async def test_unknown_voice_and_bad_options_give_clear_errors():
    with pytest.raises(InvalidTtsConfig, match="no voice 'xx-nope'"):
        _engine().prepare("Hi.", EspeakVoice(voice="xx-nope"))
    with pytest.raises(InvalidTtsConfig, match="rate_wpm"):
        EspeakVoice(rate_wpm=1000)
    with pytest.raises(InvalidTtsConfig, match="EspeakVoice"):
        _engine().prepare("Hi.", "en-us")


def test_missing_espeak_ng_says_how_to_install_it():
    with pytest.raises(TtsUnavailable, match="apt install espeak-ng"):
        EspeakEngine(EspeakConfig(executable="espeak-ng-not-installed-here"))


def test_factory_builds_the_engine_and_refuses_unknown_configs():
    assert isinstance(build_engine(EspeakConfig()), EspeakEngine)
    with pytest.raises(InvalidTtsConfig):
        build_engine(object())


@run_async
async def test_file_mode_for_windows_gives_the_same_audio_as_the_pipe():
    piped = EspeakEngine(EspeakConfig(use_files=False, voice=EspeakVoice(voice="de")))
    through_files = EspeakEngine(EspeakConfig(use_files=True, voice=EspeakVoice(voice="de")))
    text = "Grüße aus Köln. Bis bald!"
    a, b = await collect(piped.prepare(text)), await collect(through_files.prepare(text))
    np.testing.assert_array_equal(_audio(a), _audio(b))
    assert [c.span for c in a] == [c.span for c in b]

"""faster-whisper backend: the CTranslate2 conversion of the fixture, forced prefixes, errors."""
import numpy as np
import pytest

from asr_support import noise_audio
from foresay.engine.asr.backends import GreedyBackend
from foresay.engine.asr.errors import InvalidAsrConfig, InvalidAudio
from foresay.engine.asr.whisper.faster import FasterWhisperBackend, FasterWhisperConfig
from foresay.engine.asr.whisper.fixtures import ctranslate2_folder
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.asr.streaming import StreamingTranscriber
from foresay.engine.errors import ModelUnavailable


@pytest.fixture(scope="module")
def backend(asr_fixture_root):
    return FasterWhisperBackend(FasterWhisperConfig("tiny-random", fixture_root=asr_fixture_root, cpu_threads=1))


def test_converted_fixture_decodes_like_the_reference(whisper_models, asr_fixture_root):
    """Same features, float32: CTranslate2's greedy equals Foresay's loop and its rules."""
    import ctranslate2

    whisper = whisper_models()
    folder = ctranslate2_folder("tiny-random", asr_fixture_root, quantization="float32")
    for name in ("tokenizer.json", "preprocessor_config.json", "model.bin"):
        assert (folder / name).exists()
    model = ctranslate2.models.Whisper(str(folder), device="cpu", compute_type="float32", intra_threads=1)
    for seed in range(2):
        audio = noise_audio(seed)
        features = ctranslate2.StorageView.from_array(np.ascontiguousarray(whisper.features(audio).numpy()))
        result = model.generate(features, [whisper.vocab.decoder_prefix()], beam_size=1, max_length=24,
                                suppress_tokens=list(whisper.rules.always), suppress_blank=True)
        ours = GreedyBackend(whisper).transcribe(audio).tokens
        produced = result[0].sequences_ids[0]
        assert len(produced) >= 8 and list(ours[: len(produced)]) == produced


def test_backend_continues_a_forced_prefix(backend):
    """In each encoder window (`transcribe` may pick another one for the forced decode: the
    random fixture never ends a decode, so a short window's decode counts as looped)."""
    audio = noise_audio(1)
    for window in (10.0, 30.0):
        full = backend.decode_in_window(audio, window).tokens
        assert len(full) >= 6
        assert backend.decode_in_window(audio, window, forced=full[:3]).tokens[:3] == full[3:6]
    prompt = backend.text.encode(" we were talking about the weather")
    assert backend.transcribe(audio, prompt=prompt).tokens  # a prompt is accepted


def test_streams_events_with_faster_whisper(backend):
    audio = noise_audio(2, seconds=1.0)
    transcriber = StreamingTranscriber(backend, turn_id=1)
    hop = SAMPLE_RATE // 4
    partials = []
    for at in range(0, len(audio), hop):
        transcriber.append(audio[at: at + hop])
        partials.append(transcriber.hop())
    final = transcriber.finish()
    assert [p.revision for p in partials] == [1, 2, 3, 4]
    assert final.text.startswith(partials[-1].committed)


def test_errors_are_clear(asr_fixture_root):
    with pytest.raises(ModelUnavailable, match="could not be loaded"):
        FasterWhisperBackend(FasterWhisperConfig("/nonexistent/ct2-folder"))
    with pytest.raises(InvalidAsrConfig, match="compute_type"):
        FasterWhisperConfig("tiny-random", compute_type="int2")
    with pytest.raises(InvalidAsrConfig, match="device"):
        FasterWhisperConfig("tiny-random", device="tpu")
    assert FasterWhisperConfig("x").resolved_compute_type("cpu") == "int8"
    assert FasterWhisperConfig("x").resolved_compute_type("cuda") == "float16"


def test_shipped_demo_whisper_converted_decodes_like_transformers(tmp_path):
    """The shipped demo Whisper (a transformers folder, 6 s window) converted for faster-whisper on
    first use: held-out requests in held-out espeak-ng voices give the transformers greedy tokens
    (float32), and the conversion is made once and reused."""
    import random
    import shutil

    pytest.importorskip("ctranslate2")
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed")
    from foresay.engine.asr.whisper.models import WhisperModelConfig, load_whisper
    from foresay.engine.demo.speech import speak, voice_settings
    from foresay.engine.demo.turn_sets import held_out_texts

    try:
        reference = GreedyBackend(load_whisper(WhisperModelConfig("demo")))
    except ModelUnavailable:
        pytest.skip("this checkout has no shipped demo Whisper")
    config = FasterWhisperConfig("demo", compute_type="float32", cpu_threads=1, cache_root=tmp_path)
    backend = FasterWhisperBackend(config)
    assert backend.window_seconds == reference.window_seconds == 6.0
    (folder,) = [p for p in tmp_path.iterdir() if (p / "model.bin").exists()]
    stamp = (folder / "model.bin").stat().st_mtime_ns
    rng = random.Random(7)
    for n, text in enumerate(held_out_texts(3, seed=11, min_words=4)):
        audio = speak(text, voice_settings("test", rng), noise_seed=n)
        expected = reference.transcribe(audio).tokens
        assert backend.transcribe(audio).tokens == expected, text
        forced = expected[:2]
        assert backend.transcribe(audio, forced=forced).tokens == expected[2:]
    FasterWhisperBackend(config)  # a second load reuses the conversion
    assert (folder / "model.bin").stat().st_mtime_ns == stamp


def test_a_clip_longer_than_a_short_window_is_refused(tmp_path):
    pytest.importorskip("ctranslate2")
    try:
        backend = FasterWhisperBackend(FasterWhisperConfig("demo", cpu_threads=1, cache_root=tmp_path))
    except ModelUnavailable:
        pytest.skip("this checkout has no shipped demo Whisper")
    with pytest.raises(InvalidAudio, match="window"):
        backend.transcribe(np.zeros(7 * SAMPLE_RATE, np.float32))

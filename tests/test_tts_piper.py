"""The Piper engine with the registry's real voice (en_US-joe-medium): streamed windows equal the
whole decode, a long first sentence starts with a short chunk, prepare / hold / stream / cancel,
and clear errors for bad voices."""
import threading

import numpy as np
import pytest

from foresay.engine.errors import ModelUnavailable
from foresay.engine.tts.base import PreparationOptions
from foresay.engine.tts.errors import InvalidTtsConfig, PreparationCancelled
from foresay.engine.tts.factory import build_engine
from foresay.engine.tts.hold import FixedHold
from foresay.engine.tts.piper_engine import PiperConfig, PiperEngine
from foresay.engine.tts.piper_model import PiperStyle
from foresay.engine.tts.piper_voices import check_voice_files, find_voice, hub_files
from tts_support import collect, run_async

TEXT = "The weather is fine today. Shall we walk to the station, or take the bus?"
LONG = ("The nearest station is about ten minutes away on foot, just past the bakery on the corner "
        "of Elm Street.")
STILL = PiperStyle(noise_scale=0.0, noise_w=0.0)  # no sampling noise: the same text gives the same audio


def _engine(model, hold_s: float = 0.5, max_held: int = 3, **config) -> PiperEngine:
    return PiperEngine(PiperConfig(style=STILL, preparation=PreparationOptions(hold=FixedHold(hold_s), max_held=max_held),
                                   **config), model=model)


def _audio(chunks) -> np.ndarray:
    return np.concatenate([c.samples for c in chunks])


def test_voice_names_map_to_the_hub_layout():
    assert hub_files("en_US-joe-medium") == ("en/en_US/joe/medium/en_US-joe-medium.onnx",
                                             "en/en_US/joe/medium/en_US-joe-medium.onnx.json")
    assert hub_files("de_DE-thorsten-high")[0] == "de/de_DE/thorsten/high/de_DE-thorsten-high.onnx"
    with pytest.raises(InvalidTtsConfig, match="not a Piper voice name"):
        hub_files("joe")


@run_async
async def test_streamed_windows_equal_each_sentence_decoded_at_once(piper_model):
    engine = _engine(piper_model, hold_s=30.0)
    chunks = await collect(engine.prepare(TEXT))
    assert {c.sample_rate for c in chunks} == {22050} and len(chunks) > 4
    for index, sentence in enumerate(("The weather is fine today.", "Shall we walk to the station, or take the bus?")):
        streamed = _audio([c for c in chunks if c.sentence_index == index])
        [ids] = piper_model.phoneme_ids(sentence)
        whole = piper_model.decode(*piper_model.encode(ids, STILL))
        assert streamed.size == whole.size
        assert np.abs(streamed - np.clip(whole, -1, 1)).max() < 1e-3  # no seams at the window joins
        assert 0.02 < float(np.sqrt(np.mean(streamed ** 2))) < 0.5


def test_the_cut_graph_speaks_as_the_whole_graph_and_its_flow_runs_in_windows(piper_model):
    import onnxruntime

    assert piper_model.flow is not None and piper_model.flow_windows  # told apart from the prior, its reach checked
    whole_graph = onnxruntime.InferenceSession(str(piper_model.files.model), providers=["CPUExecutionProvider"])
    [ids] = piper_model.phoneme_ids(LONG)
    uncut = whole_graph.run(None, piper_model._inputs(ids, STILL))[0].reshape(-1)
    cut = piper_model.decode(*piper_model.encode(ids, STILL))
    assert cut.size == uncut.size and np.abs(cut - uncut).max() < 1e-4

    latent, _ = piper_model.latent(ids, STILL)
    frames = latent.frames
    pieces = np.concatenate([latent.read(0, 40), latent.read(30, 100)[:, :, 10:], latent.read(100, frames)], axis=-1)
    assert np.array_equal(pieces, piper_model.encode(ids, STILL)[0])


def test_a_flow_that_reaches_past_the_context_runs_over_whole_sentences(piper_model, registry_model, monkeypatch,
                                                                       caplog):
    from foresay.engine.tts import piper_model as module

    monkeypatch.setattr(module, "FLOW_CONTEXT_FRAMES", 4)  # as if the voice's flow reached further
    files = check_voice_files(registry_model("piper-en_US-joe-medium") / "en_US-joe-medium.onnx")
    model = module.PiperModel(files, threads=1)
    assert not model.flow_windows and "reaches past 4 frames" in caplog.text
    [ids] = model.phoneme_ids(LONG)
    latent, _ = model.latent(ids, STILL)
    exact = piper_model.encode(ids, STILL)[0]  # the registry model, loaded with the real context
    assert np.abs(latent.read(0, 40) - exact[:, :, :40]).max() < 1e-5  # not cut short at 4 frames


@run_async
async def test_a_long_first_sentence_starts_with_a_short_chunk(piper_model):
    chunks = await collect(_engine(piper_model).prepare(LONG))
    seconds = [c.samples.size / c.sample_rate for c in chunks]
    assert sum(seconds) > 4.0 and seconds[0] < 0.3  # the first audio waits for one small window only
    spans = [c.span for c in chunks]  # each chunk the characters it speaks, in proportion, in order
    assert spans[0][0] == 0 and spans[-1][1] == len(LONG) and spans[0][1] < len(LONG) // 4
    assert all(a[1] == b[0] and a[0] <= a[1] for a, b in zip(spans, spans[1:]))


def test_a_chunk_speaks_its_share_of_the_text():
    from foresay.engine.tts.piper_engine import _TextShares
    from foresay.engine.tts.segments import Segment

    text = "Nine ten. word word word three words end"  # 40 characters at 10..50 of a reply
    shares = _TextShares(Segment(text, 10, 50), [10, 30])  # two sentences, a quarter and three quarters
    assert shares.span(0, 0, 100, 100) == (10, 20)
    assert shares.span(1, 0, 50, 100) == (20, 35) and shares.span(1, 50, 100, 100) == (35, 50)
    assert shares.span(1, 0, 60, 100) == (20, 35)  # 28 falls inside "three": from its start


@run_async
async def test_prepared_audio_is_held_then_streamed_at_once(piper_model):
    engine = _engine(piper_model, hold_s=0.5)
    prepared = engine.prepare(TEXT)
    await prepared.ready()
    held = sum(c.audio_s for c in prepared.timing().chunks)
    assert prepared.holding and 0.5 <= held < 0.5 + 0.75  # stopped within one window past the target
    chunks = await collect(prepared)
    await prepared.wait_done()
    assert _audio(chunks).size / 22050 > 3.0
    timing = prepared.timing()
    assert timing.chunks[0].ready_at < timing.stream_started_at and timing.ttfc_stream_s < 0.05


class _CountingModel:
    """The loaded voice, counting decoder windows."""

    def __init__(self, model):
        self._model, self.windows, self.lock = model, 0, threading.Lock()

    def __getattr__(self, name):
        return getattr(self._model, name)

    def decode(self, latent, extra):
        with self.lock:
            self.windows += 1
        return self._model.decode(latent, extra)


@run_async
async def test_cancel_stops_within_one_window_and_the_preparation_never_plays(piper_model):
    counting = _CountingModel(piper_model)
    engine = _engine(counting, hold_s=0.5)
    prepared = engine.prepare(LONG)
    await prepared.ready()
    before = counting.windows
    prepared.cancel()
    await prepared.wait_done()
    assert counting.windows == before
    with pytest.raises(PreparationCancelled):
        await collect(prepared)

    streaming = engine.prepare(LONG)
    async for _ in streaming.stream():
        at_cancel = counting.windows
        streaming.cancel()
    await streaming.wait_done()
    assert counting.windows <= at_cancel + 1


@run_async
async def test_new_preparations_beyond_the_bound_cancel_the_oldest(piper_model):
    engine = _engine(piper_model, max_held=2)
    drafts = [engine.prepare(f"Draft number {i}.") for i in range(3)]
    assert [p.cancelled for p in drafts] == [True, False, False]
    assert engine.held() == drafts[1:]
    engine.close()
    for p in drafts:
        await p.wait_done()
    assert all(p.cancelled for p in drafts)


@run_async
async def test_warmup_measures_a_real_time_factor_and_styles_are_checked(piper_model):
    engine = _engine(piper_model)
    timing = await engine.warmup()
    assert 0 < timing.rtf < 1 and engine.rtf_estimate == timing.rtf
    slow = await collect(engine.prepare("Shall we walk?", PiperStyle(length_scale=1.5, noise_scale=0, noise_w=0)))
    fast = await collect(engine.prepare("Shall we walk?", PiperStyle(length_scale=0.75, noise_scale=0, noise_w=0)))
    assert _audio(slow).size > 1.5 * _audio(fast).size
    with pytest.raises(InvalidTtsConfig, match="1 speaker"):
        engine.prepare("Hi.", PiperStyle(speaker=3))
    with pytest.raises(InvalidTtsConfig, match="length_scale"):
        PiperStyle(length_scale=9)
    with pytest.raises(InvalidTtsConfig, match="threads"):
        PiperConfig(threads=0)


def test_bad_voice_files_get_one_line_errors(tmp_path, registry_model):
    folder = registry_model("piper-en_US-joe-medium")
    cases = {}
    lonely = tmp_path / "lonely.onnx"
    lonely.write_bytes((folder / "en_US-joe-medium.onnx").read_bytes()[:64])
    cases[lonely] = "has no lonely.onnx.json beside it"
    text = tmp_path / "text.onnx"
    text.write_text("not a model")
    (tmp_path / "text.onnx.json").write_text("{}")
    cases[text] = "is not an ONNX model"
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(lonely.read_bytes())
    (tmp_path / "broken.onnx.json").write_text("{ nope")
    cases[broken] = "is not valid JSON"
    partial = tmp_path / "partial.onnx"
    partial.write_bytes(lonely.read_bytes())
    (tmp_path / "partial.onnx.json").write_text('{"audio": {}}')
    cases[partial] = "is not a Piper voice config"
    cases[tmp_path / "missing.onnx"] = "not found"
    for path, message in cases.items():
        with pytest.raises(InvalidTtsConfig, match=message) as caught:
            build_engine(PiperConfig(voice=str(path)))
        assert "\n" not in str(caught.value)
    assert check_voice_files(folder / "en_US-joe-medium.onnx").name == "en_US-joe-medium"


def test_a_truncated_model_is_refused_when_loading(tmp_path, registry_model):
    from foresay.engine.tts.piper_model import PiperModel

    folder = registry_model("piper-en_US-joe-medium")
    cut = tmp_path / "cut.onnx"
    cut.write_bytes((folder / "en_US-joe-medium.onnx").read_bytes()[:4096])
    (tmp_path / "cut.onnx.json").write_bytes((folder / "en_US-joe-medium.onnx.json").read_bytes())
    with pytest.raises(InvalidTtsConfig, match="not a usable Piper voice|not a Piper voice"):
        PiperModel(check_voice_files(cut), threads=1)


def test_a_named_voice_is_the_registry_copy_and_offline_without_it_names_the_fetch_command(
        registry_model, tmp_path, monkeypatch):
    folder = registry_model("piper-en_US-joe-medium")
    found = find_voice("en_US-joe-medium", download=False)
    assert found.source == "registry" and found.model == folder / "en_US-joe-medium.onnx"
    monkeypatch.setenv("FORESAY_REGISTRY_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelUnavailable, match="run `foresay models fetch piper-en_US-joe-medium`"):
        find_voice("en_US-joe-medium", download=False)


@run_async
async def test_without_the_graph_cut_each_sentence_is_spoken_whole(registry_model, monkeypatch):
    from foresay.engine.tts import piper_model

    monkeypatch.setattr(piper_model, "split_graph", lambda path: None)
    files = check_voice_files(registry_model("piper-en_US-joe-medium") / "en_US-joe-medium.onnx")
    engine = _engine(piper_model.PiperModel(files, threads=1))
    chunks = await collect(engine.prepare(TEXT))
    assert [c.sentence_index for c in chunks] == [0, 1] and _audio(chunks).size / 22050 > 3.0

"""The Zonos engine's pause / resume / cancel and streamed decoding, against a stand-in that follows
Zonos's generate / callback / decode API (tests/zonos_standin.py); and the real model where
Zonos is installed (requires_zonos)."""
import asyncio
import importlib.util
import threading
import time

import numpy as np
import pytest
import torch

from foresay.engine.errors import ModelUnavailable
from foresay.engine.tts.base import PreparationOptions
from foresay.engine.tts.errors import InvalidTtsConfig, PreparationCancelled, SynthesisFailed, TtsUnavailable
from foresay.engine.tts.hold import FixedHold
from foresay.engine.tts.turns import ModelTurns
from foresay.engine.tts.zonos import ZonosBackend, ZonosConfig, ZonosEngine, ZonosVoice, load_zonos_backend
from foresay.engine.tts.zonos_codes import complete_frames, delayed_history, undelay
from tts_support import collect, run_async
from zonos_standin import N_Q, StandInZonos, expected_audio, standin_make_cond_dict

TEXT = "Hello there, this is a test. Second sentence is here?"  # sentences of 28 and 24 characters
FRAMES_PER_SECOND = 44_100 / 512


def _engine(hold_s: float = 0.2, max_held: int = 3, **config) -> tuple[ZonosEngine, StandInZonos]:
    model = StandInZonos(frames_per_char=2)
    backend = ZonosBackend(model, standin_make_cond_dict, frozenset({"en-us", "de"}),
                           load_audio=lambda path: (torch.zeros(1, 16000), 16000))
    options = PreparationOptions(hold=FixedHold(hold_s), max_held=max_held)
    return ZonosEngine(ZonosConfig(preparation=options, compile=False, **config), backend=backend), model


def _audio(chunks) -> np.ndarray:
    return np.concatenate([c.samples for c in chunks])


def test_codebook_delay_bookkeeping_matches_the_final_output():
    model = StandInZonos()
    seen = {}

    def callback(frame, step, max_steps):
        history = delayed_history(frame, step)
        n = complete_frames(step, N_Q)
        seen[step] = undelay(history, 0, n).clone()
        return True

    final = model.generate(torch.zeros(2, 30, 4), max_new_tokens=200, callback=callback)
    assert final.shape == (1, N_Q, 30)
    assert complete_frames(8, N_Q) == 0 and complete_frames(9, N_Q) == 1
    for step, codes in seen.items():  # every frame counted complete is final, never the EOS frame
        assert torch.equal(codes, final[..., :codes.shape[-1]])
    assert max(c.shape[-1] for c in seen.values()) == 30


def test_delayed_history_refuses_a_frame_that_is_not_a_view_of_the_buffer():
    with pytest.raises(SynthesisFailed, match="not one Foresay supports"):
        delayed_history(torch.zeros(1, N_Q, 1, dtype=torch.long), step=5)


@run_async
async def test_streamed_audio_equals_decoding_each_sentence_at_once():
    engine, model = _engine()
    chunks = await collect(engine.prepare(TEXT))
    expected = np.concatenate([expected_audio(28).numpy(), expected_audio(24).numpy()])
    np.testing.assert_allclose(_audio(chunks), expected, atol=1e-5)
    assert sorted({c.span for c in chunks}) == [(0, 28), (29, 53)]
    assert all(c.sample_rate == 44_100 for c in chunks) and len(chunks) > 2
    assert model.generate_calls == 2


@run_async
async def test_generation_pauses_at_the_hold_and_resumes_without_recomputing():
    engine, model = _engine(hold_s=0.2)
    prepared = engine.prepare(TEXT)
    await prepared.ready()
    assert prepared.holding
    held_steps = model.steps
    ready_frames = sum(c.audio_s for c in prepared.timing().chunks) * FRAMES_PER_SECOND
    assert ready_frames >= 0.2 * FRAMES_PER_SECOND and held_steps < 56 + 8
    await asyncio.sleep(0.02)
    assert model.steps == held_steps  # paused inside the callback, model state kept
    await collect(prepared)
    # one pass per sentence: frames + 8 delay steps, nothing generated twice
    assert model.steps == (56 + 8) + (48 + 8) and model.generate_calls == 2


@run_async
async def test_cancel_stops_generation_through_the_callback():
    engine, model = _engine(hold_s=0.2)
    prepared = engine.prepare(TEXT)
    await prepared.ready()
    prepared.cancel()
    await prepared.wait_done()
    assert model.stopped_early == 1 and model.generate_calls == 1
    with pytest.raises(PreparationCancelled):
        await collect(prepared)


@run_async
async def test_several_preparations_share_the_model_and_the_oldest_is_cancelled_first():
    engine, model = _engine(hold_s=0.2, max_held=2)
    drafts = [engine.prepare(f"Draft number {i} is longer than the hold.") for i in range(3)]
    assert [p.cancelled for p in drafts] == [True, False, False]
    for p in drafts[1:]:
        await p.ready()
    assert all(p.holding for p in drafts[1:])
    chunks = await collect(drafts[2])
    np.testing.assert_allclose(_audio(chunks), expected_audio(len("Draft number 2 is longer than the hold.")).numpy(), atol=1e-5)
    engine.close()
    for p in drafts:
        await p.wait_done()
    assert len(model.step_threads) >= 2


@run_async
async def test_voice_options_reach_the_conditioning_and_speaker_clips_are_embedded_once(tmp_path):
    clip = tmp_path / "me.wav"
    clip.write_bytes(b"stand-in audio")
    engine, model = _engine(hold_s=100)
    voice = ZonosVoice(language="de", speaker_clip=clip, speaking_rate=20.0)
    await collect(engine.prepare("Guten Tag. Wie geht es?", voice))
    assert model.speaker_clips == 1
    cond = standin_make_cond_dict("x", language="de", unconditional_keys={"speaker"})
    assert "speaker" not in cond and cond["espeak"] == (["x"], ["de"])


@run_async
async def test_bad_voices_and_configs_are_refused():
    engine, _ = _engine()
    with pytest.raises(InvalidTtsConfig, match="does not speak"):
        engine.prepare("Hi.", ZonosVoice(language="xx"))
    with pytest.raises(InvalidTtsConfig, match="emotion"):
        ZonosVoice(emotion=(0.0,) * 8)
    with pytest.raises(InvalidTtsConfig, match="not found"):
        ZonosVoice(speaker_clip="/nonexistent/clip.wav")
    with pytest.raises(InvalidTtsConfig, match="cfg_scale"):
        ZonosConfig(cfg_scale=1.0)
    with pytest.raises(InvalidTtsConfig, match="model"):
        ZonosConfig(model="large")


@run_async
async def test_warmup_runs_once_through_and_measures():
    engine, model = _engine()
    timing = await engine.warmup()
    assert model.generate_calls == 1 and timing.ttfc_cold_s is not None and timing.rtf > 0


@run_async
async def test_an_unloaded_engine_says_to_warm_up_first():
    with pytest.raises(TtsUnavailable, match="warmup"):
        ZonosEngine(ZonosConfig()).prepare("Hi.")


@pytest.mark.skipif(importlib.util.find_spec("zonos") is not None, reason="Zonos is installed here")
def test_missing_zonos_explains_how_to_install_it_from_git():
    with pytest.raises(TtsUnavailable, match=r"git\+https://github.com/Zyphra/Zonos"):
        load_zonos_backend(ZonosConfig())


def test_zonos_without_a_matching_torchaudio_says_so(monkeypatch):
    import builtins

    real_import, find_spec = builtins.__import__, importlib.util.find_spec

    def no_torchaudio(name, *args, **kwargs):
        if name == "torchaudio":
            raise ModuleNotFoundError("No module named 'torchaudio'", name="torchaudio")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "zonos" else find_spec(name, *a))
    monkeypatch.setattr(builtins, "__import__", no_torchaudio)
    with pytest.raises(TtsUnavailable) as raised:
        load_zonos_backend(ZonosConfig())
    message = str(raised.value)
    assert "installed but cannot be imported" in message and "torchaudio must match torch" in message
    assert "not installed" not in message


@pytest.mark.requires_zonos
@pytest.mark.skipif(importlib.util.find_spec("zonos") is None, reason="Zonos is not installed")
@run_async
async def test_real_zonos_speaks_a_sentence():
    engine = ZonosEngine(ZonosConfig(model="transformer"))
    try:
        await engine.warmup()
    except ModelUnavailable as exc:
        pytest.skip(f"Zonos weights unavailable: {exc}")
    prepared = engine.prepare("Hello, this is Foresay speaking.")
    await prepared.ready()
    chunks = await collect(prepared)
    audio = _audio(chunks)
    assert engine.sample_rate == 44_100 and 0.8 < audio.size / 44_100 < 8
    assert 0.01 < float(np.sqrt(np.mean(audio ** 2))) < 0.7


def test_model_turns_go_to_a_streaming_preparation_before_one_preparing_ahead():
    turns = ModelTurns()
    turns.take(urgent=False)
    order = []

    def taker(name, urgent):
        turns.take(urgent)
        order.append(name)
        turns.give()

    ahead = threading.Thread(target=taker, args=("ahead", False))
    ahead.start()
    streaming = threading.Thread(target=taker, args=("streaming", True))
    streaming.start()
    deadline = time.monotonic() + 5
    while turns._urgent_waiting == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    turns.give()
    ahead.join(5)
    streaming.join(5)
    assert order == ["streaming", "ahead"]


@run_async
async def test_a_cuda_graph_model_is_not_shared_between_unfinished_generations():
    engine, model = _engine(hold_s=0.2)
    model.can_use_cudagraphs = lambda: True
    first = engine.prepare("The first draft is long enough to hold.")
    await first.ready()
    second = engine.prepare("The second draft waits for the model.")
    await asyncio.sleep(0.05)
    assert model.generate_calls == 1 and not second.holding
    first.cancel()
    await second.ready()
    assert second.holding and model.generate_calls == 2
    second.cancel()
    await second.wait_done()


@pytest.mark.requires_zonos
@pytest.mark.skipif(importlib.util.find_spec("zonos") is None, reason="Zonos is not installed")
@pytest.mark.parametrize("static_step", [False, True], ids=["zonos-step", "static-step"])
@run_async
async def test_real_zonos_generate_loop_with_a_tiny_random_backbone(monkeypatch, static_step):
    """Zonos's own generate loop (delay pattern, EOS, callback) with a tiny random transformer and
    the stand-in codec (no weights needed): streamed audio equals decoding the final codes, a
    prepared sentence holds, and a held one cancels; through Zonos's step and through Foresay's
    static step (engine/tts/zonos_captured.py, eager here: the function CUDA captures)."""
    import zonos.model as zonos_model
    from zonos.conditioning import make_cond_dict, supported_language_codes
    from zonos.config import ZonosConfig as ModelConfig
    from zonos_standin import StandInAutoencoder

    class TinyCodec(StandInAutoencoder):
        codebook_size = 1024

        def __init__(self):
            self.dac = torch.nn.Identity()

    monkeypatch.setattr(zonos_model, "DACAutoencoder", TinyCodec)
    config = ModelConfig.from_dict({
        "backbone": {"d_model": 64, "n_layer": 2, "attn_mlp_d_intermediate": 128,
                     "attn_cfg": {"num_heads": 4, "num_heads_kv": 2}},
        "prefix_conditioner": {"projection": "linear", "conditioners": [
            {"type": "EspeakPhonemeConditioner", "name": "espeak"},
            {"type": "PassthroughConditioner", "name": "speaker", "cond_dim": 128, "uncond_type": "learned",
             "projection": "linear"}]}})
    torch.manual_seed(0)
    model = zonos_model.Zonos(config, zonos_model.BACKBONES["torch"]).to("cpu", torch.bfloat16)
    for p in model.parameters():
        if p.dim() > 1:
            torch.nn.init.normal_(p, std=0.5)
    model.requires_grad_(False).eval()
    if static_step:
        from foresay.engine.tts.zonos_captured import CapturedZonosStep

        step = CapturedZonosStep(model, capture=False).install()
    finals = []
    generate = model.generate
    monkeypatch.setattr(model, "generate", lambda *a, **k: finals.append(generate(*a, **k)) or finals[-1])

    backend = ZonosBackend(model, make_cond_dict, frozenset(supported_language_codes), lambda path: None)
    engine = ZonosEngine(ZonosConfig(compile=False, max_seconds=1.0,
                                     preparation=PreparationOptions(hold=FixedHold(0.3))), backend=backend)
    prepared = engine.prepare("Hello there, how are you. Fine thanks!")
    await prepared.ready()
    assert prepared.holding and sum(c.audio_s for c in prepared.timing().chunks) >= 0.3
    chunks = await collect(prepared)
    want = np.concatenate([TinyCodec().decode(f)[0, 0].numpy() for f in finals])
    np.testing.assert_allclose(_audio(chunks), want, atol=1e-5)
    cancelled = engine.prepare("This one is cancelled while held.")
    await cancelled.ready()
    cancelled.cancel()
    await cancelled.wait_done()
    assert finals[-1].shape[-1] < 86  # generation stopped by the callback, not at max_seconds
    if static_step:
        assert step.passes_built == 1 and step.capacity >= 86  # one pass for every generation

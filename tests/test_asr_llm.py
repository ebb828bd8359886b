"""The LLM-based recognizer (Qwen3-ASR architecture): its greedy reference loop, its backends
behind the Whisper backends' interface, the backend choice, and loading Qwen's own layout."""
import json

import pytest
import torch

from asr_support import noise_audio
from llm_asr_support import llm_asr_models  # noqa: F401
from foresay.engine.asr.backends import DecodeLimits
from foresay.engine.asr.errors import IncompatibleModels, InvalidAsrConfig
from foresay.engine.asr.greedy import greedy_loop
from foresay.engine.asr.llm.backends import LlmGreedyBackend, LlmSpecAsrBackend
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.asr.specasr import SpecConfig
from foresay.engine.asr.streaming import StreamingTranscriber
from foresay.engine.errors import ModelUnavailable


def recompute_greedy(model, embeds, prefix, steps, prompt=()):
    """Greedy without reusing the cache: a fresh prefill and the whole sequence for every token."""
    sequence = list(prefix)
    for _ in range(steps):
        logits = model.cursor(embeds, prompt).extend(sequence)[-1:]
        token = int(model.rules.apply(logits, torch.tensor([False])).argmax(-1))
        sequence.append(token)
        if token == model.layout.end:
            break
    return sequence[len(prefix):]


def test_cached_loop_equals_recomputation_and_forcing_own_tokens_changes_nothing(llm_asr_models):
    model = llm_asr_models()
    embeds = model.encode(noise_audio(1))
    prefix = model.layout.decoder_prefix()
    result = greedy_loop(model.cursor(embeds), prefix, model.rules, model.layout.end, 20)
    assert list(result.tokens) == recompute_greedy(model, embeds, prefix, 20)
    assert len(set(result.tokens)) > 5, "the fixture must not be degenerate"
    assert result.stats.target_passes == 21 and not result.ended  # the prefill, then one pass per token
    assert not set(result.tokens) & set(model.rules.banned)
    forced = greedy_loop(model.cursor(embeds), model.layout.decoder_prefix(result.tokens[:5]), model.rules,
                         model.layout.end, 7).tokens
    assert forced == result.tokens[5:12]
    other = greedy_loop(model.cursor(model.encode(noise_audio(2))), prefix, model.rules, model.layout.end, 20)
    assert other.tokens != result.tokens  # what the model hears matters
    prompt = model.tokenizer.encode(" earlier we talked about trains", add_special_tokens=False).ids
    prompted = greedy_loop(model.cursor(embeds, prompt), prefix, model.rules, model.layout.end, 8).tokens
    assert list(prompted) == recompute_greedy(model, embeds, prefix, 8, prompt)


def stream(backend, audio):
    transcriber = StreamingTranscriber(backend, turn_id=2, history="Earlier we spoke about trains.")
    hop = SAMPLE_RATE // 4
    partials = []
    for at in range(0, len(audio), hop):
        transcriber.append(audio[at: at + hop])
        partials.append(transcriber.hop())
    return partials, transcriber.finish(), transcriber.decodes


def test_specasr_backend_streams_exactly_like_the_greedy_backend(llm_asr_models):
    target, draft = llm_asr_models(), llm_asr_models("tiny-random-qwen3-asr-draft")
    limits = DecodeLimits(max_new_tokens=12)
    audio = noise_audio(8, seconds=1.5)
    greedy = stream(LlmGreedyBackend(target, limits, context="Paris Tokyo"), audio)
    spec = stream(LlmSpecAsrBackend(target, draft, SpecConfig(tree_budget=2), limits, context="Paris Tokyo"), audio)
    assert greedy[0] == spec[0] and greedy[1] == spec[1]
    assert greedy[1].text
    assert sum(d.stats.target_passes for d in spec[2]) < sum(d.stats.target_passes for d in greedy[2])
    assert any(d.stats.recycled for d in spec[2][1:])  # later hops start from the previous tail
    plain = stream(LlmGreedyBackend(target, limits), audio)
    assert plain[1] != greedy[1]  # the context reached the model


def test_mismatched_models_and_bad_settings_are_refused(llm_asr_models, asr_fixture_root):
    from dataclasses import replace

    from foresay.engine.asr import AsrConfig, build_backend

    target = llm_asr_models()
    other = replace(target, layout=replace(target.layout, vocab_digest="0" * 16))
    with pytest.raises(IncompatibleModels, match="do not share a vocabulary"):
        LlmSpecAsrBackend(target, other)
    with pytest.raises(InvalidAsrConfig, match="needs a draft"):
        AsrConfig(target="tiny-random-qwen3-asr", backend="llm-specasr")
    with pytest.raises(InvalidAsrConfig, match="does not know the language 'Klingon'"):
        AsrConfig(target="tiny-random-qwen3-asr", language="Klingon")
    assert AsrConfig(target="tiny-random-qwen3-asr").chosen_backend == "llm-greedy"
    assert AsrConfig(target="Qwen/Qwen3-ASR-1.7B", draft="Qwen/Qwen3-ASR-0.6B").chosen_backend == "llm-specasr"
    assert AsrConfig(target="tiny-random", draft="tiny-random-draft").chosen_backend == "specasr"
    # greedy and specasr name the method for either family: a profile's specasr runs an LLM pair
    assert AsrConfig(target="tiny-random-qwen3-asr", draft="x", backend="specasr").chosen_backend == "llm-specasr"
    assert AsrConfig(target="tiny-random-qwen3-asr", backend="greedy").chosen_backend == "llm-greedy"
    assert AsrConfig(target="Qwen/Qwen3-ASR-1.7B", device="cuda").torch_dtype_name() == "bfloat16"
    spec = build_backend(AsrConfig(target="tiny-random-qwen3-asr", draft="tiny-random-qwen3-asr-draft",
                                   language="en", fixture_root=asr_fixture_root))
    assert isinstance(spec, LlmSpecAsrBackend) and spec.window_seconds == 30.0
    greedy = build_backend(AsrConfig(target="tiny-random-qwen3-asr", backend="llm-greedy", fixture_root=asr_fixture_root))
    assert spec.transcribe(noise_audio(3)).tokens == greedy.transcribe(noise_audio(3)).tokens


def original_layout(fixture, out):
    """The fixture rewritten the way Qwen's hub repositories lay out Qwen3-ASR: a thinker_config,
    weights under thinker. in two shards, the projector inside the audio tower, M-RoPE fields."""
    from safetensors.torch import load_file, save_file

    config = json.loads((fixture / "config.json").read_text())
    text = config["text_config"]
    rope = text.pop("rope_parameters")
    text.update(model_type="qwen3_asr_text", rope_theta=rope["rope_theta"],
                rope_scaling={"rope_type": "default", "mrope_section": [2, 3, 3], "interleaved": True})
    audio = {**config["audio_config"], "model_type": "qwen3_asr_audio_encoder", "max_source_positions": 1500}
    thinker = {"audio_config": audio, "text_config": text, "audio_token_id": config["audio_token_id"],
               "initializer_range": config["initializer_range"]}
    out.mkdir()
    (out / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3ASRForConditionalGeneration"], "model_type": "qwen3_asr", "thinker_config": thinker,
        "support_languages": ["English"], "tie_word_embeddings": False}))
    renames = [("model.multi_modal_projector.linear_1.", "thinker.audio_tower.proj1."),
               ("model.multi_modal_projector.linear_2.", "thinker.audio_tower.proj2."),
               ("model.language_model.", "thinker.model."), ("lm_head.", "thinker.lm_head."), ("model.", "thinker.")]

    def old(key):
        return next(o + key[len(n):] for n, o in renames if key.startswith(n))

    state = {old(k): v for k, v in load_file(fixture / "model.safetensors").items()}
    keys = sorted(state)
    shards = {"model-00001-of-00002.safetensors": keys[: len(keys) // 2],
              "model-00002-of-00002.safetensors": keys[len(keys) // 2:]}
    for name, part in shards.items():
        save_file({k: state[k] for k in part}, out / name)
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {k: name for name, part in shards.items() for k in part}}))
    (out / "tokenizer.json").write_bytes((fixture / "tokenizer.json").read_bytes())
    (out / "preprocessor_config.json").write_text(json.dumps({"feature_extractor_type": "WhisperFeatureExtractor",
                                                              "feature_size": 128}))


def test_qwen_hub_layout_is_converted_once_and_decodes_like_the_original(llm_asr_models, tmp_path):
    from foresay.engine.asr.llm.models import LlmAsrModelConfig, load_llm_asr

    reference = llm_asr_models()
    original = tmp_path / "Qwen3-ASR-tiny"
    original_layout(reference.folder, original)
    loaded = load_llm_asr(LlmAsrModelConfig(str(original), fixture_root=tmp_path / "cache"))
    assert loaded.folder.parent == tmp_path / "cache" / "converted"
    audio = noise_audio(4)
    torch.testing.assert_close(loaded.encode(audio), reference.encode(audio))
    prefix = reference.layout.decoder_prefix()
    expected = greedy_loop(reference.cursor(reference.encode(audio)), prefix, reference.rules, reference.layout.end, 12)
    got = greedy_loop(loaded.cursor(loaded.encode(audio)), prefix, loaded.rules, loaded.layout.end, 12)
    assert got.tokens == expected.tokens
    again = load_llm_asr(LlmAsrModelConfig(str(original), fixture_root=tmp_path / "cache"))
    assert again.folder == loaded.folder  # converted once


def test_missing_models_are_named(tmp_path):
    from foresay.engine.asr.llm.models import LlmAsrModelConfig, load_llm_asr

    with pytest.raises(ModelUnavailable, match="'Qwen/Qwen3-ASR-1.7B'.*neither a local folder nor downloadable"):
        load_llm_asr(LlmAsrModelConfig("Qwen/Qwen3-ASR-1.7B", fixture_root=tmp_path))
    with pytest.raises(ModelUnavailable, match="not a Qwen3-ASR model folder"):
        load_llm_asr(LlmAsrModelConfig(str(tmp_path / "nowhere"), fixture_root=tmp_path))


def test_qwen3_asr_profiles_download_both_models_like_the_whisper_pairs(tmp_path):
    from foresay.app.config import load_settings
    from foresay.app.downloads import WHISPER_FILES, hub_downloads
    from foresay.engine.asr.llm.loading import HUB_FILES

    empty = tmp_path / "c.toml"
    empty.write_text("")
    settings = load_settings(empty, profile="gpu-24gb-qwen3-asr")
    assert settings.asr.chosen_backend == "llm-specasr" and settings.asr.dtype == "bfloat16"
    asked = [(d.repo_id, d.files) for d in hub_downloads(settings) if d.what == "speech recognizer"]
    assert asked == [("Qwen/Qwen3-ASR-1.7B", WHISPER_FILES), ("Qwen/Qwen3-ASR-0.6B", WHISPER_FILES)]
    assert tuple(HUB_FILES) == WHISPER_FILES
    demo = load_settings(empty, profile="demo-own-ear", overrides=['asr.target="demo-llm"', 'asr.draft="demo-llm-draft"'])
    assert demo.asr.chosen_backend == "llm-specasr" and hub_downloads(demo) == []


def test_bench_asr_measures_the_llm_pair_and_every_method_is_identical(asr_fixture_root, tmp_path, monkeypatch):
    import wave

    import numpy as np

    from foresay.app.cli import main

    monkeypatch.setenv("FORESAY_FIXTURE_DIR", str(asr_fixture_root))
    with wave.open(str(tmp_path / "clip.wav"), "wb") as wav:
        wav.setnchannels(1), wav.setsampwidth(2), wav.setframerate(16000)
        wav.writeframes((noise_audio(9, seconds=2.0) * 20000).astype(np.int16).tobytes())
    out = tmp_path / "asr.json"
    assert main(["bench", "asr", "--target", "tiny-random-qwen3-asr", "--draft", "tiny-random-qwen3-asr-draft",
                 "--audio", str(tmp_path), "--max-new-tokens", "16", "--stream-tail-tokens", "4", "--threads", "1",
                 "--repeats", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["setup"]["family"] == "llm"
    assert all(row["identical"] for row in report["methods"].values())
    assert report["methods"]["specasr_tree"]["target_passes_per_s"] < report["methods"]["target_greedy"]["target_passes_per_s"]
    assert report["streaming"]["clips"]["clips"] == 1  # the given clip streamed too: its final's delay
    assert main(["bench", "asr", "--target", "tiny-random-qwen3-asr", "--draft", "tiny-random-draft"]) == 2


def test_qwen3_asr_pass_timing_runs_on_cpu_with_toy_shapes():
    from foresay.app.bench.llm_asr_pass_timing import time_llm_passes

    toy = {"toy": dict(audio=dict(d_model=32, encoder_layers=1, encoder_attention_heads=2, encoder_ffn_dim=32,
                                  output_dim=32, downsample_hidden_size=8),
                       text=dict(hidden_size=32, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 num_key_value_heads=1, head_dim=16))}
    result = time_llm_passes("cpu", toy, dtype="float32", repeats=1, audio_s=1.0, verify=3, vocab=64)["toy"]
    assert result["audio_tokens"] == 13  # one second: a full 100-frame chunk
    assert set(result) == {"audio_tokens", "encoder_ms", "prefill_ms", "decoder_pass_1_ms", "decoder_pass_3_ms"}


def test_a_demo_llm_pair_missing_from_this_install_is_named(tmp_path, monkeypatch):
    import foresay.engine.model_registry as registry
    from foresay.engine.asr.llm.models import LlmAsrModelConfig, load_llm_asr

    monkeypatch.setattr(registry, "shipped_models_root", lambda: tmp_path)  # an install without the pair
    with pytest.raises(ModelUnavailable, match="model 'demo-llm' is missing.*llm_asr train"):
        load_llm_asr(LlmAsrModelConfig("demo-llm"))

"""The LLM decoder's lean forward (engine/asr/llm/lean.py) is the library's pass, bit for bit:
every pass kind a cursor runs (prefill of the audio and prompt, one token, a chain after the
cache, a tree with its additive mask, a one-node tree, after a kept path and a crop) gives
exactly the logits and cache of transformers' Qwen3 forward, so greedy references are unchanged."""
import pytest
import torch

from asr_support import noise_audio
from llm_asr_support import llm_asr_models  # noqa: F401
from foresay.engine.asr.llm.lean import LeanQwen3


def _passes(loaded, audio, prompt):
    """Logits of a fixed sequence of passes, and the cache they leave."""
    cursor = loaded.cursor(loaded.encode(audio), prompt)
    start = loaded.layout.asr_text
    out = [cursor.extend([start]), cursor.extend([101, 102, 103])]
    logits, _ = cursor.tree([5, 6, 7, 8, 9], [-1, 0, 1, 0, -1], [4, 4, 4, 4, 2])
    out.append(logits)
    cursor.keep_path([0, 3])
    logits, _ = cursor.tree([11], [-1], [6])
    out.append(logits)
    cursor.drop_tree()
    cursor.sync([start, 101, 102, 103, 5, 8, 12])  # keeps 6 of 6, feeds 12
    cursor.sync([start, 101, 102, 77])  # crops to 3
    out.append(cursor.extend([77, 78]))
    cache = [t for layer in cursor.cache.layers for t in (layer.keys, layer.values)]
    return cursor, out, cache


def _models(llm_asr_models):
    from foresay.engine.demo.models import DEMO_LLM_ASR, demo_models_root

    names = ["tiny-random-qwen3-asr", "tiny-random-qwen3-asr-draft"]
    shipped = (demo_models_root() / DEMO_LLM_ASR["demo-llm"] / "config.json").exists()
    models = [llm_asr_models(name) for name in names]
    if shipped:
        from foresay.engine.asr.pairs import load_pair

        pair = load_pair("demo-llm", "demo-llm-draft")
        models += [pair.target, pair.draft]
    return models


def test_lean_passes_are_bit_identical_to_the_library(llm_asr_models, monkeypatch):
    torch.set_num_threads(1)
    models = _models(llm_asr_models)
    for seed, loaded in enumerate(models):
        audio, prompt = noise_audio(seed, 1.5), [300 + seed, 301]
        lean_cursor, lean, lean_cache = _passes(loaded, audio, prompt)
        assert lean_cursor.lean is not None
        library_cursor, library, library_cache = _passes_without_lean(loaded, audio, prompt, monkeypatch)
        assert library_cursor.lean is None and library_cursor.cached == lean_cursor.cached
        for a, b in zip(lean, library, strict=True):
            assert torch.equal(a, b)
        for a, b in zip(lean_cache, library_cache, strict=True):
            assert torch.equal(a, b)


def test_lean_forward_is_only_taken_where_it_reproduces_the_library(llm_asr_models):
    assert LeanQwen3.for_model(llm_asr_models("tiny-random-qwen3-asr", "eager").model.model.language_model) is None
    sdpa = llm_asr_models("tiny-random-qwen3-asr", "sdpa").model.model.language_model
    assert LeanQwen3.for_model(sdpa) is LeanQwen3.for_model(sdpa)  # built once per model


def test_positions_past_the_rotary_table_are_computed_as_the_library_does(llm_asr_models, monkeypatch):
    import foresay.engine.asr.llm.lean as lean_module

    loaded = llm_asr_models("tiny-random-qwen3-asr")
    audio, prompt = noise_audio(7, 1.5), [300]
    _, library_out, _ = _passes_without_lean(loaded, audio, prompt, monkeypatch)
    language_model = loaded.model.model.language_model
    monkeypatch.setattr(lean_module, "TABLE_POSITIONS", 16)  # the context alone runs past it
    monkeypatch.delitem(language_model.__dict__, "_foresay_LeanQwen3", raising=False)
    cursor, lean_out, _ = _passes(loaded, audio, prompt)
    assert len(cursor.lean.cos) == 16 and cursor.context_length > 16
    for a, b in zip(lean_out, library_out, strict=True):
        assert torch.equal(a, b)


def _passes_without_lean(loaded, audio, prompt, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(LeanQwen3, "for_model", staticmethod(lambda language_model: None))
        return _passes(loaded, audio, prompt)


def _draft_and_target_cursors(loaded, embeds, start, first):
    """Logits of the same passes through a target cursor and a draft cursor."""
    target, draft = loaded.cursor(embeds, [300]), loaded.cursor(embeds, [300], draft=True)
    assert draft.context_length == target.context_length and draft.passes == 0
    assert type(draft.lean).__name__ == "FastDraftQwen3" and type(target.lean).__name__ == "LeanQwen3"
    for cursor in (target, draft):
        if first == "chain":
            cursor.logits = [cursor.extend([start, 101, 102])]
        else:
            cursor.logits = [cursor.tree([start, 101, 102], [-1, 0, 0], [0, 0, 0])[0]]
            cursor.keep_path([0, 2])
        cursor.logits.append(cursor.extend([103]))
        cursor.logits.append(cursor.extend([104, 105]))
        cursor.logits.append(cursor.tree([7, 8], [-1, 0], [2, 2])[0])
        cursor.drop_tree()
        cursor.logits.append(cursor.tree([9], [-1], [3])[0])
        cursor.drop_tree()
    assert draft.passes == target.passes - (first == "chain")  # the prefill joined the first chain
    assert draft.cached == target.cached
    for a, b in zip(draft.logits, target.logits, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_a_draft_cursor_scores_as_a_target_cursor_up_to_rounding(llm_asr_models, monkeypatch):
    """A draft's cursor: the context joins its first chain (one pass fewer; a tree as the first
    pass prefills first) and its passes run the fast forward; the logits are the target
    cursor's up to rounding, rotary positions past the table included."""
    import foresay.engine.asr.llm.lean as lean_module

    for loaded in _models(llm_asr_models):
        embeds = loaded.encode(noise_audio(3, 1.5))
        for first in ("chain", "tree"):
            _draft_and_target_cursors(loaded, embeds, loaded.layout.asr_text, first)
    loaded = llm_asr_models("tiny-random-qwen3-asr-draft")
    language_model = loaded.model.model.language_model
    monkeypatch.setattr(lean_module, "TABLE_POSITIONS", 16)
    for key in ("_foresay_LeanQwen3", "_foresay_FastDraftQwen3"):
        monkeypatch.delitem(language_model.__dict__, key, raising=False)
    _draft_and_target_cursors(loaded, loaded.encode(noise_audio(4, 1.5)), loaded.layout.asr_text, "chain")


def test_a_rotary_table_that_differs_from_per_pass_rotary_is_not_used(llm_asr_models, monkeypatch):
    loaded = llm_asr_models("tiny-random-qwen3-asr")
    audio, prompt = noise_audio(8, 1.5), [300]
    _, library_out, _ = _passes_without_lean(loaded, audio, prompt, monkeypatch)
    language_model = loaded.model.model.language_model
    rotary = language_model.rotary_emb
    full = rotary.forward

    def drifting(x, position_ids):  # the all-positions table comes out one ulp off
        cos, sin = full(x, position_ids)
        return (torch.nextafter(cos, cos + 1), sin) if position_ids.shape[1] > 100 else (cos, sin)

    with monkeypatch.context() as patch:
        patch.setattr(rotary, "forward", drifting)
        lean = LeanQwen3(language_model)
    assert len(lean.cos) == 0
    monkeypatch.setitem(language_model.__dict__, "_foresay_LeanQwen3", lean)
    cursor, lean_out, _ = _passes(loaded, audio, prompt)
    assert cursor.lean is lean
    for a, b in zip(lean_out, library_out, strict=True):
        assert torch.equal(a, b)


def test_a_draft_forward_follows_weights_changed_in_place(llm_asr_models):
    from llm_asr_support import independent

    loaded = independent(llm_asr_models("tiny-random-qwen3-asr-draft"), seed=5)  # its own weights to change
    embeds, start = loaded.encode(noise_audio(9, 1.0)), loaded.layout.asr_text
    loaded.cursor(embeds, draft=True).extend([start])  # builds the fused weights
    with torch.no_grad():
        loaded.model.model.language_model.layers[0].self_attn.q_proj.weight.mul_(3.0)
        loaded.model.model.language_model.layers[1].mlp.up_proj.weight.add_(0.5)
    draft = loaded.cursor(embeds, draft=True).extend([start, 101])
    torch.testing.assert_close(draft, loaded.cursor(embeds).extend([start, 101]), atol=1e-4, rtol=1e-4)

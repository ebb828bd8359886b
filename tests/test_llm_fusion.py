"""Fusing the decoder's leaves with torch.compile: every norm, MLP and rotary embedding of a pass
runs compiled code, the logits stay those of the plain model, and exact mode stays verified."""
from foresay.app.bench.pass_timing import probe_ids
from foresay.engine.llm.backend import load_llm
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.fusion import fuse_decoder


def counting_backend(calls: list):
    """A torch.compile backend that runs the traced graph as it is and counts its calls."""
    def compile_graph(graph_module, example_inputs):
        def run(*args):
            calls.append(graph_module)
            return graph_module(*args)
        return run
    return compile_graph


def agreement_logits(lm, ids):
    cache = lm.kv_cache()
    cache.append(ids[:40], keep_logits=1)
    return cache.append(ids[40:])


def test_fused_passes_run_compiled_leaves_with_the_plain_logits(fixture_dir):
    # a model of its own: fusing changes it in place
    lm = load_llm(LLMConfig(model="tiny-random", device="cpu", cache="static", exact=True, max_context=128))
    lm.warmup()
    ids = probe_ids(lm, 56)
    plain = agreement_logits(lm, ids)

    calls = []
    fusion = fuse_decoder(lm, backend=counting_backend(calls))
    layers = lm.model.config.num_hidden_layers
    assert (fusion.norms, fusion.mlps, fusion.rotary) == (2 * layers + 1, layers, layers)
    lm.warmup()
    assert lm.static_engine().exact_verified
    calls.clear()
    lm.kv_cache().append(ids[:16])  # one pass of exact mode on a CPU
    assert len(calls) == fusion.norms + fusion.mlps + fusion.rotary
    assert len({id(graph) for graph in calls}) == 3  # norm, MLP, rotary: traced once, not per layer
    fused = agreement_logits(lm, ids)
    assert (fused.argmax(-1) == plain.argmax(-1)).all()
    assert (fused - plain).abs().max() == 0  # the counting backend runs the traced aten ops eagerly


def failing_backend(graph_module, example_inputs):
    raise RuntimeError("no compiler here")


def test_fuse_on_fuses_the_loaded_model_and_auto_leaves_a_cpu_model_plain(fixture_dir, monkeypatch):
    from foresay.engine.llm import fusion

    calls = []
    monkeypatch.setattr(fusion, "BACKEND", counting_backend(calls))
    auto = load_llm(LLMConfig(model="tiny-random", device="cpu", cache="static", max_context=128))
    assert auto.fusion is None
    fused = load_llm(LLMConfig(model="tiny-random", device="cpu", cache="static", fuse="on", max_context=128))
    assert fused.fusion is not None and fused.fusion.mlps == fused.model.config.num_hidden_layers
    fused.warmup()
    assert fused.fusion is not None and fused.static_engine().exact_verified and calls
    ids = probe_ids(fused, 56)
    auto.warmup()
    assert (agreement_logits(fused, ids) - agreement_logits(auto, ids)).abs().max() == 0


def test_a_fusion_that_fails_to_compile_warms_up_the_plain_model(fixture_dir, monkeypatch, caplog):
    from foresay.engine.llm import fusion

    monkeypatch.setattr(fusion, "BACKEND", failing_backend)
    lm = load_llm(LLMConfig(model="tiny-random", device="cpu", cache="static", fuse="on", max_context=128))
    plain = load_llm(LLMConfig(model="tiny-random", device="cpu", cache="static", max_context=128))
    with caplog.at_level("WARNING"):
        lm.warmup()
    assert lm.fusion is None and "LLM fusion failed in the warm-up" in caplog.text
    assert lm.static_engine().exact_verified
    plain.warmup()
    ids = probe_ids(lm, 56)
    assert (agreement_logits(lm, ids) - agreement_logits(plain, ids)).abs().max() == 0


def test_fuse_is_checked(fixture_dir):
    import pytest

    from foresay.engine.errors import ForesayError

    with pytest.raises(ForesayError, match="fuse 'yes' is not one of auto, on, off"):
        LLMConfig(model="tiny-random", fuse="yes")
    with pytest.raises(ForesayError, match="needs the static cache"):
        load_llm(LLMConfig(model="tiny-random", device="cpu", cache="dynamic", fuse="on"))

"""The GPU kit's A/B sections of the chat model's captured step: the same model, warmed up and
timed twice in one process, with one change between the variants (fusion; split attention).
Sections of `foresay.app.bench.gpu_kit`, as in `gpu_kit_sections`."""
from __future__ import annotations

import gc
import time
import traceback
from dataclasses import asdict

from foresay.app.bench.gpu_kit_sections import Kit

# The fusion A/B: the static cache's size in the GPU profiles (llm.max_context), the prefix and
# the pass whose logits the variants compare.
FUSION_MAX_CONTEXT = {"gpu": 8192, "small": 256}
AGREEMENT_PREFIX = {"gpu": 512, "small": 64}
AGREEMENT_POSITIONS = 48


def fusion(kit: Kit) -> dict:
    """The captured decode step plain against fused: the decoder's norms, MLPs and rotary
    embeddings compiled by inductor before the capture (`engine/llm/fusion.py`; in the dry run the
    "aot_eager" backend, which traces without generating code). Per variant the step and a
    verification pass, the warm-up (the compile with it) and exact mode's probes; then how far the
    fused logits are from the plain ones. A fused variant that fails records its error."""
    from foresay.engine.llm.fusion import fuse_decoder

    lm, prefix, ids, contexts, repeats = _setup(kit, fuse="off")
    plain, plain_logits = _variant_figures(lm, ids, contexts, repeats)
    figures = {"llm": kit.llm(), "max_context": lm.max_context, "plain": plain}
    try:
        compiled = fuse_decoder(lm, backend="aot_eager" if kit.small else "inductor")
        fused, fused_logits = _variant_figures(lm, ids, contexts, repeats)
    except Exception as exc:  # a fusion that fails to compile or capture is this variant's result
        figures["fused"] = {"error": f"{type(exc).__name__}: {exc}",
                            "traceback": traceback.format_exc(limit=-6)[-3000:]}
        return figures
    # a graph per kind of leaf (norm, MLP, rotary) is expected; more: traced again per layer
    figures["fused"] = {"compiled": asdict(compiled), "compiled_graphs": _compiled_graphs(), **fused}
    figures["agreement"] = {"prefix": prefix, **_agreement(plain_logits, fused_logits)}
    figures["fused_step_ratio"] = _step_ratio(fused, plain)
    return figures


def split(kit: Kit) -> dict:
    """The captured decode step with attention split along the keys (`engine/llm/split_attention.py`,
    the default in exact mode on CUDA) against one attention call per layer, on the app's model
    (fused on CUDA); per variant the step and a verification pass after each context, the warm-up
    and its probes, then how far the split logits are from the others."""
    lm, prefix, ids, contexts, repeats = _setup(kit)
    figures = {"llm": kit.llm(), "max_context": lm.max_context, "fused": lm.fusion is not None}
    logits = {}
    for name, setting in (("split", "on"), ("whole", "off")):
        lm.split = setting  # llm.split, read by the next static engine
        lm.drop_static_engine()
        figures[name], logits[name] = _variant_figures(lm, ids, contexts, repeats)
        engine = lm.static_engine()
        figures[name]["split_kept"] = engine.split
        figures[name]["split_kernel"] = engine.attention_kernel
    figures["agreement"] = {"prefix": prefix, **_agreement(logits["whole"], logits["split"])}
    figures["split_step_ratio"] = _step_ratio(figures["split"], figures["whole"])
    return figures


def _setup(kit: Kit, **llm_options):
    """The app's model with the static cache in exact mode, sized for the A/B (`llm_options`: more
    of its LLMConfig), the agreement pass's prefix length and tokens, and the contexts and repeats
    each variant is timed at."""
    from foresay.app.bench.pass_timing import probe_ids
    from foresay.engine.llm.backend import load_llm
    from foresay.engine.llm.config import LLMConfig

    size = "small" if kit.small else "gpu"
    lm = load_llm(LLMConfig(model=kit.llm(), device=kit.device, cache="static", exact=True,
                            max_context=FUSION_MAX_CONTEXT[size], **llm_options))
    prefix = AGREEMENT_PREFIX[size]
    contexts, repeats = ((32,), 1) if kit.small else ((512, 4096), 10)
    return lm, prefix, probe_ids(lm, prefix + AGREEMENT_POSITIONS), contexts, repeats


def _step_ratio(variant: dict, baseline: dict) -> dict:
    """The variant's decode step against the baseline's, per context."""
    return {context: round(variant["by_context"][context]["decode_step_ms"]
                           / baseline["by_context"][context]["decode_step_ms"], 3)
            for context in baseline["by_context"]}


def _compiled_graphs() -> int:
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]


def _variant_figures(lm, ids: list[int], contexts: tuple[int, ...], repeats: int):
    """Warm-up, exact mode's probes, the agreement pass's float32 logits (on the CPU), and the
    captured step and verification after each context."""
    from foresay.app.bench.pass_timing import measure_pass_timing

    gc.collect()  # the previous variant's caches and graphs (a cache and its passes form a cycle)
    started = time.perf_counter()
    lm.warmup()
    warmup_s = time.perf_counter() - started
    engine = lm.static_engine()
    cache = lm.kv_cache()  # the one the warm-up captured and probed
    captured = engine.captured(cache)
    prefix = len(ids) - AGREEMENT_POSITIONS
    cache.append(ids[:prefix], keep_logits=1)
    logits = cache.append(ids[prefix:]).cpu()
    del cache
    by_context = {}
    for context in contexts:
        timing = measure_pass_timing(lm, context=context, repeats=repeats)
        by_context[str(context)] = {"decode_step_ms": round(timing["decode_step_ms"], 3),
                                    "verify_ms": round(timing["verify_pass_ms_tail16_draft32"], 3)}
    return {"warmup_s": round(warmup_s, 2), "exact_verified": bool(engine.exact_verified),
            "key_spans": list(engine.spans), "captured_passes": captured, "by_context": by_context}, logits


def _agreement(plain, fused) -> dict:
    """Fused logits against plain ones over the agreement pass's positions: where the argmax is
    the same, and the largest difference beside the logits' own scale (rounding moves logits by a
    small fraction of it, a wrong computation by about all of it)."""
    equal = int((plain.argmax(-1) == fused.argmax(-1)).sum())
    return {"positions": len(plain), "argmax_equal": equal,
            "agrees": equal == len(plain), "max_abs_logit_diff": round(float((plain - fused).abs().max()), 5),
            "plain_max_abs_logit": round(float(plain.abs().max()), 3)}

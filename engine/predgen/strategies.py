"""The one place that builds PredGen's continuation strategies (plain steps, Jacobi from the
stale draft, SpecBound, Speculative Streaming) from their config."""
from __future__ import annotations

from foresay.engine.errors import ForesayError
from foresay.engine.predgen.continuation import (Continuation, ContinuationConfig, FixedWindow, GiveUpWhenSlow,
                                                 JacobiFromDraft, PlainSteps)
from foresay.engine.predgen.exit_heads import load_exit_heads
from foresay.engine.predgen.layerwise import layerwise_unsupported
from foresay.engine.predgen.specbound import Bounds, SpecBound
from foresay.engine.predgen.streams import check_streams_model, make_streams


def prepare_continuation(config: ContinuationConfig, lm) -> None:
    """Load or check what the kind needs beside the model (SpecBound's exit heads, the streams'
    embeddings), once per model, so a model that cannot run it is refused when the model loads or
    the turn starts, not when the user stops speaking."""
    if config.kind == "streams":
        check_streams_model(lm, config.draft or None)
    if config.kind == "specbound":
        why = layerwise_unsupported(lm)
        if why is None and getattr(lm, "cache_kind", "dynamic") != "dynamic":
            why = "it needs the dynamic KV cache (set llm.cache = \"dynamic\")"
        if why:
            raise ForesayError(f"the specbound continuation cannot run {getattr(lm, 'name', 'this model')}: {why}")
        load_exit_heads(lm)


def make_continuation(config: ContinuationConfig, stale: list[int], lm=None) -> Continuation:
    """The strategy for one turn; `stale`: the rejected draft tail, shifted past the corrected
    token (the guesses for the positions after the pending token); `lm`: the model (SpecBound
    runs its layers and exit heads; streams reads its stream embeddings)."""
    if config.kind == "plain":
        return PlainSteps()
    if config.kind == "specbound":
        if lm is None:
            raise ForesayError("the specbound continuation needs the model (make_continuation(..., lm))")
        return SpecBound(lm, load_exit_heads(lm), Bounds(config.width, config.depth, config.threshold, config.chain),
                         GiveUpWhenSlow(config.patience, config.min_gain))
    if config.kind == "streams":
        return make_streams(lm, stale, config.draft or None, GiveUpWhenSlow(config.patience, config.min_gain))
    return JacobiFromDraft(stale, FixedWindow(config.window, config.fill),
                           GiveUpWhenSlow(config.patience, config.min_gain))


"""Streaming speech recognition: Whisper through faster-whisper, Foresay's greedy loop, or SpecASR;
LLM-based recognizers (Qwen3-ASR) through their own greedy loop or SpecASR.

Entry points for the pipeline: `AsrConfig` + `build_backend` choose and load the recognizer;
`StreamingAsr` is the pipeline stage (UserAudio and TurnEnded in, `PartialTranscript` and
`FinalTranscript` out); `StreamingTranscriber` is the same logic without I/O.
Heavy modules (torch, transformers, faster-whisper) load when these names are first used.
"""
from __future__ import annotations

from importlib import import_module

_EXPORTS = {
    "AsrConfig": "factory", "build_backend": "factory",
    "AsrBackend": "backends", "Hypothesis": "backends", "DecodeLimits": "backends",
    "GreedyBackend": "backends", "SpecAsrBackend": "backends",
    "FasterWhisperBackend": "whisper.faster", "FasterWhisperConfig": "whisper.faster",
    "SpecConfig": "specasr", "speculative_decode": "specasr", "greedy_decode": "greedy",
    "speculative_loop": "specasr", "greedy_loop": "greedy",
    "LlmGreedyBackend": "llm.backends", "LlmSpecAsrBackend": "llm.backends",
    "StreamingConfig": "streaming", "StreamingTranscriber": "streaming", "StreamingAsr": "stage",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)

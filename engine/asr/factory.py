"""Choosing and building the recognizer from one config: the ASR's entry point for `app/`."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from foresay.engine.asr.backends import AsrBackend, DecodeLimits, GreedyBackend, SpecAsrBackend
from foresay.engine.asr.errors import InvalidAsrConfig
from foresay.engine.asr.specasr import SpecConfig

BACKENDS = ("auto", "faster-whisper", "greedy", "specasr")


@dataclass(frozen=True)
class AsrConfig:
    """Which recognizer runs. `auto`: SpecASR when a draft is configured, else faster-whisper."""
    target: str = "medium.en"  # faster-whisper size, hub id, folder, or fixture name
    draft: str | None = None  # draft Whisper for SpecASR (same vocabulary as the target), e.g. openai/whisper-tiny.en
    backend: str = "auto"  # auto | faster-whisper | greedy | specasr
    device: str = "cpu"  # cpu | cuda (cuda:N for the transformers backends)
    dtype: str = "auto"  # transformers backends: auto (float16 on CUDA, float32 on CPU) | float32 | float16 | bfloat16
    attention: str = "sdpa"  # transformers backends: eager | sdpa
    compute_type: str = "auto"  # faster-whisper: auto (int8 on CPU, float16 on CUDA) or a CTranslate2 type
    spec: SpecConfig = field(default_factory=SpecConfig)
    limits: DecodeLimits = field(default_factory=DecodeLimits)
    fixture_root: Path | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise InvalidAsrConfig(f"ASR backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        if self.backend == "specasr" and not self.draft:
            raise InvalidAsrConfig("the specasr backend needs a draft model (e.g. openai/whisper-tiny.en)")

    @property
    def chosen_backend(self) -> str:
        if self.backend != "auto":
            return self.backend
        return "specasr" if self.draft else "faster-whisper"

    def torch_dtype_name(self) -> str:
        if self.dtype != "auto":
            return self.dtype
        return "float16" if self.device.startswith("cuda") else "float32"


def build_backend(config: AsrConfig) -> AsrBackend:
    """Load the configured recognizer (downloads or builds models as needed; call off the event loop)."""
    backend = config.chosen_backend
    if backend == "faster-whisper":
        from foresay.engine.asr.faster_whisper_backend import FasterWhisperBackend, FasterWhisperConfig

        return FasterWhisperBackend(FasterWhisperConfig(
            config.target, device=config.device.split(":")[0], compute_type=config.compute_type,
            max_new_tokens=config.limits.max_new_tokens, fixture_root=config.fixture_root))
    from foresay.engine.asr.models import WhisperModelConfig, load_whisper

    def load(name: str):
        whisper = load_whisper(WhisperModelConfig(name, device=config.device, dtype=config.torch_dtype_name(),
                                                  attention=config.attention, fixture_root=config.fixture_root))
        from foresay.engine.cuda_graphs import static_passes_supported
        if whisper.device.type == "cuda" and static_passes_supported():  # CUDA graphs (asr/captured.py)
            from foresay.engine.asr.captured import attach
            attach(whisper.model)
        return whisper

    if backend == "greedy":
        return GreedyBackend(load(config.target), config.limits)
    return SpecAsrBackend(load(config.target), load(config.draft), config.spec, config.limits)

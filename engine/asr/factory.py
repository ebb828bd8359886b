"""Choosing and building the recognizer from one config: the ASR's entry point for `app/`."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from foresay.engine.asr.backends import AsrBackend, DecodeLimits, GreedyBackend, SpecAsrBackend
from foresay.engine.asr.errors import InvalidAsrConfig
from foresay.engine.asr.specasr import SpecConfig

BACKENDS = ("auto", "faster-whisper", "greedy", "specasr", "llm-greedy", "llm-specasr")
LLM_BACKENDS = ("llm-greedy", "llm-specasr")


@dataclass(frozen=True)
class AsrConfig:
    """Which recognizer runs. `auto`: for an LLM-based recognizer (Qwen3-ASR), llm-specasr with a
    draft and llm-greedy without; for Whisper, SpecASR with a draft, else faster-whisper."""
    target: str = "medium.en"  # faster-whisper size, hub id, folder, or fixture name
    draft: str | None = None  # draft for SpecASR (same vocabulary as the target), e.g. openai/whisper-tiny.en
    #                           or Qwen/Qwen3-ASR-0.6B for Qwen/Qwen3-ASR-1.7B
    backend: str = "auto"  # auto | faster-whisper | greedy | specasr (Whisper) | llm-greedy | llm-specasr (Qwen3-ASR)
    device: str = "cpu"  # cpu | cuda (cuda:N for the transformers backends)
    dtype: str = "auto"  # transformers backends: auto (on CUDA float16, bfloat16 for LLM backends; float32 on CPU)
    #                      | float32 | float16 | bfloat16
    attention: str = "sdpa"  # transformers backends: eager | sdpa
    compute_type: str = "auto"  # faster-whisper: auto (int8 on CPU, float16 on CUDA) or a CTranslate2 type
    threads: int = 0  # faster-whisper on CPU: CTranslate2's threads (0: `default_cpu_threads()`)
    no_speech_p: float = 0.6  # faster-whisper: Whisper's no-speech threshold (`FasterWhisperConfig`; 0: off)
    # faster-whisper: ctranslate2 (a step a token) | guess (on CPU, the decoder in torch on the
    # model's float weights, checking the streaming hops' guess in one pass: `whisper/guess_decoder.py`)
    whisper_decoder: str = "ctranslate2"
    language: str = "English"  # LLM backends: the transcript's language (name or code); Whisper .en models are English
    context: str = ""  # LLM backends: text given to the model as context (names, terms), before earlier turns
    spec: SpecConfig = field(default_factory=SpecConfig)
    limits: DecodeLimits = field(default_factory=DecodeLimits)
    fixture_root: Path | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise InvalidAsrConfig(f"ASR backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        if self.backend == "specasr" and not self.draft:
            raise InvalidAsrConfig("the specasr backend needs a draft model (e.g. openai/whisper-tiny.en)")
        if self.backend == "llm-specasr" and not self.draft:
            raise InvalidAsrConfig("the llm-specasr backend needs a draft model (e.g. Qwen/Qwen3-ASR-0.6B)")
        if self.threads < 0:
            raise InvalidAsrConfig(f"ASR threads must be 0 (automatic) or positive, not {self.threads}")
        if not 0.0 <= self.no_speech_p < 1.0:
            raise InvalidAsrConfig(f"ASR no_speech_p must be in [0, 1) (0: off), not {self.no_speech_p}")
        from foresay.engine.asr.llm.models import language_name
        language_name(self.language)

    @property
    def chosen_backend(self) -> str:
        """The backend that runs; greedy and specasr name the decoding method for either family,
        so a profile's `specasr` runs an LLM-based pair when its target is one (demo-llm)."""
        from foresay.engine.asr.llm.loading import is_llm_asr_name
        llm = is_llm_asr_name(self.target)
        if self.backend in ("greedy", "specasr"):
            return f"llm-{self.backend}" if llm else self.backend
        if self.backend != "auto":
            return self.backend
        if llm:
            return "llm-specasr" if self.draft else "llm-greedy"
        return "specasr" if self.draft else "faster-whisper"

    @property
    def hears_people(self) -> bool:
        """Whether the recognizer learned from people's voices: not the demo's own models (trained
        on espeak-ng speech) nor the random fixtures."""
        from foresay.engine.asr.llm.fixtures import LLM_FIXTURES
        from foresay.engine.asr.whisper.fixtures import FIXTURES
        from foresay.engine.model_registry import SHIPPED_LLM_ASR, SHIPPED_WHISPER

        return not any(self.target in names for names in (SHIPPED_WHISPER, SHIPPED_LLM_ASR, FIXTURES, LLM_FIXTURES))

    @property
    def uses_draft(self) -> bool:
        return self.chosen_backend in ("specasr", "llm-specasr")

    def torch_dtype_name(self) -> str:
        if self.dtype != "auto":
            return self.dtype
        if not self.device.startswith("cuda"):
            return "float32"
        return "bfloat16" if self.chosen_backend in LLM_BACKENDS else "float16"  # Qwen3 decoders are bf16 models


def default_cpu_threads(cores: int | None = None) -> int:
    """CTranslate2 threads for a CPU Whisper: half the cores, at most 4. faster-whisper's own
    default is 4 whatever the machine; on 2 cores that oversubscribes them, and a Whisper decode is
    mostly small decoder steps that gain little from threads, while Smart Turn and the LLM run
    beside it at every pause (tiny.en on 2 cores: 1 thread decodes faster than 2 or 4;
    docs/benchmarks.md, "Whisper through CTranslate2: encoder window", "Threads")."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(4, cores // 2))


def build_backend(config: AsrConfig) -> AsrBackend:
    """Load the configured recognizer (downloads or builds models as needed; call off the event loop)."""
    backend = config.chosen_backend
    if backend == "faster-whisper":
        from foresay.engine.asr.whisper.faster import FasterWhisperBackend, FasterWhisperConfig

        return FasterWhisperBackend(FasterWhisperConfig(
            config.target, device=config.device.split(":")[0], compute_type=config.compute_type,
            cpu_threads=config.threads or default_cpu_threads(), max_new_tokens=config.limits.max_new_tokens,
            no_speech_p=config.no_speech_p, fixture_root=config.fixture_root, decoder=config.whisper_decoder))
    if backend in LLM_BACKENDS:
        return _build_llm_backend(config, backend)
    from foresay.engine.asr.whisper.models import WhisperModelConfig, load_whisper

    def load(name: str):
        whisper = load_whisper(WhisperModelConfig(name, device=config.device, dtype=config.torch_dtype_name(),
                                                  attention=config.attention, fixture_root=config.fixture_root))
        from foresay.engine.llm.cuda_graphs import static_passes_supported
        if whisper.device.type == "cuda" and static_passes_supported():  # CUDA graphs (asr/captured.py)
            from foresay.engine.asr.captured import attach
            attach(whisper.model)
        return whisper

    if backend == "greedy":
        return GreedyBackend(load(config.target), config.limits)
    return SpecAsrBackend(load(config.target), load(config.draft), config.spec, config.limits)


def _build_llm_backend(config: AsrConfig, backend: str) -> AsrBackend:
    from foresay.engine.asr.llm.backends import LlmGreedyBackend, LlmSpecAsrBackend
    from foresay.engine.asr.llm.models import LlmAsrModelConfig, load_llm_asr

    def load(name: str, target: bool = True):
        loaded = load_llm_asr(LlmAsrModelConfig(name, device=config.device, dtype=config.torch_dtype_name(),
                                                attention=config.attention, language=config.language,
                                                fixture_root=config.fixture_root))
        from foresay.engine.llm.cuda_graphs import static_passes_supported
        if target and loaded.device.type == "cuda" and static_passes_supported():  # asr/llm/captured.py
            from foresay.engine.asr.llm.captured import attach
            attach(loaded.model)  # drafts keep the dynamic cache: the target decides every token
        return loaded

    if backend == "llm-greedy":
        return LlmGreedyBackend(load(config.target), config.limits, config.context)
    return LlmSpecAsrBackend(load(config.target), load(config.draft, target=False), config.spec, config.limits,
                             config.context)

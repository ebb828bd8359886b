"""faster-whisper (CTranslate2) behind the backend interface: fastest where no draft pair is set."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from foresay.engine.asr.backends import AsrBackend, Hypothesis, WhisperText
from foresay.engine.asr.errors import InvalidAsrConfig
from foresay.engine.asr.fixtures import ctranslate2_folder, is_fixture
from foresay.engine.asr.models import check_audio
from foresay.engine.errors import ModelUnavailable

COMPUTE_TYPES = ("auto", "int8", "int8_float16", "int8_float32", "float16", "bfloat16", "float32")


@dataclass(frozen=True)
class FasterWhisperConfig:
    """Which CTranslate2 Whisper to run and how."""
    model: str  # a size (tiny.en, medium.en, large-v3, ...), a converted folder, or a fixture name
    device: str = "cpu"  # cpu | cuda | auto
    compute_type: str = "auto"  # auto: int8 on CPU, float16 on CUDA
    cpu_threads: int = 0  # 0: CTranslate2's default
    max_new_tokens: int = 224
    fixture_root: Path | None = None

    def __post_init__(self) -> None:
        if not self.model:
            raise InvalidAsrConfig("a faster-whisper model name or folder is required")
        if self.device not in ("cpu", "cuda", "auto"):
            raise InvalidAsrConfig(f"device must be cpu, cuda or auto, not {self.device!r}")
        if self.compute_type not in COMPUTE_TYPES:
            raise InvalidAsrConfig(f"compute_type must be one of {', '.join(COMPUTE_TYPES)}, not {self.compute_type!r}")
        if self.cpu_threads < 0 or not 1 <= self.max_new_tokens <= 448:
            raise InvalidAsrConfig("cpu_threads must be >= 0 and max_new_tokens in 1..448")

    def resolved_compute_type(self, device: str) -> str:
        if self.compute_type != "auto":
            return self.compute_type
        return "float16" if device == "cuda" else "int8"


class FasterWhisperBackend(AsrBackend):
    def __init__(self, config: FasterWhisperConfig) -> None:
        from faster_whisper import WhisperModel

        self.config = config
        source = str(ctranslate2_folder(config.model, config.fixture_root)) if is_fixture(config.model) else config.model
        device = config.device
        if device == "auto":
            import ctranslate2
            device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
        try:
            self.model = WhisperModel(source, device=device, compute_type=config.resolved_compute_type(device),
                                      cpu_threads=config.cpu_threads)
        except Exception as exc:  # download errors, bad folders and CTranslate2 errors alike
            raise ModelUnavailable(
                f"faster-whisper model {config.model!r} could not be loaded ({type(exc).__name__}: {exc}); "
                "give a CTranslate2 folder or download the model once with a network connection") from exc
        tokenizer = self.model.hf_tokenizer
        self.text = WhisperText(tokenizer, tokenizer.token_to_id("<|endoftext|>"))

    def transcribe(self, audio, forced=(), prompt=(), guess=()) -> Hypothesis:
        audio = check_audio(audio)
        multilingual = self.model.model.is_multilingual
        prefix = self.text.decode(forced).strip()
        segments, _ = self.model.transcribe(
            audio, language="en" if multilingual else None, beam_size=1, best_of=1, temperature=0.0,
            condition_on_previous_text=False, initial_prompt=list(prompt) or None,
            prefix=prefix or None, without_timestamps=True, vad_filter=False,
            compression_ratio_threshold=None, log_prob_threshold=None, no_speech_threshold=None,
            max_new_tokens=self.config.max_new_tokens)
        # The segments are a lazy generator: decode here, in the caller's (worker) thread.
        eot = self.text.first_special
        tokens = [t for segment in segments for t in segment.tokens if t < eot]
        # CTranslate2 returns the prefix it was given (re-encoded from text, as faster-whisper does).
        given = self.text.encode(" " + prefix) if prefix else []
        if tokens[: len(given)] == given:
            tokens = tokens[len(given):]
        return Hypothesis(tuple(tokens))

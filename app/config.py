"""Foresay's configuration: profiles, the TOML file, command-line overrides.

Precedence, lowest first: the components' defaults, the profile, the config file
(`config.toml` in the platform's config folder, or `--config PATH`), then `--set section.key=value`.
Every section becomes the frozen, validated config dataclass of its component.
"""
from __future__ import annotations

import logging
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from foresay.app.settings import ConfigError, build, merge, parse_override
from foresay.audio.bargein import BargeInConfig
from foresay.audio.capture import MicConfig
from foresay.audio.endpoint import EndpointerConfig
from foresay.audio.hangover import AdaptiveHangover, AdaptiveHangoverConfig, FixedHangover, HangoverPolicy
from foresay.audio.turn_end import TurnEndConfig, TurnEndDecision
from foresay.audio.playback import PlaybackConfig
from foresay.audio.smart_turn import SmartTurnConfig
from foresay.audio.vad import VadConfig
from foresay.engine.asr.factory import AsrConfig
from foresay.engine.asr.streaming import StreamingConfig
from foresay.engine.errors import ForesayError
from foresay.engine.events import ListeningMode
from foresay.engine.llm.config import LLMConfig
from foresay.engine.predgen.continuation import ContinuationConfig
from foresay.engine.predgen.turn import PredGenConfig
from foresay.engine.predgen.verifiers import parse_verifier
from foresay.engine.tts.espeak import EspeakConfig
from foresay.engine.tts.piper_engine import PiperConfig
from foresay.engine.tts.zonos import ZonosConfig

log = logging.getLogger(__name__)

MODES = tuple(m.value for m in ListeningMode)


@dataclass(frozen=True)
class AppSettings:
    """profile: auto | a name from PROFILES. mode: hands-free | push-to-talk.
    history_dir: where conversations are saved (None: the platform's data folder).
    adaptive_endpointing: let PredGen's P(end of turn) shorten or lengthen the hangover."""
    profile: str = "auto"
    mode: str = "hands-free"
    history_dir: Path | None = None
    adaptive_endpointing: bool = True

    def __post_init__(self):
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")


@dataclass(frozen=True)
class PredGenSettings:
    """enabled: speculate while the user speaks (False: wait for the final transcript).
    verifier: greedy (lossless) | topk:K | reflection.
    continuation: how the reply goes on after the final verification when the draft's first
        sentence did not survive: plain (one token per pass) | jacobi (Jacobi iteration seeded with
        the stale draft, 16 positions per pass) | jacobi:W (W positions) | jacobi:W:fill (keeps
        the window full past the draft; for consistency-trained models such as demo-cllm) |
        specbound (early-exit self-drafting with exit heads trained for the model, shipped for
        the demo model; specbound:W:L bounds a round to W drafts exiting by layer L; needs the
        dynamic cache) | streams | streams:K (Speculative Streaming: one pass verifies the draft
        and the model's stream embeddings propose the next K tokens; needs such a model, e.g.
        demo-streams). Lossless either way. The rest as in PredGenConfig."""
    enabled: bool = True
    verifier: str = "greedy"
    continuation: str = "jacobi"
    max_new_tokens: int = PredGenConfig.max_new_tokens
    max_draft_tokens: int = PredGenConfig.max_draft_tokens
    margin_tokens: int = PredGenConfig.margin_tokens

    def __post_init__(self):
        try:
            parse_verifier(self.verifier)
            ContinuationConfig.parse(self.continuation)
        except ForesayError as exc:
            raise ConfigError(str(exc)) from None
        self.engine_config()  # validates the numbers

    def engine_config(self) -> PredGenConfig:
        return PredGenConfig(max_new_tokens=self.max_new_tokens, max_draft_tokens=self.max_draft_tokens,
                             margin_tokens=self.margin_tokens,
                             continuation=ContinuationConfig.parse(self.continuation))


TTS_ENGINES = ("espeak", "piper", "zonos")


@dataclass(frozen=True)
class TtsSettings:
    """engine: espeak (CPU, everywhere, robotic) | piper (CPU, a natural voice) | zonos (GPU;
    install from its git repository). A Piper voice that is not here, or Zonos not installed: the
    app speaks with espeak-ng and says so (app/voice.py).
    voice: the Piper voice, by name (en_US-joe-medium: the registry copy, else the hub's) or as
    the path of a .onnx file with its .onnx.json beside; None: [tts.piper] voice."""
    engine: str = "espeak"
    voice: str | None = None
    espeak: EspeakConfig = field(default_factory=EspeakConfig)
    piper: PiperConfig = field(default_factory=PiperConfig)
    zonos: ZonosConfig = field(default_factory=ZonosConfig)

    def __post_init__(self):
        if self.engine not in TTS_ENGINES:
            raise ConfigError(f"tts engine must be one of {', '.join(TTS_ENGINES)}, got {self.engine!r}")
        self.engine_config()  # validates the voice

    def engine_config(self):
        if self.engine == "piper":
            return replace(self.piper, voice=self.voice) if self.voice is not None else self.piper
        return self.espeak if self.engine == "espeak" else self.zonos


@dataclass(frozen=True)
class AudioSettings:
    """input_device / output_device: index or (part of) a name; None: the system default.
    end_of_turn: with [app] adaptive_endpointing, "decision" (the end-of-turn decision, thresholds
    in `turn_end`, with Smart Turn's cue as `smart_turn` says) or "hangover" (the older adaptive
    hangover, bounds in `hangover`);
    fixed_hangover_s: the hangover when not adaptive.
    barge_in: let the user interrupt a reply by speaking; echo_canceller: auto | webrtc | none.
    The endpointer's mode comes from [app] mode."""
    input_device: str | None = None
    output_device: str | None = None
    mic: MicConfig = field(default_factory=MicConfig)
    playback: PlaybackConfig = field(default_factory=PlaybackConfig)
    vad: VadConfig = field(default_factory=VadConfig)
    endpointer: EndpointerConfig = field(default_factory=EndpointerConfig)
    end_of_turn: str = "decision"
    turn_end: TurnEndConfig = field(default_factory=TurnEndConfig)
    smart_turn: SmartTurnConfig = field(default_factory=SmartTurnConfig)
    hangover: AdaptiveHangoverConfig = field(default_factory=AdaptiveHangoverConfig)
    fixed_hangover_s: float = 0.7
    barge_in: bool = True
    bargein: BargeInConfig = field(default_factory=BargeInConfig)
    echo_canceller: str = "auto"

    def __post_init__(self):
        if self.fixed_hangover_s <= 0:
            raise ConfigError("fixed_hangover_s must be positive")
        if self.end_of_turn not in ("decision", "hangover"):
            raise ConfigError(f"end_of_turn must be decision or hangover, got {self.end_of_turn!r}")
        if self.echo_canceller not in ("auto", "webrtc", "none"):
            raise ConfigError(f"echo_canceller must be auto, webrtc or none, got {self.echo_canceller!r}")

    @staticmethod
    def device(spec: str | None) -> int | str | None:
        return int(spec) if spec is not None and spec.strip().isdigit() else spec

    def uses_audio_cue(self, adaptive: bool, hears_people: bool) -> bool:
        """Whether the end-of-turn decision hears Smart Turn's cue ("auto": when the model is at
        hand and the recognizer `hears_people`, `AsrConfig.hears_people`)."""
        from foresay.audio.smart_turn import wanted

        return (adaptive and self.end_of_turn == "decision" and self.turn_end.cue_weight > 0
                and wanted(self.smart_turn, hears_people))

    def turn_policy(self, adaptive: bool, audio_cue: bool = False) -> HangoverPolicy:
        """The endpointer's policy: fixed unless `adaptive` ([app] adaptive_endpointing);
        `audio_cue`: an audio model answers at each voice pause (`uses_audio_cue`)."""
        if not adaptive:
            return FixedHangover(self.fixed_hangover_s)
        if self.end_of_turn == "decision":
            return TurnEndDecision(self.turn_end, audio_cue=audio_cue)
        return AdaptiveHangover(self.hangover)

    def longest_wait_s(self) -> float:
        """The longest silence any policy here may wait before ending a turn."""
        return max(self.fixed_hangover_s, self.hangover.max_s, self.turn_end.incomplete_s)

    def mic_config(self) -> MicConfig:
        """The capture settings with the chosen input device."""
        return replace(self.mic, device=self.device(self.input_device))

    def playback_config(self) -> PlaybackConfig:
        """The playback settings with the chosen output device."""
        return replace(self.playback, device=self.device(self.output_device))


@dataclass(frozen=True)
class Settings:
    app: AppSettings = field(default_factory=AppSettings)
    llm: LLMConfig = field(default_factory=LLMConfig)
    predgen: PredGenSettings = field(default_factory=PredGenSettings)
    asr: AsrConfig = field(default_factory=AsrConfig)
    streaming: StreamingConfig = field(default_factory=StreamingConfig)
    tts: TtsSettings = field(default_factory=TtsSettings)
    audio: AudioSettings = field(default_factory=AudioSettings)


SECTIONS = tuple(f.name for f in fields(Settings))

# Each profile is a partial config. GPU profiles are sized so that LLM, ASR and TTS fit together.
# On CUDA the LLM runs a static KV cache (llm.cache = "auto") preallocated to the whole context; a
# pass attends over the shortest key span (1024, 2048, ... tokens) that holds it: 8192 tokens keep
# the buffers at 0.5 GB for a 7B model and a full conversation's step about 1.5x a short one's (H100).
_GPU_CONTEXT = 8192
PROFILES: dict[str, dict] = {
    "gpu-24gb": {  # the flagship experience
        "llm": {"model": "Qwen/Qwen2.5-7B-Instruct", "device": "cuda", "max_context": _GPU_CONTEXT},
        "asr": {"target": "openai/whisper-medium.en", "draft": "openai/whisper-tiny.en",
                "backend": "specasr", "device": "cuda"},
        "tts": {"engine": "zonos"},
    },
    "gpu-16gb": {
        "llm": {"model": "Qwen/Qwen2.5-3B-Instruct", "device": "cuda", "max_context": _GPU_CONTEXT},
        "asr": {"target": "openai/whisper-medium.en", "draft": "openai/whisper-tiny.en",
                "backend": "specasr", "device": "cuda"},
        "tts": {"engine": "zonos"},
    },
    # Opt-in (auto never picks them): SpecASR on Qwen3-ASR, 0.6B drafting for 1.7B (bf16, about
    # 6.5 GB with caches, estimated) instead of the Whisper pair. Beside Zonos (about 4 GB) it fits
    # a 24 GB GPU with the 3B LLM, and a 32 GB GPU with the 7B flagship.
    "gpu-24gb-qwen3-asr": {
        "llm": {"model": "Qwen/Qwen2.5-3B-Instruct", "device": "cuda"},
        "asr": {"target": "Qwen/Qwen3-ASR-1.7B", "draft": "Qwen/Qwen3-ASR-0.6B", "backend": "llm-specasr",
                "device": "cuda", "dtype": "bfloat16"},
        "tts": {"engine": "zonos"},
    },
    "gpu-32gb-qwen3-asr": {
        "llm": {"model": "Qwen/Qwen2.5-7B-Instruct", "device": "cuda"},
        "asr": {"target": "Qwen/Qwen3-ASR-1.7B", "draft": "Qwen/Qwen3-ASR-0.6B", "backend": "llm-specasr",
                "device": "cuda", "dtype": "bfloat16"},
        "tts": {"engine": "zonos"},
    },
    "gpu-8gb": {
        "llm": {"model": "Qwen/Qwen2.5-1.5B-Instruct", "device": "cuda", "max_context": _GPU_CONTEXT},
        "asr": {"target": "small.en", "backend": "faster-whisper", "device": "cuda"},
        "tts": {"engine": "piper"},
    },
    "cpu": {
        "llm": {"model": "Qwen/Qwen2.5-0.5B-Instruct", "device": "cpu"},
        "asr": {"target": "base.en", "backend": "faster-whisper", "device": "cpu", "compute_type": "int8"},
        "tts": {"engine": "piper"},
    },
    # offline: the chat model and the Whisper pair trained in-house (toy domain), on CPU. The pair
    # has only heard espeak-ng voices: where a real Whisper is on this machine, `demo` hears with it
    # instead (`profile_table`); `demo-own-ear` always runs the pair (the demo benchmarks and tests).
    "demo": {
        "llm": {"model": "demo", "device": "cpu"},
        "asr": {"target": "demo", "draft": "demo-draft", "backend": "specasr", "device": "cpu"},
        # The demo Whispers were trained without a previous-text prompt, and they complete a
        # cut-off request with words of their own: the final transcript decodes afresh. They were
        # trained on one request at a time and leave words out of a window holding two: speech
        # that outgrows a window is cut into pieces of about one request (docs/benchmarks.md).
        "streaming": {"prompt_tokens": 0, "final_redecode": True, "segment_s": 3.5},
        # Piper when its voice is here (`foresay models fetch piper-en_US-joe-medium`); an offline
        # profile never downloads it, and speaks with espeak-ng without it.
        "tts": {"engine": "piper"},
        "predgen": {"max_new_tokens": 64},
        # The demo chat model learned where a request ends (its card gives the AUC of P(end of
        # turn), whole vs cut requests): the end-of-turn decision on its estimate.
        "app": {"adaptive_endpointing": True},
        "audio": {"end_of_turn": "decision"},
    },
    "tiny-random": {  # offline: random fixtures (tests, plumbing checks); says nothing meaningful
        "llm": {"model": "tiny-random", "device": "cpu"},
        "asr": {"target": "tiny-random", "draft": "tiny-random-draft", "backend": "specasr", "device": "cpu"},
        "tts": {"engine": "espeak"},
        "predgen": {"max_new_tokens": 48},
    },
}
PROFILES["demo-own-ear"] = PROFILES["demo"]
OFFLINE_PROFILES = ("demo", "tiny-random")


def profile_table(name: str) -> dict:
    """The partial config of profile `name` on this machine. The one choice made here: `demo` hears
    with a real Whisper where one is present (`demo_profile.real_whisper_table`), with the streaming
    defaults made for real Whispers instead of the settings tuned for the demo pair."""
    if name == "demo":
        from foresay.app.demo_profile import real_whisper_table
        ear = real_whisper_table()
        if ear is not None:
            return {**{k: v for k, v in PROFILES[name].items() if k not in ("asr", "streaming")}, **ear}
    return PROFILES[name]


def auto_profile() -> str:
    """Pick a profile by the hardware: the CUDA GPU's memory decides, else the CPU profile."""
    try:
        import torch
        if torch.cuda.is_available():
            gib = torch.cuda.get_device_properties(0).total_memory / 2**30
            if gib >= 22:
                return "gpu-24gb"
            if gib >= 14:
                return "gpu-16gb"
            if gib >= 7:
                return "gpu-8gb"
    except Exception as exc:  # a broken CUDA install must not stop the CPU path
        log.warning("could not query the GPU (%s); using the CPU profile", exc)
    return "cpu"


def default_config_path() -> Path:
    from platformdirs import user_config_dir
    return Path(user_config_dir("foresay")) / "config.toml"


def read_config_file(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a folder, not a file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None


def remember_profile(path: Path, profile: str) -> None:
    """Sets `profile` under [app] in the config file (made if missing), keeping the rest of the
    file as it is; written to a temporary file, fsynced and renamed over it."""
    import os
    import re
    import stat

    path = Path(path)
    text = path.read_text("utf-8") if path.exists() else ""
    if text:
        read_config_file(path)   # a damaged file is reported, never overwritten
    line = f'profile = "{profile}"'
    lines = text.splitlines()
    section, at, app_header = "", None, None
    for i, raw in enumerate(lines):
        stripped = raw.strip()
        if stripped.startswith("["):
            section = stripped.strip("[] ")
            if section == "app":
                app_header = i
        elif section == "app" and re.match(r"profile\s*=", stripped):
            at = i
    if at is not None:
        lines[at] = line
    elif app_header is not None:
        lines.insert(app_header + 1, line)
    else:
        lines = ["[app]", line, ""] + lines
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o600   # private unless made otherwise
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode) if hasattr(os, "fchmod") else None
            f.write("\n".join(lines).rstrip("\n") + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"cannot save the profile in {path}: {exc.strerror or exc}") from None
    read_config_file(path)


def load_settings(path: Path | None = None, profile: str | None = None,
                  overrides: list[str] = ()) -> Settings:
    """The effective settings; `path` None reads the default file if there is one."""
    if path is None:
        path = default_config_path()
        table = read_config_file(path) if path.exists() else {}
    else:
        table = read_config_file(Path(path))
    for text in overrides:
        table = merge(table, parse_override(text))
    for section, value in table.items():   # `app = 5` would otherwise vanish under the profile's [app]
        if section in SECTIONS and not isinstance(value, dict):
            raise ConfigError(f"{section}: expected a table ([{section}] with its keys), got {value!r}")
    name = profile or table.get("app", {}).get("profile", "auto")
    chosen = auto_profile() if name == "auto" else name
    if chosen not in PROFILES:
        raise ConfigError(f"unknown profile {name!r} (profiles: auto, {', '.join(PROFILES)})")
    table = merge(merge(profile_table(chosen), table), {"app": {"profile": chosen}})
    return build(Settings, table, "")

"""Zonos v0.1 (Zyphra): the GPU engine, 44.1 kHz, transformer or hybrid backbone.

Generation runs in the preparation's worker thread; Zonos's per-step callback streams complete
frames through a `StreamingDecoder`, pauses at the hold point (the model's state stays live in
that paused call, nothing is recomputed) and stops generation by returning False on cancel.
Zonos itself is imported lazily: it is installed from its git repository (see docs/tts.md)."""
from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from foresay.engine.errors import ModelUnavailable
from foresay.engine.tts.base import PreparationOptions, TtsEngine
from foresay.engine.tts.codec_stream import StreamDecodeConfig, StreamingDecoder
from foresay.engine.tts.errors import InvalidTtsConfig, TtsUnavailable
from foresay.engine.tts.prepared import ChunkSink
from foresay.engine.tts.segments import Segment, SegmentJob
from foresay.engine.tts.turns import ModelTurns
from foresay.engine.tts.zonos_codes import complete_frames, delayed_history, undelay

INSTALL_HOW = ("Install it from its git repository (the PyPI package of that name is not Zonos): "
               "pip install 'foresay[zonos]' 'zonos @ git+https://github.com/Zyphra/Zonos.git'; "
               "for the hybrid model also: pip install --no-build-isolation mamba-ssm causal-conv1d. "
               "It needs espeak-ng installed too.")
INSTALL_HINT = f"Zonos is not installed. {INSTALL_HOW}"
MODEL_IDS = {"transformer": "Zyphra/Zonos-v0.1-transformer", "hybrid": "Zyphra/Zonos-v0.1-hybrid"}
EMOTIONS = ("happiness", "sadness", "disgust", "fear", "surprise", "anger", "other", "neutral")


@dataclass(frozen=True)
class ZonosVoice:
    """Conditioning for Zonos's `make_cond_dict`."""
    language: str = "en-us"           # one of Zonos's language codes (espeak-ng style)
    speaking_rate: float = 15.0       # phonemes per minute / 10 in Zonos's scale, 0..40 (10 slow, 30 very fast)
    pitch_std: float = 45.0           # pitch variation, 0..400 (20-45 normal speech, 60-150 expressive)
    emotion: tuple[float, ...] = (0.3077, 0.0256, 0.0256, 0.0256, 0.0256, 0.0256, 0.2564, 0.3077)  # EMOTIONS weights
    speaker_clip: Path | None = None  # reference recording of the voice to clone; None: the model's own voice

    def __post_init__(self) -> None:
        if not self.language:
            raise InvalidTtsConfig("a Zonos voice needs a language code such as 'en-us'")
        if not 0 <= self.speaking_rate <= 40:
            raise InvalidTtsConfig(f"speaking_rate must be in 0..40, got {self.speaking_rate}")
        if not 0 <= self.pitch_std <= 400:
            raise InvalidTtsConfig(f"pitch_std must be in 0..400, got {self.pitch_std}")
        if len(self.emotion) != len(EMOTIONS) or min(self.emotion) < 0 or sum(self.emotion) <= 0:
            raise InvalidTtsConfig(f"emotion needs {len(EMOTIONS)} non-negative weights ({', '.join(EMOTIONS)}) "
                                   f"that are not all zero, got {self.emotion}")
        if self.speaker_clip is not None and not Path(self.speaker_clip).is_file():
            raise InvalidTtsConfig(f"speaker reference clip not found: {self.speaker_clip}")


@dataclass(frozen=True)
class ZonosConfig:
    model: str = "auto"             # "transformer", "hybrid" (needs mamba-ssm and CUDA) or "auto"
    model_id: str | None = None     # hub id or local folder (config.json + model.safetensors); None: by `model`
    device: str = "auto"            # "cuda", "cuda:1", "cpu" or "auto" (CUDA when available)
    cfg_scale: float = 2.0          # classifier-free guidance; Zonos needs it != 1
    min_p: float = 0.1              # min-p sampling threshold
    max_seconds: float = 30.0       # longest audio one segment may generate
    graphs: bool | None = None      # the transformer's decode step at static shapes, captured; None: on CUDA
    compile: bool = False           # torch.compile the decode step where it is not captured (slow warm-up)
    voice: ZonosVoice = field(default_factory=ZonosVoice)
    decode: StreamDecodeConfig = field(default_factory=StreamDecodeConfig)
    preparation: PreparationOptions = field(default_factory=PreparationOptions)

    def __post_init__(self) -> None:
        if self.model not in ("auto", *MODEL_IDS):
            raise InvalidTtsConfig(f"Zonos model must be auto, transformer or hybrid, got {self.model!r}")
        if self.cfg_scale == 1.0 or self.cfg_scale <= 0:
            raise InvalidTtsConfig(f"cfg_scale must be positive and not 1 (Zonos requires guidance), got {self.cfg_scale}")
        if not 0 <= self.min_p < 1:
            raise InvalidTtsConfig(f"min_p must be in [0, 1), got {self.min_p}")
        if not 0.5 <= self.max_seconds <= 60:
            raise InvalidTtsConfig(f"max_seconds must be in 0.5..60, got {self.max_seconds}")


@dataclass(frozen=True)
class ZonosBackend:
    """What the engine uses of Zonos: a loaded model (`zonos.model.Zonos` or an object with its
    API), `make_cond_dict`, the supported language codes, and an audio file reader."""
    model: object
    make_cond_dict: Callable[..., dict]
    languages: frozenset[str]
    load_audio: Callable[[Path], tuple[object, int]]


def load_zonos_backend(config: ZonosConfig) -> ZonosBackend:
    """Imports Zonos and loads the model (blocking: call off the event loop)."""
    if importlib.util.find_spec("zonos") is None:
        raise TtsUnavailable(INSTALL_HINT)
    import torch

    from foresay.engine.tts.zonos_captured import CapturedZonosStep, is_transformer_backbone

    try:
        import torchaudio
        from zonos.conditioning import make_cond_dict, supported_language_codes
        from zonos.model import Zonos
    except ImportError as exc:
        missing = f"; torchaudio must match torch {torch.__version__}" if getattr(exc, "name", "") == "torchaudio" else ""
        raise TtsUnavailable(f"Zonos is installed but cannot be imported ({exc}{missing}). {INSTALL_HOW}") from exc
    device = config.device if config.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    kind = config.model
    if kind == "auto":
        kind = "hybrid" if device.startswith("cuda") and importlib.util.find_spec("mamba_ssm") else "transformer"
    if kind == "hybrid" and importlib.util.find_spec("mamba_ssm") is None:
        raise TtsUnavailable("the Zonos hybrid model needs mamba-ssm: pip install --no-build-isolation mamba-ssm causal-conv1d")
    source = config.model_id or MODEL_IDS[kind]
    try:
        if Path(source).is_dir():
            model = Zonos.from_local(str(Path(source) / "config.json"), str(Path(source) / "model.safetensors"), device=device)
        else:
            model = Zonos.from_pretrained(source, device=device)
    except OSError as exc:
        raise ModelUnavailable(f"could not load Zonos model {source!r} (not downloaded and no network?): {exc}") from exc
    model.requires_grad_(False).eval()
    graphs = device.startswith("cuda") if config.graphs is None else config.graphs
    if graphs and is_transformer_backbone(model):  # the hybrid captures its own step
        CapturedZonosStep(model, capture=device.startswith("cuda")).install()

    def load_audio(path: Path):
        wav, sr = torchaudio.load(str(path))
        return wav.mean(0, keepdim=True), sr

    return ZonosBackend(model, make_cond_dict, frozenset(supported_language_codes), load_audio)


class ZonosJob(SegmentJob):
    """Generates and decodes segments one after another. With `interleave`, the model is handed
    to other preparations between steps; models using CUDA graphs keep it for a whole segment,
    because their captured graph belongs to one generation."""

    def __init__(self, engine: ZonosEngine, voice: ZonosVoice, segments: tuple[Segment, ...], interleave: bool) -> None:
        super().__init__(segments)
        self._engine = engine
        self._voice = voice
        self._interleave = interleave

    def _speak(self, segment: Segment, index: int, sink: ChunkSink) -> bool:
        with sink.idle():
            self._engine.turns.take(urgent=sink.released)
        try:
            return self._generate(segment, index, sink)
        finally:
            self._engine.turns.give()

    def _generate(self, segment: Segment, index: int, sink: ChunkSink) -> bool:
        engine = self._engine
        n_q = engine.n_codebooks
        decoder = StreamingDecoder(engine.decode_codes, engine.config.decode)
        rate = engine.sample_rate
        frames_per_second = rate / engine.config.decode.samples_per_frame

        def on_step(frame, step: int, max_steps: int) -> bool:
            if frame.shape[-1]:  # empty on the last step at the length limit
                history = delayed_history(frame, step)
                available = complete_frames(step, n_q)
                read = lambda a, b: undelay(history, a, b, engine.token_limit)  # noqa: E731
                chunks = decoder.advance(available, read)
                if sink.would_hold(decoder.ready_after_flush(available) / frames_per_second):
                    chunks += decoder.flush(available, read)
                for audio in chunks:
                    sink.emit(audio, rate, segment.span, index)
            if self._interleave:
                engine.turns.give()
            go_on = sink.proceed()
            if self._interleave:
                with sink.idle():
                    engine.turns.take(urgent=sink.released)
            return go_on

        codes = engine.generate(segment.text, self._voice, on_step)
        if sink.cancelled:
            return False
        codes = codes.masked_fill(codes >= engine.token_limit, 0)
        for audio in decoder.finish(codes.shape[-1], lambda a, b: codes[..., a:b]):
            sink.emit(audio, rate, segment.span, index)
        return True


class ZonosEngine(TtsEngine):
    name = "zonos"

    def __init__(self, config: ZonosConfig = ZonosConfig(), backend: ZonosBackend | None = None) -> None:
        super().__init__(config.preparation)
        self.config = config
        self.backend = backend
        self.turns = ModelTurns()
        self._speakers: dict[Path, object] = {}

    async def _load(self) -> None:
        if self.backend is None:
            self.backend = await asyncio.to_thread(load_zonos_backend, self.config)

    def _model(self):
        if self.backend is None:
            raise TtsUnavailable("the Zonos engine is not loaded yet: await engine.warmup() first")
        return self.backend.model

    @property
    def sample_rate(self) -> int:
        return int(self._model().autoencoder.sampling_rate)

    @property
    def n_codebooks(self) -> int:
        return int(self._model().autoencoder.num_codebooks)

    @property
    def token_limit(self) -> int:
        """Codes from here up (end-of-speech, mask) are not audio."""
        return int(self._model().eos_token_id)

    @property
    def max_new_tokens(self) -> int:
        return int(self.config.max_seconds * self.sample_rate / self.config.decode.samples_per_frame)

    @property
    def use_compile(self) -> bool:
        return self.config.compile

    def decode_codes(self, codes) -> np.ndarray:
        return self._model().autoencoder.decode(codes)[0, 0].float().cpu().numpy()

    def generate(self, text: str, voice: ZonosVoice, on_step: Callable[[object, int, int], bool]):
        """Zonos's codes for `text` (called in the worker, holding the model); `on_step(frame, step,
        max_steps)` after each step, generation stopping when it returns False."""
        return self._model().generate(
            prefix_conditioning=self.conditioning(text, voice), max_new_tokens=self.max_new_tokens,
            cfg_scale=self.config.cfg_scale, batch_size=1, sampling_params=dict(min_p=self.config.min_p),
            progress_bar=False, disable_torch_compile=not self.use_compile, callback=on_step)

    def conditioning(self, text: str, voice: ZonosVoice):
        """Zonos's prefix conditioning for one segment (called in the worker, holding the model)."""
        model = self._model()
        unconditional = {"vqscore_8", "dnsmos_ovrl"}
        speaker = None
        if voice.speaker_clip is None:
            unconditional.add("speaker")
        else:
            speaker = self._speaker_embedding(Path(voice.speaker_clip))
        cond = self.backend.make_cond_dict(
            text=text, language=voice.language.lower(), speaker=speaker, emotion=list(voice.emotion),
            pitch_std=voice.pitch_std, speaking_rate=voice.speaking_rate,
            unconditional_keys=unconditional, device=model.device)
        return model.prepare_conditioning(cond)

    def _speaker_embedding(self, clip: Path):
        if clip not in self._speakers:
            wav, sr = self.backend.load_audio(clip)
            self._speakers[clip] = self._model().make_speaker_embedding(wav, sr)
        return self._speakers[clip]

    def _resolve_voice(self, voice: ZonosVoice | None) -> ZonosVoice:
        voice = self.config.voice if voice is None else voice
        if not isinstance(voice, ZonosVoice):
            raise InvalidTtsConfig(f"the Zonos engine takes a ZonosVoice, got {type(voice).__name__}")
        self._model()
        if voice.language.lower() not in self.backend.languages:
            raise InvalidTtsConfig(f"Zonos does not speak {voice.language!r}; it knows: {', '.join(sorted(self.backend.languages))}")
        return voice

    def _make_job(self, segments: tuple[Segment, ...], voice: ZonosVoice) -> ZonosJob:
        model = self._model()
        graphs = bool(getattr(model, "can_use_cudagraphs", lambda: False)())
        return ZonosJob(self, voice, segments, interleave=not graphs)

"""A loaded Piper voice, its VITS graph cut in two: the encoder (text encoder, durations, flow: the
whole sentence's latent frames at once) and the decoder (HiFi-GAN: latent frames to audio, 256
samples a frame), so the decoder can run over windows of frames and the first audio of a long
sentence need not wait for the sentence's end.

The cut is the input of the decoder's first convolution (`dec.conv_pre`), found by its weight's
name, which every Piper export shares. Without the `onnx` package, or for a graph without that
layer, the whole model runs per sentence (`decoder` is None)."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import numpy as np

from foresay.engine.tts.errors import InvalidTtsConfig, TtsUnavailable
from foresay.engine.tts.piper_voices import VoiceFiles

log = logging.getLogger(__name__)

DECODER_WEIGHT = "dec.conv_pre.weight"


@dataclass(frozen=True)
class PiperStyle:
    """How the voice speaks; None keeps the voice's own setting (its .onnx.json)."""
    length_scale: float | None = None   # duration of each phoneme: above 1 slower, below 1 faster (0.25..4)
    noise_scale: float | None = None    # variation of the voice (0..2)
    noise_w: float | None = None        # variation of phoneme durations (0..2)
    speaker: int | None = None          # speaker id of a multi-speaker voice; None: its default speaker

    def __post_init__(self) -> None:
        if self.length_scale is not None and not 0.25 <= self.length_scale <= 4:
            raise InvalidTtsConfig(f"Piper length_scale must be in 0.25..4, got {self.length_scale}")
        for name in ("noise_scale", "noise_w"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 2:
                raise InvalidTtsConfig(f"Piper {name} must be in 0..2, got {value}")
        if self.speaker is not None and self.speaker < 0:
            raise InvalidTtsConfig(f"Piper speaker must be a non-negative id, got {self.speaker}")


def split_graph(model_path) -> tuple[bytes, bytes, str] | None:
    """(encoder, decoder, name of the latent tensor between them), or None when it cannot be cut."""
    try:
        import onnx
        from onnx.utils import Extractor
    except ImportError:
        log.warning("the onnx package is missing: Piper speaks each sentence whole (pip install onnx)")
        return None
    try:
        graph_model = onnx.load(str(model_path))
    except Exception as exc:  # protobuf's DecodeError and kin: a damaged or foreign file
        raise InvalidTtsConfig(f"{model_path} is not a usable Piper voice: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else 'unreadable'}") from None
    graph = graph_model.graph
    cut = next((n.input[0] for n in graph.node if n.op_type == "Conv" and DECODER_WEIGHT in n.input), None)
    if cut is None:
        log.warning("%s has no %s: Piper speaks each sentence whole", model_path, DECODER_WEIGHT)
        return None
    inputs = [i.name for i in graph.input]
    extractor = Extractor(graph_model)
    encoder = extractor.extract_model(inputs, [cut])
    decoder = extractor.extract_model([cut] + [n for n in inputs if n == "sid"], [o.name for o in graph.output])
    return encoder.SerializeToString(), decoder.SerializeToString(), cut


class PiperModel:
    """Phonemes to latent frames to audio; thread-safe (onnxruntime sessions are)."""

    def __init__(self, files: VoiceFiles, threads: int) -> None:
        import onnxruntime
        from piper import PiperVoice
        from piper.config import PiperConfig as VoiceConfig

        self.files = files
        self.voice_config = VoiceConfig.from_dict(json.loads(files.config.read_text("utf-8")))
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1

        def session(model):
            try:
                return onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
            except Exception as exc:  # onnxruntime raises its own kinds for a damaged or foreign model
                raise InvalidTtsConfig(f"{files.model} is not a usable Piper voice: {str(exc).splitlines()[0]}") from None

        parts = split_graph(files.model)
        if parts is None:
            self.encoder, self.decoder, self._latent = session(str(files.model)), None, ""
        else:
            self.encoder, self.decoder, self._latent = session(parts[0]), session(parts[1]), parts[2]
        names = {i.name for i in self.encoder.get_inputs()}
        if not {"input", "input_lengths", "scales"} <= names:
            raise InvalidTtsConfig(f"{files.model} is not a Piper voice: its inputs are {sorted(names)}")
        self._phonemizer = PiperVoice(session=self.encoder, config=self.voice_config)

    @property
    def sample_rate(self) -> int:
        return int(self.voice_config.sample_rate)

    @property
    def hop(self) -> int:
        """Audio samples per latent frame."""
        return int(self.voice_config.hop_length)

    @property
    def speakers(self) -> int:
        return int(self.voice_config.num_speakers)

    def phoneme_ids(self, text: str) -> list[list[int]]:
        """One id sequence per sentence the phonemizer finds in `text`."""
        return [self._phonemizer.phonemes_to_ids(p) for p in self._phonemizer.phonemize(text) if p]

    def _inputs(self, ids: list[int], style: PiperStyle) -> dict:
        c = self.voice_config
        scales = [c.noise_scale if style.noise_scale is None else style.noise_scale,
                  c.length_scale if style.length_scale is None else style.length_scale,
                  c.noise_w_scale if style.noise_w is None else style.noise_w]
        args = {"input": np.array([ids], dtype=np.int64), "input_lengths": np.array([len(ids)], dtype=np.int64),
                "scales": np.array(scales, dtype=np.float32)}
        if self.speakers > 1:
            args["sid"] = np.array([c.default_speaker_id if style.speaker is None else style.speaker], dtype=np.int64)
        return args

    def encode(self, ids: list[int], style: PiperStyle) -> tuple[np.ndarray, dict]:
        """Latent frames (1, channels, frames) of a sentence, and what the decoder also needs;
        without a split, the sentence's audio (1, 1, samples) instead."""
        args = self._inputs(ids, style)
        latent = self.encoder.run(None, args)[0]
        return latent, {k: v for k, v in args.items() if k == "sid"}

    def decode(self, latent: np.ndarray, extra: dict) -> np.ndarray:
        if self.decoder is None:
            raise TtsUnavailable("this Piper voice's graph was not cut: it has no separate decoder")
        return self.decoder.run(None, {self._latent: latent, **extra})[0].reshape(-1)

"""A loaded Piper voice, its VITS graph cut in three: the prior (text encoder, durations: the whole
sentence's prior frames at once), the flow (prior frames to latent frames) and the decoder
(HiFi-GAN: latent frames to audio, 256 samples a frame), so the first audio of a long sentence
waits for the prior, the flow over its first frames and one decoder window, not for the sentence.

The flow's couplings are convolutions of limited reach (4 couplings of 4 layers with kernel 5:
32 frames each side), so the flow run over a window with that much context equals the flow run
over the whole sentence (`LatentFrames`); each voice is checked once as it loads, and one whose
flow reaches further runs it over each whole sentence. The decoder's cut is the input of its first
convolution (`dec.conv_pre`), found by its weight's name, and the flow is the `/flow/` scope that
every Piper export shares. Without the `onnx` package, or for a graph without that layer, the
whole model runs per sentence (`decoder` is None); for a graph whose flow cannot be told apart,
the flow runs with the prior over the whole sentence (`flow` is None)."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import numpy as np

from foresay.engine.tts.errors import InvalidTtsConfig, TtsUnavailable
from foresay.engine.tts.piper_voices import VoiceFiles

log = logging.getLogger(__name__)

DECODER_WEIGHT = "dec.conv_pre.weight"
FLOW_SCOPE = "/flow/"
FLOW_CONTEXT_FRAMES = 32  # the flow's reach either side (see the module)
# Reads that run the flow over only the frames they need: the first decoder window's and the
# second's, which must be heard before the first (0.14 s) has played; the flow over the rest of
# a long sentence costs up to 70 ms (docs/benchmarks.md, "TTS").
WINDOWED_READS = 2


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


@dataclass(frozen=True)
class GraphParts:
    """A Piper graph cut for streaming: serialized ONNX models and the tensors between them."""
    encoder: bytes                  # phoneme ids -> the decoder's input, or the flow's inputs where `flow` is set
    decoder: bytes                  # the decoder's input (and "sid") -> audio
    latent: str                     # the decoder's input: latent frames times the frame mask
    flow: bytes | None = None       # (prior frames, frame mask) -> latent frames
    flow_inputs: tuple[str, str] = ("", "")  # names of the prior frames and of the frame mask


def split_graph(model_path) -> GraphParts | None:
    """The graph cut before its decoder (and its flow where it can be told apart), or None when
    it cannot be cut."""
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
    decoder = extractor.extract_model([cut] + [n for n in inputs if n == "sid"], [o.name for o in graph.output])
    flow = _flow_tensors(graph, cut)
    if flow is None:
        log.info("%s: no separable flow; it runs with the prior over each whole sentence", model_path)
        return GraphParts(extractor.extract_model(inputs, [cut]).SerializeToString(), decoder.SerializeToString(), cut)
    prior, mask, out = flow
    return GraphParts(extractor.extract_model(inputs, [prior, mask]).SerializeToString(), decoder.SerializeToString(),
                      cut, extractor.extract_model([prior, mask], [out]).SerializeToString(), (prior, mask))


def _flow_tensors(graph, cut: str) -> tuple[str, str, str] | None:
    """(prior frames, frame mask, flow output) where the decoder's input is the flow's output times
    the mask and the flow reads nothing else from outside (a multi-speaker voice's flow also reads
    the speaker: None, it is not cut)."""
    producer = {o: n for n in graph.node for o in n.output}
    multiply = producer.get(cut)
    if multiply is None or multiply.op_type != "Mul" or len(multiply.input) != 2:
        return None
    in_flow = [t in producer and producer[t].name.startswith(FLOW_SCOPE) for t in multiply.input]
    if in_flow.count(True) != 1:
        return None
    out, mask = multiply.input if in_flow[0] else reversed(multiply.input)
    downstream = set()  # tensors computed from a node of the flow's scope (the exporter leaves some unnamed)
    for node in graph.node:  # topological order
        if node.name.startswith(FLOW_SCOPE) or downstream.intersection(node.input):
            downstream.update(node.output)
    flow_nodes, wanted = [], {out}
    for node in reversed(graph.node):
        if wanted.intersection(node.output) and set(node.output) <= downstream:
            flow_nodes.append(node)
            wanted.update(node.input)
    constants = {i.name for i in graph.initializer}
    entering = {i for node in flow_nodes for i in node.input if i and i not in downstream and i not in constants}
    if len(entering) != 2 or mask not in entering:
        return None
    [prior] = entering - {mask}
    return prior, mask, out


class LatentFrames:
    """A sentence's latent frames, the flow run over them as they are read: the first
    `WINDOWED_READS` reads run it over the frames asked for, a later one over all the rest, each
    with `FLOW_CONTEXT_FRAMES` of context either side, so that neither the first window's audio
    nor the second's (due before the short first window has played) waits for the flow over the
    whole sentence. The frames equal the flow run over the sentence at once."""

    def __init__(self, prior: np.ndarray, mask: np.ndarray, flow=None, windows: bool = True) -> None:
        """`flow(prior, mask) -> latent` over a window of frames; None: `prior` is the latent already.
        `windows` False: the first read runs the flow over the whole sentence."""
        self.frames = int(prior.shape[-1])
        self._prior, self._mask, self._flow, self._windows = prior, mask, flow, windows
        self._latent = prior if flow is None else np.empty_like(prior)
        self._done = self.frames if flow is None else 0  # frames [0, done) are computed
        self._reads = 0  # reads that ran the flow

    def read(self, start: int, end: int) -> np.ndarray:
        """Latent frames [start, end) as (1, channels, frames)."""
        if not 0 <= start <= end <= self.frames:
            raise ValueError(f"latent frames [{start}, {end}) are outside the sentence's {self.frames}")
        self.compute(end)
        return self._latent[:, :, start:end]

    def compute(self, end: int) -> None:
        """Runs the flow so that frames [0, end) are ready (after `WINDOWED_READS` calls that
        ran it: through the last frame)."""
        if end > self._done:
            windowed = self._windows and self._reads < WINDOWED_READS and end + FLOW_CONTEXT_FRAMES < self.frames
            self._run_flow(end if windowed else self.frames)
            self._reads += 1

    def _run_flow(self, end: int) -> None:
        lo, hi = max(0, self._done - FLOW_CONTEXT_FRAMES), min(self.frames, end + FLOW_CONTEXT_FRAMES)
        mask = np.ascontiguousarray(self._mask[:, :, lo:hi])
        latent = self._flow(np.ascontiguousarray(self._prior[:, :, lo:hi]), mask) * mask
        self._latent[:, :, self._done:end] = latent[:, :, self._done - lo:end - lo]
        self._done = end


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
        self.flow = self._flow_inputs = None
        if parts is None:
            self.encoder, self.decoder, self._latent = session(str(files.model)), None, ""
        else:
            self.encoder, self.decoder, self._latent = session(parts.encoder), session(parts.decoder), parts.latent
            if parts.flow is not None:
                self.flow, self._flow_inputs = session(parts.flow), parts.flow_inputs
        names = {i.name for i in self.encoder.get_inputs()}
        if not {"input", "input_lengths", "scales"} <= names:
            raise InvalidTtsConfig(f"{files.model} is not a Piper voice: its inputs are {sorted(names)}")
        self._phonemizer = PiperVoice(session=self.encoder, config=self.voice_config)
        self.flow_windows = self.flow is not None and self._flow_reach_holds()  # the flow runs over windows

    def _flow_reach_holds(self) -> bool:
        """Whether the flow over a window equals the flow over the sentence for this voice (a voice
        of another make could reach further than `FLOW_CONTEXT_FRAMES`): checked once, on a
        sentence long enough to have frames beyond the first window's context."""
        ids = self.phoneme_ids("The flow of this voice is checked once, on a sentence of a few seconds.")[0]
        prior, mask = self.encoder.run(list(self._flow_inputs), self._inputs(ids, PiperStyle()))
        whole, windowed = self._flow_frames(prior, mask, windows=False), self._flow_frames(prior, mask, windows=True)
        head = 2 * FLOW_CONTEXT_FRAMES
        if whole.frames <= 2 * head:
            log.info("%s: its flow could not be checked; it runs over each whole sentence", self.files.model)
            return False
        error = float(np.abs(windowed.read(0, head) - whole.read(0, head)).max())
        if error > 1e-4:
            log.warning("%s: its flow reaches past %d frames (a difference of %.2g): it runs over each "
                        "whole sentence", self.files.model, FLOW_CONTEXT_FRAMES, error)
            return False
        return True

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

    def latent(self, ids: list[int], style: PiperStyle) -> tuple[LatentFrames, dict]:
        """A sentence's latent frames, the flow run over them as they are read, and what the
        decoder also needs."""
        if self.decoder is None:
            raise TtsUnavailable("this Piper voice's graph was not cut: it has no separate decoder")
        args = self._inputs(ids, style)
        extra = {k: v for k, v in args.items() if k == "sid"}
        if self.flow is None:
            return LatentFrames(self.encoder.run(None, args)[0], None), extra
        prior, mask = self.encoder.run(list(self._flow_inputs), args)
        return self._flow_frames(prior, mask, self.flow_windows), extra

    def _flow_frames(self, prior: np.ndarray, mask: np.ndarray, windows: bool) -> LatentFrames:
        names = self._flow_inputs
        return LatentFrames(prior, mask, lambda p, m: self.flow.run(None, {names[0]: p, names[1]: m})[0],
                            windows=windows)

    def encode(self, ids: list[int], style: PiperStyle) -> tuple[np.ndarray, dict]:
        """Latent frames (1, channels, frames) of a sentence, and what the decoder also needs;
        without a split, the sentence's audio (1, 1, samples) instead."""
        if self.decoder is None:
            return self.encoder.run(None, self._inputs(ids, style))[0], {}
        latent, extra = self.latent(ids, style)
        return latent.read(0, latent.frames), extra

    def decode(self, latent: np.ndarray, extra: dict) -> np.ndarray:
        if self.decoder is None:
            raise TtsUnavailable("this Piper voice's graph was not cut: it has no separate decoder")
        return self.decoder.run(None, {self._latent: latent, **extra})[0].reshape(-1)

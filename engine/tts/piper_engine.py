"""Piper: the CPU voice (VITS exported to ONNX, 22.05 kHz for most voices).

Each sentence runs the prior once (prosody of the whole sentence), then the flow and the decoder
over windows of its frames: the flow as the decoder reads them (`LatentFrames`), the decoder
through a `StreamingDecoder`. Each decoder window decodes a little context either side and the
joins are cross-faded, so the streamed audio equals the sentence decoded at once (to ~1e-5 with
the default context). The first window is short, so a long first sentence's first audio waits for
its prior, the flow over its first frames and one small decoder window only. Between windows the
job asks the sink whether to go on: that is the hold point and where a cancel takes effect.
Preparations take turns on the model, a streamed one first, so Piper uses one core at a time."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace

import numpy as np

from foresay.engine.tts.base import PreparationOptions, TtsEngine
from foresay.engine.tts.codec_stream import StreamDecodeConfig, StreamingDecoder
from foresay.engine.tts.errors import InvalidTtsConfig, TtsUnavailable
from foresay.engine.tts.piper_model import PiperModel, PiperStyle
from foresay.engine.tts.piper_voices import DEFAULT_VOICE, VoiceFiles, check_voice_files, find_voice, is_voice_path
from foresay.engine.tts.prepared import ChunkSink
from foresay.engine.tts.segments import Segment, SegmentJob
from foresay.engine.tts.turns import ModelTurns


def _windows() -> StreamDecodeConfig:
    # samples_per_frame is the voice's hop (set on load); 12 frames at 22.05 kHz are 0.14 s, then
    # 24, 48 and 64: each window is decoded while the one before it plays (docs/benchmarks.md, "TTS").
    # 16 frames of context each side make the windows' audio equal the whole decode.
    return StreamDecodeConfig(samples_per_frame=256, first_chunk_frames=12, chunk_frames=64,
                              context_frames=16, lookahead_frames=16, crossfade_frames=2, grow=True)


@dataclass(frozen=True)
class PiperConfig:
    voice: str = DEFAULT_VOICE      # a voice name (registry copy, else the hub's), or a .onnx path (its .onnx.json beside)
    threads: int = 1                # onnxruntime threads; 1 is fastest on 2 cores and leaves a core to ASR and LLM
    download: bool = True           # fetch a named voice from the hub when it is not here
    gain: float = 1.0               # applied to the model's output (clipped to [-1, 1])
    style: PiperStyle = field(default_factory=PiperStyle)   # used when prepare() gets no voice
    decode: StreamDecodeConfig = field(default_factory=_windows)  # decoder windows; samples_per_frame: the voice's
    preparation: PreparationOptions = field(default_factory=PreparationOptions)

    def __post_init__(self) -> None:
        if not self.voice or not self.voice.strip():
            raise InvalidTtsConfig("a Piper voice must be named (e.g. en_US-joe-medium) or given as a .onnx path")
        if not 1 <= self.threads <= 64:
            raise InvalidTtsConfig(f"Piper threads must be in 1..64, got {self.threads}")
        if not 0 < self.gain <= 4:
            raise InvalidTtsConfig(f"Piper gain must be in (0, 4], got {self.gain}")


class PiperJob(SegmentJob):
    def __init__(self, engine: PiperEngine, style: PiperStyle, segments: tuple[Segment, ...]) -> None:
        super().__init__(segments)
        self._engine = engine
        self._style = style

    def _on_model(self, sink: ChunkSink, work):
        turns = self._engine.turns
        with sink.idle():
            turns.take(urgent=sink.released)
        try:
            return work()
        finally:
            turns.give()

    def _speak(self, segment: Segment, index: int, sink: ChunkSink) -> bool:
        model = self._engine.model
        sentences = self._on_model(sink, lambda: model.phoneme_ids(segment.text))
        spoken = _TextShares(segment, [len(ids) for ids in sentences])
        for n, ids in enumerate(sentences):
            if n and not sink.proceed():
                return False
            if model.decoder is None:
                audio, _ = self._on_model(sink, lambda: model.encode(ids, self._style))
                audio = audio.reshape(-1)
                self._emit(audio, spoken.span(n, 0, audio.size, audio.size), index, sink)
                continue
            latent, extra = self._on_model(sink, lambda: model.latent(ids, self._style))
            decoder = StreamingDecoder(lambda frames: model.decode(frames, extra), self._engine.windows)
            total, done = latent.frames, 0
            while True:
                wanted = decoder.frames_needed()
                # the flow in a turn of its own: a streamed preparation waits for one step, not two
                self._on_model(sink, lambda: latent.compute(min(wanted, total)))
                chunks = self._on_model(sink, lambda: decoder.advance(wanted, latent.read) if wanted < total
                                        else decoder.finish(total, latent.read))
                for audio in chunks:
                    self._emit(audio, spoken.span(n, done, done + audio.size, total * model.hop), index, sink)
                    done += audio.size
                if wanted >= total:
                    break
                if not sink.proceed():
                    return False
        return True

    def _emit(self, audio: np.ndarray, span: tuple[int, int], index: int, sink: ChunkSink) -> None:
        gain = self._engine.config.gain
        audio = np.clip(audio * gain, -1.0, 1.0) if gain != 1.0 else np.clip(audio, -1.0, 1.0)
        sink.emit(audio, self._engine.sample_rate, span, index)


class _TextShares:
    """The characters of a segment a chunk of its audio speaks, in proportion: each of the
    phonemizer's sentences takes the share of the segment its phonemes have, and a chunk the share
    of its sentence its samples have, moved back to the start of the word it falls in. So a reply
    stopped after its first short window is not taken as heard to the end of its sentence (the
    playback counts a chunk played in full as heard)."""

    def __init__(self, segment: Segment, phonemes: list[int]) -> None:
        self.text, self.start = segment.text, segment.start
        total = sum(phonemes) or 1
        self.bounds = np.concatenate([[0.0], np.cumsum(phonemes) / total])

    def span(self, sentence: int, first: int, end: int, samples: int) -> tuple[int, int]:
        lo, hi = self.bounds[sentence], self.bounds[sentence + 1]

        def at(sample: int) -> int:
            i = round(len(self.text) * (lo + (hi - lo) * min(1.0, sample / max(1, samples))))
            if 0 < i < len(self.text) and not self.text[i - 1].isspace():
                i = self.text.rfind(" ", 0, i) + 1  # inside a word: from its start
            return self.start + i
        return at(first), at(end)


class PiperEngine(TtsEngine):
    name = "piper"

    def __init__(self, config: PiperConfig = PiperConfig(), model: PiperModel | None = None) -> None:
        super().__init__(config.preparation)
        self.config = config
        self.model = model
        self.turns = ModelTurns()
        # a voice file is checked now (a one-line error before anything loads); a name on load
        self.files: VoiceFiles | None = model.files if model is not None else (
            check_voice_files(config.voice) if is_voice_path(config.voice) else None)

    @property
    def windows(self) -> StreamDecodeConfig:
        return replace(self.config.decode, samples_per_frame=self._model().hop)

    async def _load(self) -> None:
        if self.model is None:
            self.model = await asyncio.to_thread(self._load_model)

    def _load_model(self) -> PiperModel:
        if self.files is None:
            self.files = find_voice(self.config.voice, download=self.config.download)
        return PiperModel(self.files, self.config.threads)

    def _model(self) -> PiperModel:
        if self.model is None:
            raise TtsUnavailable("the Piper engine is not loaded yet: await engine.warmup() first")
        return self.model

    @property
    def sample_rate(self) -> int:
        return self._model().sample_rate

    def _resolve_voice(self, voice: PiperStyle | None) -> PiperStyle:
        voice = self.config.style if voice is None else voice
        if not isinstance(voice, PiperStyle):
            raise InvalidTtsConfig(f"the Piper engine takes a PiperStyle, got {type(voice).__name__}")
        speakers = self._model().speakers
        if voice.speaker is not None and voice.speaker >= max(1, speakers):
            raise InvalidTtsConfig(f"the Piper voice {self.files.name} has {speakers} speaker(s); "
                                   f"speaker {voice.speaker} does not exist")
        return voice

    def _make_job(self, segments: tuple[Segment, ...], voice: PiperStyle) -> PiperJob:
        return PiperJob(self, voice, segments)

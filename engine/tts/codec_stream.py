"""Streamed decoding of codec frames to audio: overlapping windows joined by a short cross-fade.

Decoding a codec's frames in independent pieces clicks at the joins, because each decoder window
sees no context past its edges. Each window here also decodes `context_frames` before its start
and, when available, `lookahead_frames` after its end; the last `crossfade_frames` of every
chunk are held back and blended into the next chunk with complementary raised-cosine fades
(weights summing to one, so a decoder without context effects gives exactly the batch audio).
The first chunk is small for latency; later ones are larger for efficiency (with `grow`, each at
most twice the one before, so that each is decoded while the audio before it plays). No I/O, no model:
`decode(codes) -> samples` and `read(start, end) -> codes` are passed in."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from foresay.engine.tts.errors import InvalidTtsConfig, SynthesisFailed

Decode = Callable[[object], np.ndarray]
ReadFrames = Callable[[int, int], object]


@dataclass(frozen=True)
class StreamDecodeConfig:
    samples_per_frame: int = 512   # codec hop: 512 samples at 44.1 kHz is ~86 frames per second
    first_chunk_frames: int = 12   # first chunk (~140 ms): small, for time to first audio
    chunk_frames: int = 48         # later chunks (~560 ms): larger, for throughput
    context_frames: int = 8        # decoded before a window's start and thrown away
    lookahead_frames: int = 4      # decoded past a window's end when already generated
    crossfade_frames: int = 2      # overlap blended between consecutive chunks (~23 ms)
    grow: bool = False             # chunks double from the first up to `chunk_frames` (else jump to it)

    def __post_init__(self) -> None:
        for name in ("samples_per_frame", "first_chunk_frames", "chunk_frames"):
            if getattr(self, name) < 1:
                raise InvalidTtsConfig(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("context_frames", "lookahead_frames", "crossfade_frames"):
            if getattr(self, name) < 0:
                raise InvalidTtsConfig(f"{name} must not be negative, got {getattr(self, name)}")
        if min(self.first_chunk_frames, self.chunk_frames) <= 2 * self.crossfade_frames:
            raise InvalidTtsConfig("chunks must be longer than twice the cross-fade "
                                   f"({self.first_chunk_frames}, {self.chunk_frames} vs {self.crossfade_frames})")


class StreamingDecoder:
    """Feed it the number of complete frames as generation proceeds; it returns audio chunks."""

    def __init__(self, decode: Decode, config: StreamDecodeConfig = StreamDecodeConfig()) -> None:
        self.config = config
        self._decode = decode
        self._start = 0          # first frame whose audio is not yet emitted
        self._tail: np.ndarray | None = None  # held-back audio of frames [start, start + crossfade)
        n = config.crossfade_frames * config.samples_per_frame
        self._fade_in = (0.5 - 0.5 * np.cos(np.pi * (np.arange(n) + 0.5) / n)).astype(np.float32)
        self.frames_emitted = 0   # frames whose audio has been returned in full
        self._chunks = 0          # windows decoded

    def advance(self, available: int, read: ReadFrames) -> list[np.ndarray]:
        """Chunks that `available` complete frames allow, right context included."""
        out = []
        while True:
            end = self._start + self._chunk_size()
            if available < end + self.config.lookahead_frames:
                return out
            out.append(self._window(end, min(available, end + self.config.lookahead_frames), read, last=False))

    def flush(self, available: int, read: ReadFrames) -> list[np.ndarray]:
        """Everything `available` frames allow now, without waiting for right context (before a
        pause: the held audio must be decoded); the cross-fade tail stays held back."""
        if available - self._start <= 2 * self.config.crossfade_frames:
            return []
        return [self._window(available, available, read, last=False)]

    def frames_needed(self) -> int:
        """Frames (right context included) that make `advance` return the next chunk."""
        return self._start + self._chunk_size() + self.config.lookahead_frames

    def ready_after_flush(self, available: int) -> int:
        """Frames whose audio will have been returned once `flush(available)` ran."""
        return max(self.frames_emitted, available - self.config.crossfade_frames)

    def finish(self, total: int, read: ReadFrames) -> list[np.ndarray]:
        """Everything left, once generation has ended with `total` frames."""
        if total < self._start + (0 if self._tail is None else self.config.crossfade_frames):
            raise SynthesisFailed(f"the codec stream shrank: {total} frames after {self._start} were decoded")
        out = []
        while total - self._start > self._chunk_size():
            end = self._start + self._chunk_size()
            out.append(self._window(end, min(total, end + self.config.lookahead_frames), read, last=False))
        if total > self._start:
            out.append(self._window(total, total, read, last=True))
        return out

    def _chunk_size(self) -> int:
        cfg = self.config
        if not self._chunks:
            return cfg.first_chunk_frames
        return min(cfg.chunk_frames, cfg.first_chunk_frames << self._chunks) if cfg.grow else cfg.chunk_frames

    def _window(self, end: int, decode_end: int, read: ReadFrames, *, last: bool) -> np.ndarray:
        hop, cfg = self.config.samples_per_frame, self.config
        lo = max(0, self._start - cfg.context_frames)
        audio = np.asarray(self._decode(read(lo, decode_end)), dtype=np.float32).reshape(-1)
        self._chunks += 1
        if audio.size != (decode_end - lo) * hop:
            raise SynthesisFailed(f"the codec decoded {decode_end - lo} frames to {audio.size} samples, "
                                  f"expected {(decode_end - lo) * hop}")
        piece = audio[(self._start - lo) * hop:(end - lo) * hop].copy()
        if self._tail is not None:
            n = self._tail.size
            piece[:n] = self._tail * (1.0 - self._fade_in) + piece[:n] * self._fade_in
        if last or cfg.crossfade_frames == 0:
            self.frames_emitted += end - self._start
            self._start, self._tail = end, None
            return piece
        keep = cfg.crossfade_frames * hop
        self.frames_emitted += end - self._start - cfg.crossfade_frames
        self._start, self._tail = end - cfg.crossfade_frames, piece[-keep:].copy()
        return piece[:-keep]

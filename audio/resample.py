"""Sample-rate conversion and channel mixing, done with soxr (a band-limited polyphase resampler).

`StreamResampler` converts a stream block by block without clicks at block edges; `resample`
converts a whole signal at once. Both keep the timing: output sample `k` of a stream corresponds
to input time `k / out_rate` from the stream's start (soxr compensates its own filter delay).
"""
from __future__ import annotations

import numpy as np
import soxr

QUALITY = "HQ"  # soxr's high quality: 20-bit precision, ~ -120 dB aliasing; plenty for speech


def to_mono(x: np.ndarray) -> np.ndarray:
    """float32 mono from a (frames,) or (frames, channels) array, channels averaged."""
    x = np.asarray(x)
    if x.ndim == 2:
        x = x.mean(axis=1) if x.shape[1] > 1 else x[:, 0]
    elif x.ndim != 1:
        raise ValueError(f"expected a 1-D or 2-D sample array, got shape {x.shape}")
    return np.ascontiguousarray(x, dtype=np.float32)


def resample(x: np.ndarray, in_rate: int, out_rate: int) -> np.ndarray:
    """Convert a whole mono signal from `in_rate` to `out_rate` (float32)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if in_rate == out_rate or len(x) == 0:
        return x.copy()
    return soxr.resample(x, in_rate, out_rate, quality=QUALITY).astype(np.float32, copy=False)


class StreamResampler:
    """Converts a mono float32 stream block by block; `flush()` returns the held-back tail."""

    def __init__(self, in_rate: int, out_rate: int):
        self.in_rate = int(in_rate)
        self.out_rate = int(out_rate)
        self._stream = None
        if self.in_rate != self.out_rate:
            self._stream = soxr.ResampleStream(self.in_rate, self.out_rate, 1, dtype="float32",
                                               quality=QUALITY)

    def process(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        if self._stream is None:
            return x.copy()
        return self._stream.resample_chunk(x)

    def flush(self) -> np.ndarray:
        if self._stream is None:
            return np.zeros(0, np.float32)
        return self._stream.resample_chunk(np.zeros(0, np.float32), last=True)

    def reset(self) -> None:
        if self._stream is not None:
            self._stream.clear()


class Reblocker:
    """Cuts a stream of arbitrary-length pieces into blocks of exactly `size` samples."""

    def __init__(self, size: int):
        self.size = int(size)
        self._parts: list[np.ndarray] = []
        self._held = 0

    @property
    def held(self) -> int:
        return self._held

    def push(self, x: np.ndarray) -> list[np.ndarray]:
        if len(x):
            self._parts.append(x)
            self._held += len(x)
        if self._held < self.size:
            return []
        data = np.concatenate(self._parts) if len(self._parts) > 1 else self._parts[0]
        n = (len(data) // self.size) * self.size
        blocks = [data[i:i + self.size] for i in range(0, n, self.size)]
        rest = data[n:]
        self._parts = [rest] if len(rest) else []
        self._held = len(rest)
        return blocks

    def take_rest(self) -> np.ndarray:
        """Whatever is held (less than one block), emptied."""
        data = np.concatenate(self._parts) if self._parts else np.zeros(0, np.float32)
        self._parts, self._held = [], 0
        return data

    def clear(self) -> None:
        self._parts, self._held = [], 0


class Framer:
    """Cuts consecutive `AudioBlock`s into fixed-size frames, each with its capture time.

    Blocks must follow each other in time; when one does not (audio was lost, or the stream
    restarted), the partial frame is dropped, framing restarts at the new block and `gaps`
    counts it.
    """

    def __init__(self, size: int, rate: int = 16_000, tolerance_s: float = 0.005):
        self.size = int(size)
        self.rate = rate
        self.tolerance_s = tolerance_s
        self._frames = Reblocker(size)
        self._t: float | None = None   # time of the first held sample
        self.gaps = 0

    def push(self, block) -> list[tuple[float, np.ndarray]]:
        if self._t is None:
            self._t = block.t
        elif abs(block.t - (self._t + self._frames.held / self.rate)) > self.tolerance_s:
            self.gaps += 1
            self._frames.clear()
            self._t = block.t
        out = []
        for frame in self._frames.push(np.asarray(block.samples, np.float32)):
            out.append((self._t, frame))
            self._t += self.size / self.rate
        return out

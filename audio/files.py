"""Reading audio files, and a file source with the same interface as the microphone.

Any common WAV is accepted (8-bit unsigned, 16/24/32-bit integer, 32/64-bit float, plain or
WAVE_FORMAT_EXTENSIBLE, mono or multichannel, any rate), and FLAC. Decoding is libsndfile's
(through `soundfile`, whose wheels carry the library on Linux, Windows and macOS).
"""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import AsyncIterator

import numpy as np

from .blocks import SAMPLE_RATE, AudioBlock, AudioSource
from .errors import AudioFileError
from .resample import resample, to_mono


@dataclass(frozen=True)
class AudioFileInfo:
    path: str
    sample_rate: int
    channels: int
    frames: int
    format: str   # e.g. "WAV PCM_24", "FLAC PCM_16"

    @property
    def duration_s(self) -> float:
        return self.frames / self.sample_rate


def read_audio_file(path: str | os.PathLike) -> tuple[np.ndarray, AudioFileInfo]:
    """Decode a WAV or FLAC file to float32 of shape (frames, channels) in [-1, 1].

    Raises `AudioFileError` with the reason for a missing, unreadable, corrupt or empty file.
    """
    import soundfile as sf

    path = os.fspath(path)
    if not os.path.exists(path):
        raise AudioFileError(f"audio file not found: {path}")
    if os.path.isdir(path):
        raise AudioFileError(f"{path} is a folder, not an audio file")
    if os.path.getsize(path) == 0:
        raise AudioFileError(f"{path} is empty (0 bytes)")
    try:
        with sf.SoundFile(path) as f:
            data = f.read(dtype="float32", always_2d=True)
            info = AudioFileInfo(path, int(f.samplerate), int(f.channels), len(data),
                                 f"{f.format} {f.subtype}")
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise AudioFileError(
            f"cannot read {path}: not a WAV or FLAC file, or corrupt ({exc})") from exc
    if len(data) == 0:
        raise AudioFileError(f"{path} contains no audio (0 samples)")
    if not np.all(np.isfinite(data)):
        raise AudioFileError(f"{path} contains NaN or infinite samples")
    return data, info


def load_audio(path: str | os.PathLike,
               rate: int = SAMPLE_RATE) -> tuple[np.ndarray, AudioFileInfo]:
    """A file as mono float32 at `rate` (channels averaged, resampled with soxr)."""
    data, info = read_audio_file(path)
    return resample(to_mono(data), info.sample_rate, rate), info


class FileSource(AudioSource):
    """An audio source that replays a file: 16 kHz mono blocks of `block_ms`, like `MicSource`.

    realtime=True paces blocks at the rate they would be captured live (for replay and demos);
    realtime=False yields them as fast as the consumer takes them (tests, benchmarks).
    Block times start at `t0` (default: the monotonic time when iteration starts) and advance
    by the audio's own duration, so they are exact in both modes. `pad_s` appends silence, e.g.
    so a turn that ends with the file still gets its hangover.

        async with FileSource("turn.wav") as src:
            async for block in src:
                ...
    """

    def __init__(self, path: str | os.PathLike, *, realtime: bool = False, block_ms: int = 20,
                 t0: float | None = None, pad_s: float = 0.0):
        if block_ms <= 0:
            raise ValueError("block_ms must be positive")
        self.samples, self.info = load_audio(path)
        if pad_s > 0:
            self.samples = np.concatenate(
                [self.samples, np.zeros(int(round(pad_s * SAMPLE_RATE)), np.float32)])
        self.realtime = realtime
        self.block_size = SAMPLE_RATE * block_ms // 1000
        self.sample_rate = SAMPLE_RATE
        self.overflows = 0  # same counters as MicSource; a file never overflows
        self._t0 = t0

    @property
    def t0(self) -> float | None:
        """Time of the file's first sample (set when iteration starts, unless given)."""
        return self._t0

    @property
    def duration_s(self) -> float:
        return len(self.samples) / SAMPLE_RATE

    async def close(self) -> None:
        pass

    def __aiter__(self) -> AsyncIterator[AudioBlock]:
        return self.blocks()

    async def blocks(self) -> AsyncIterator[AudioBlock]:
        if self._t0 is None:
            self._t0 = time.monotonic()
        t0, size = self._t0, self.block_size
        for start in range(0, len(self.samples), size):
            block = AudioBlock(self.samples[start:start + size], t0 + start / SAMPLE_RATE)
            if self.realtime:
                delay = block.t_end - time.monotonic()
                await asyncio.sleep(max(0.0, delay))
            else:
                await asyncio.sleep(0)  # stay cooperative
            yield block

"""Reading audio files, and a file source with the same interface as the microphone.

Any common WAV is accepted (8-bit unsigned, 16/24/32-bit integer, 32/64-bit float, plain or
WAVE_FORMAT_EXTENSIBLE, mono or multichannel, any rate), and FLAC. Decoding is libsndfile's
(through `soundfile`, whose wheels carry the library on Linux, Windows and macOS).
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from dataclasses import dataclass
from typing import AsyncIterator

import numpy as np

from .blocks import BLOCK_MS, SAMPLE_RATE, AudioBlock, AudioSource
from .errors import AudioFileError
from .resample import Reblocker, StreamResampler, resample, to_mono

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AudioFileInfo:
    path: str
    sample_rate: int
    channels: int
    frames: int
    format: str   # e.g. "WAV PCM_24", "FLAC PCM_16"
    missing_frames: int = 0   # a WAV cut short: frames its header promises beyond those it holds

    @property
    def duration_s(self) -> float:
        return self.frames / self.sample_rate

    def truncation(self) -> str | None:
        """One line saying how much of a cut-short file is missing (None if it is whole)."""
        if not self.missing_frames:
            return None
        promised = (self.frames + self.missing_frames) / self.sample_rate
        return (f"{self.path} is cut short: its header promises {promised:.2f} s of audio, it holds "
                f"{self.duration_s:.2f} s ({self.missing_frames / self.sample_rate:.2f} s missing)")


def promised_wav_frames(path: str) -> int | None:
    """The frame count a WAV's header gives its data chunk (None: not a RIFF WAV, or a length
    left open by a streaming writer)."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
            if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
                return None
            block_align = None
            while (chunk := f.read(8)) and len(chunk) == 8:
                kind, size = chunk[:4], struct.unpack("<I", chunk[4:])[0]
                if kind == b"fmt ":
                    fmt = f.read(size + (size & 1))
                    block_align = struct.unpack("<H", fmt[12:14])[0] if len(fmt) >= 14 else None
                elif kind == b"data":
                    if not block_align or size in (0, 0xFFFFFFFF):
                        return None
                    return size // block_align
                else:
                    f.seek(size + (size & 1), 1)
    except OSError:
        return None
    return None


def write_failure(path: str, exc: Exception) -> str:
    """Why writing `path` failed, in words (libsndfile says only "System error." on a full disk)."""
    import shutil
    try:
        if shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free < 1 << 20:
            return "the disk is full"
    except OSError:
        pass
    return getattr(exc, "strerror", None) or str(exc)


def _check_path(path: str) -> None:
    if not os.path.exists(path):
        raise AudioFileError(f"audio file not found: {path}")
    if os.path.isdir(path):
        raise AudioFileError(f"{path} is a folder, not an audio file")
    try:
        with open(path, "rb") as f:
            if not f.read(1):
                raise AudioFileError(f"{path} is empty (0 bytes)")
    except OSError as exc:   # permission denied, an I/O error: said as such, not "corrupt"
        raise AudioFileError(f"cannot read {path}: {exc.strerror or exc}") from None


def _open(path: str):
    import soundfile as sf

    _check_path(path)
    try:
        f = sf.SoundFile(path)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise AudioFileError(
            f"cannot read {path}: not a WAV or FLAC file, or corrupt ({exc})") from exc
    if f.frames == 0:
        f.close()
        raise AudioFileError(f"{path} contains no audio (0 samples)")
    return f


def audio_file_info(path: str | os.PathLike) -> AudioFileInfo:
    """What a WAV or FLAC file holds, read from its header (nothing is decoded)."""
    path = os.fspath(path)
    with _open(path) as f:
        frames = int(f.frames)
        promised = promised_wav_frames(path) if f.format == "WAV" else None
        return AudioFileInfo(path, int(f.samplerate), int(f.channels), frames, f"{f.format} {f.subtype}",
                             max(0, (promised or 0) - frames))


def _checked(data: np.ndarray, path: str) -> np.ndarray:
    if not np.all(np.isfinite(data)):
        raise AudioFileError(f"{path} contains NaN or infinite samples")
    return data


def read_audio_file(path: str | os.PathLike) -> tuple[np.ndarray, AudioFileInfo]:
    """Decode a WAV or FLAC file to float32 of shape (frames, channels) in [-1, 1].

    Raises `AudioFileError` with the reason for a missing, unreadable, corrupt or empty file.
    """
    import soundfile as sf

    path = os.fspath(path)
    with _open(path) as f:
        try:
            data = f.read(dtype="float32", always_2d=True)
        except (sf.LibsndfileError, RuntimeError) as exc:
            raise AudioFileError(f"cannot read {path}: corrupt ({exc})") from exc
        rate, channels, kind, subtype = int(f.samplerate), int(f.channels), f.format, f.subtype
    if len(data) == 0:
        raise AudioFileError(f"{path} contains no audio (0 samples)")
    promised = promised_wav_frames(path) if kind == "WAV" else None
    info = AudioFileInfo(path, rate, channels, len(data), f"{kind} {subtype}", max(0, (promised or 0) - len(data)))
    if info.truncation():
        log.warning("warning: %s; reading what it holds", info.truncation())
    return _checked(data, path), info


def load_audio(path: str | os.PathLike,
               rate: int = SAMPLE_RATE) -> tuple[np.ndarray, AudioFileInfo]:
    """A file as mono float32 at `rate` (channels averaged, resampled with soxr)."""
    data, info = read_audio_file(path)
    return resample(to_mono(data), info.sample_rate, rate), info


class FileSource(AudioSource):
    """An audio source that replays a file: 16 kHz mono blocks of `block_ms`, like `MicSource`.

    The file is streamed (read, mixed to mono and resampled a chunk at a time), so memory stays
    bounded whatever its length; its header is checked when the source is made.
    realtime=True paces blocks at the rate they would be captured live (for replay and demos);
    realtime=False yields them as fast as the consumer takes them (tests, benchmarks).
    Block times start at `t0` (default: the monotonic time when iteration starts) and advance
    by the audio's own duration, so they are exact in both modes. `pad_s` appends silence, e.g.
    so a turn that ends with the file still gets its hangover.

        async with FileSource("turn.wav") as src:
            async for block in src:
                ...
    """

    CHUNK_S = 0.5   # audio decoded at a time

    def __init__(self, path: str | os.PathLike, *, realtime: bool = False, block_ms: int = BLOCK_MS,
                 t0: float | None = None, pad_s: float = 0.0):
        if block_ms <= 0:
            raise ValueError("block_ms must be positive")
        self.path = os.fspath(path)
        self.info = audio_file_info(self.path)
        if self.info.truncation():   # its last request would be answered as if it were whole
            raise AudioFileError(f"{self.info.truncation()}: refusing to replay it, a request it cuts off "
                                 f"would be answered as if complete; rewrite it with what it holds "
                                 f"(e.g. `sox IN.wav whole.wav`) to replay that")
        self.pad_samples = int(round(max(0.0, pad_s) * SAMPLE_RATE))
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
        audio = int(round(self.info.frames * SAMPLE_RATE / self.info.sample_rate))
        return (audio + self.pad_samples) / SAMPLE_RATE

    async def close(self) -> None:
        pass

    def __aiter__(self) -> AsyncIterator[AudioBlock]:
        return self.blocks()

    def _chunks(self):
        """The file as 16 kHz mono pieces, then the padding."""
        import soundfile as sf

        resampler = StreamResampler(self.info.sample_rate, SAMPLE_RATE)
        read = 0
        with _open(self.path) as f:
            step = max(1, int(self.CHUNK_S * f.samplerate))
            while True:
                try:
                    data = f.read(step, dtype="float32", always_2d=True)
                except (sf.LibsndfileError, RuntimeError) as exc:
                    raise AudioFileError(f"cannot read {self.path}: corrupt ({exc})") from exc
                if not len(data):
                    break
                read += len(data)
                yield resampler.process(to_mono(_checked(data, self.path)))
        if read < self.info.frames:   # cut (or rewritten) while being read: the open turn stays open
            raise AudioFileError(f"{self.path} was cut while being read: it ended at {read / self.info.sample_rate:.2f} s "
                                 f"of the {self.info.duration_s:.2f} s it held; the request it cut off is not answered")
        yield resampler.flush()
        if self.pad_samples:
            yield np.zeros(self.pad_samples, np.float32)

    async def blocks(self) -> AsyncIterator[AudioBlock]:
        if self._t0 is None:
            self._t0 = time.monotonic()
        self._lag = time.monotonic() - self._t0   # pacing follows the clock from now, whatever t0 is
        t0, size, done = self._t0, self.block_size, 0
        blocks = Reblocker(size)
        for chunk in self._chunks():
            for samples in blocks.push(chunk):
                block = AudioBlock(samples, t0 + done / SAMPLE_RATE)
                done += len(samples)
                await self._pace(block)
                yield block
        rest = blocks.take_rest()
        if len(rest):
            block = AudioBlock(rest, t0 + done / SAMPLE_RATE)
            await self._pace(block)
            yield block

    async def _pace(self, block: AudioBlock) -> None:
        if self.realtime:
            await asyncio.sleep(max(0.0, block.t_end + self._lag - time.monotonic()))
        else:
            await asyncio.sleep(0)  # stay cooperative

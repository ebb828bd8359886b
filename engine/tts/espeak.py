"""espeak-ng: offline CPU speech through the `espeak-ng` command, one process per segment,
its WAV output read and handed over in blocks as it arrives."""
from __future__ import annotations

import asyncio
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from foresay.engine.tts.base import PreparationOptions, TtsEngine
from foresay.engine.tts.errors import InvalidTtsConfig, SynthesisFailed, TtsUnavailable
from foresay.engine.tts.prepared import ChunkSink
from foresay.engine.tts.segments import Segment, SegmentJob

INSTALL_HINT = ("install espeak-ng: `sudo apt install espeak-ng` (Debian/Ubuntu), `brew install espeak-ng` "
                "(macOS), or the .msi from https://github.com/espeak-ng/espeak-ng/releases (Windows); "
                "or set the espeak-ng executable's path in the config")


@dataclass(frozen=True)
class EspeakVoice:
    """Voice options, in espeak-ng's own units."""
    voice: str = "en-us"   # espeak-ng voice name or language code (`espeak-ng --voices`), e.g. en-us, de, fr+f3
    rate_wpm: int = 175    # speaking rate in words per minute, 80..450
    pitch: int = 50        # base pitch, 0..99
    amplitude: int = 100   # volume, 0..200

    def __post_init__(self) -> None:
        if not self.voice or not self.voice.strip() or any(c.isspace() for c in self.voice):
            raise InvalidTtsConfig(f"espeak-ng voice must be a name without spaces, got {self.voice!r}")
        for name, value, lo, hi in (("rate_wpm", self.rate_wpm, 80, 450), ("pitch", self.pitch, 0, 99),
                                    ("amplitude", self.amplitude, 0, 200)):
            if not isinstance(value, int) or not lo <= value <= hi:
                raise InvalidTtsConfig(f"espeak-ng {name} must be an integer in {lo}..{hi}, got {value!r}")


@dataclass(frozen=True)
class EspeakConfig:
    executable: str = "espeak-ng"   # command name on PATH, or a full path
    voice: EspeakVoice = field(default_factory=EspeakVoice)  # used when prepare() gets no voice
    block_s: float = 0.25           # audio per chunk handed over while a segment is being read
    use_files: bool | None = None   # text and audio through temp files, not pipes; None: on Windows only
    preparation: PreparationOptions = field(default_factory=PreparationOptions)

    def __post_init__(self) -> None:
        if not self.executable:
            raise InvalidTtsConfig("the espeak-ng executable must be named")
        if not 0.01 <= self.block_s <= 10:
            raise InvalidTtsConfig(f"block_s must be in 0.01..10 seconds, got {self.block_s}")


def find_espeak(executable: str) -> str:
    """The espeak-ng executable's path, or TtsUnavailable saying how to install it."""
    found = shutil.which(executable)
    if found is None and sys.platform == "win32":
        default = os.path.join(os.environ.get("ProgramFiles", r"C:\Program Files"), "eSpeak NG", "espeak-ng.exe")
        found = default if os.path.isfile(default) else None
    if found is None:
        raise TtsUnavailable(f"espeak-ng was not found (looked for {executable!r}); {INSTALL_HINT}")
    return found


def voice_arguments(voice: EspeakVoice) -> list[str]:
    return ["-v", voice.voice, "-s", str(voice.rate_wpm), "-p", str(voice.pitch), "-a", str(voice.amplitude)]


def read_wav_header(stream: BinaryIO) -> int:
    """Reads a streamed 16-bit mono PCM WAV header up to the data; returns the sample rate."""
    riff = _read_exactly(stream, 12)
    if riff[:4] != b"RIFF" or riff[8:12] != b"WAVE":
        raise SynthesisFailed("espeak-ng did not write a WAV stream")
    sample_rate = None
    while True:
        chunk_id, size = struct.unpack("<4sI", _read_exactly(stream, 8))
        if chunk_id == b"data":
            break
        body = _read_exactly(stream, size + (size & 1))
        if chunk_id == b"fmt ":
            fmt, channels, sample_rate, _, _, bits = struct.unpack("<HHIIHH", body[:16])
            if (fmt, channels, bits) != (1, 1, 16):
                raise SynthesisFailed(f"espeak-ng wrote unexpected audio: format {fmt}, {channels} channels, {bits} bits")
    if not sample_rate:
        raise SynthesisFailed("espeak-ng's WAV stream has no format chunk before its data")
    return sample_rate


def _read_exactly(stream: BinaryIO, n: int) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise SynthesisFailed("espeak-ng's output ended inside the WAV header")
    return data


class EspeakJob(SegmentJob):
    """Synthesizes segments one after another, handing audio over in blocks and holding between
    them. Through a pipe (`use_files=False`) blocks go out as espeak-ng writes them, and a hold
    leaves it waiting on the full pipe, using no CPU; a cancel kills it. With files (Windows,
    where espeak-ng's --stdout output is corrupted and piped UTF-8 text misread) each segment's
    text goes in as a UTF-8 file and its audio comes back as a WAV file, read in blocks."""

    def __init__(self, executable: str, voice: EspeakVoice, segments: tuple[Segment, ...], block_s: float,
                 use_files: bool = False) -> None:
        super().__init__(segments)
        self._command = [executable, "-b", "1", *voice_arguments(voice)]
        self._block_s = block_s
        self._use_files = use_files

    def _speak(self, segment: Segment, index: int, sink: ChunkSink) -> bool:
        if self._use_files:
            return self._speak_through_files(segment, index, sink)
        proc = subprocess.Popen([*self._command, "--stdout", "--stdin"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            proc.stdin.write(segment.text.encode("utf-8"))
            proc.stdin.close()
            if not self._stream_wav(proc.stdout, segment, index, sink):
                return False
            if proc.wait() != 0:
                raise SynthesisFailed(f"espeak-ng failed: {proc.stderr.read().decode(errors='replace').strip()}")
            return True
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()

    def _speak_through_files(self, segment: Segment, index: int, sink: ChunkSink) -> bool:
        with tempfile.TemporaryDirectory(prefix="foresay-espeak-") as folder:
            text_file, wav_file = Path(folder, "text.txt"), Path(folder, "speech.wav")
            text_file.write_text(segment.text, encoding="utf-8")
            done = subprocess.run([*self._command, "-f", str(text_file), "-w", str(wav_file)],
                                  capture_output=True, check=False)
            if done.returncode != 0 or not wav_file.is_file():
                raise SynthesisFailed(f"espeak-ng failed: {done.stderr.decode(errors='replace').strip()}")
            with wav_file.open("rb") as wav:
                return self._stream_wav(wav, segment, index, sink)

    def _stream_wav(self, stream: BinaryIO, segment: Segment, index: int, sink: ChunkSink) -> bool:
        rate = read_wav_header(stream)
        block = 2 * max(1, int(self._block_s * rate))
        while data := stream.read(block):
            if len(data) % 2:  # a stray half sample can only come at the very end
                data = data[:-1]
            sink.emit(np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0, rate, segment.span, index)
            if not sink.proceed():
                return False
        return True


class EspeakEngine(TtsEngine):
    name = "espeak"

    def __init__(self, config: EspeakConfig = EspeakConfig()) -> None:
        super().__init__(config.preparation)
        self.config = config
        self._executable = find_espeak(config.executable)
        self._known_voices: set[str] = set()
        self._sample_rate: int | None = None

    @property
    def sample_rate(self) -> int:
        if self._sample_rate is None:
            self._sample_rate = self._probe_sample_rate(self.config.voice)
        return self._sample_rate

    def _probe_sample_rate(self, voice: EspeakVoice) -> int:
        out = subprocess.run([self._executable, "--stdout", *voice_arguments(voice), "a"],
                             capture_output=True, check=False)
        if out.returncode != 0:
            raise SynthesisFailed(f"espeak-ng failed: {out.stderr.decode(errors='replace').strip()}")
        return struct.unpack("<I", out.stdout[24:28])[0]

    def _resolve_voice(self, voice: EspeakVoice | None) -> EspeakVoice:
        voice = self.config.voice if voice is None else voice
        if not isinstance(voice, EspeakVoice):
            raise InvalidTtsConfig(f"the espeak-ng engine takes an EspeakVoice, got {type(voice).__name__}")
        if voice.voice not in self._known_voices:
            probe = subprocess.run([self._executable, "-q", "-v", voice.voice, "a"], capture_output=True, check=False)
            if probe.returncode != 0:
                raise InvalidTtsConfig(f"espeak-ng has no voice {voice.voice!r} (see `espeak-ng --voices`): "
                                       f"{probe.stderr.decode(errors='replace').strip()}")
            self._known_voices.add(voice.voice)
        return voice

    def _make_job(self, segments: tuple[Segment, ...], voice: EspeakVoice) -> EspeakJob:
        use_files = sys.platform == "win32" if self.config.use_files is None else self.config.use_files
        return EspeakJob(self._executable, voice, segments, self.config.block_s, use_files)

    async def _load(self) -> None:
        await asyncio.to_thread(lambda: (self._resolve_voice(None), self.sample_rate))

"""Helpers for the audio tests: espeak-ng speech, WAV files written by hand, ALSA FIFO devices.

Not a test module; the test_audio_* files import it.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import struct
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from foresay.audio.blocks import SAMPLE_RATE
from foresay.audio.files import load_audio

# --- speech ----------------------------------------------------------------------------------


def espeak(text: str, path: Path, voice: str | None = None) -> Path:
    """Render `text` with espeak-ng (installed by packaging/bootstrap.sh) to a WAV file."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        pytest.fail("espeak-ng is not installed; run `bash packaging/bootstrap.sh test`")
    cmd = [exe, "-w", str(path)]
    if voice:
        cmd += ["-v", voice]
    subprocess.run(cmd + [text], check=True, capture_output=True, timeout=60)
    return path


def speech_extent(x: np.ndarray, rel_db: float = -35.0, win: int = 160) -> tuple[float, float]:
    """(first, last) time in seconds where 10 ms RMS comes within rel_db of the peak."""
    n = len(x) // win
    env = np.sqrt(np.mean(np.square(x[:n * win].reshape(n, win), dtype=np.float64), axis=1))
    idx = np.flatnonzero(env > env.max() * 10 ** (rel_db / 20))
    return idx[0] * win / SAMPLE_RATE, (idx[-1] + 1) * win / SAMPLE_RATE


def normalize_active(x: np.ndarray, level_db: float) -> np.ndarray:
    """Scale speech so its active (non-silent) 30 ms frames have RMS `level_db` dBFS."""
    n = len(x) // 480
    env = np.mean(np.square(x[:n * 480].reshape(n, 480), dtype=np.float64), axis=1)
    active = env > env.max() * 1e-3
    return (x * np.sqrt(10 ** (level_db / 10) / env[active].mean())).astype(np.float32)


@dataclass
class Clip:
    samples: np.ndarray   # 16 kHz mono float32
    speech_start: float   # truth, seconds from the clip's start
    speech_end: float


def speech_clip(tmp: Path, text: str, *, voice: str | None = None, before_s: float = 1.0,
                after_s: float = 2.0, noise_db: float = -55.0, level_db: float = -20.0,
                seed: int = 0) -> Clip:
    """espeak-ng speech at `level_db`, padded with silence, over white noise at `noise_db`."""
    path = espeak(text, tmp / f"speech_{abs(hash((text, voice))) % 10**8}.wav", voice)
    x, _ = load_audio(path)
    a, b = speech_extent(x)
    x = normalize_active(x[int(a * SAMPLE_RATE):int(b * SAMPLE_RATE)], level_db)
    pad0, pad1 = (np.zeros(int(s * SAMPLE_RATE), np.float32) for s in (before_s, after_s))
    y = np.concatenate([pad0, x, pad1])
    y += np.random.default_rng(seed).normal(0, 10 ** (noise_db / 20), len(y)).astype(np.float32)
    return Clip(y.astype(np.float32), before_s, before_s + len(x) / SAMPLE_RATE)


def piper_speech(model, text: str, level_db: float = -20.0) -> np.ndarray:
    """`text` in a loaded Piper voice (tests' `piper_model`), at SAMPLE_RATE, trimmed to the speech,
    its active frames at `level_db`; without sampling noise, so the same text gives the same audio."""
    import soxr

    from foresay.engine.tts.piper_model import PiperStyle

    audio = np.concatenate([model.decode(*model.encode(ids, PiperStyle(noise_scale=0, noise_w=0))) for ids in model.phoneme_ids(text)])
    x = soxr.resample(audio, model.sample_rate, SAMPLE_RATE).astype(np.float32)
    a, b = speech_extent(x)
    return normalize_active(x[int(a * SAMPLE_RATE):int(b * SAMPLE_RATE)], level_db)


# --- WAV files by hand (independent of the reader under test) --------------------------------

_PCM_GUID = bytes.fromhex("0100000000001000800000aa00389b71")
_FLOAT_GUID = bytes.fromhex("0300000000001000800000aa00389b71")


def write_wav(path: Path, x: np.ndarray, rate: int, kind: str, *, extensible: bool = False) -> Path:
    """x: float in [-1, 1], shape (frames,) or (frames, channels). kind: u8, s16, s24, s32,
    f32 or f64."""
    x = np.asarray(x, np.float64)
    if x.ndim == 1:
        x = x[:, None]
    frames, channels = x.shape
    if kind == "u8":
        data, bits, tag = np.clip(np.round(x * 127 + 128), 0, 255).astype(np.uint8).tobytes(), 8, 1
    elif kind == "s16":
        data, bits, tag = np.round(x * 32767).astype("<i2").tobytes(), 16, 1
    elif kind == "s24":
        v = np.round(x * (2**23 - 1)).astype("<i4").reshape(-1)
        data = np.stack([(v >> s) & 0xFF for s in (0, 8, 16)], axis=1).astype(np.uint8).tobytes()
        bits, tag = 24, 1
    elif kind == "s32":
        data, bits, tag = np.round(x * (2**31 - 1)).astype("<i4").tobytes(), 32, 1
    elif kind == "f32":
        data, bits, tag = x.astype("<f4").tobytes(), 32, 3
    elif kind == "f64":
        data, bits, tag = x.astype("<f8").tobytes(), 64, 3
    else:
        raise ValueError(kind)
    align = channels * bits // 8
    if extensible:
        fmt = struct.pack("<HHIIHHHHI", 0xFFFE, channels, rate, rate * align, align, bits, 22, bits,
                          (1 << channels) - 1) + (_FLOAT_GUID if tag == 3 else _PCM_GUID)
    else:
        fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * align, align, bits)
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt
    if tag == 3 or extensible:
        chunks += b"fact" + struct.pack("<II", 4, frames)
    chunks += b"data" + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")
    Path(path).write_bytes(b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks)
    return Path(path)


# --- ALSA devices made of FIFOs ---------------------------------------------------------------

F_SETPIPE_SZ = 1031

ALSA_CONF = """
pcm.!default {{
  type asym
  playback.pcm "foresay_out"
  capture.pcm "foresay_in"
}}
pcm.foresay_in {{
  type plug
  slave {{ pcm "foresay_in_file"; format S16_LE; rate {rate}; channels {channels} }}
}}
pcm.foresay_in_file {{
  type file
  slave.pcm "foresay_null"
  file "/dev/null"
  infile "{infile}"
  format "raw"
}}
pcm.foresay_out {{
  type plug
  slave {{ pcm "foresay_out_file"; format S16_LE; rate {rate}; channels {channels} }}
}}
pcm.foresay_out_file {{
  type file
  slave.pcm "foresay_null"
  file "{outfile}"
  format "raw"
}}
pcm.foresay_null {{ type null }}
"""


class AlsaFifoDevices:
    """Real ALSA capture and playback devices whose other ends are FIFOs driven by this test.

    alsa-lib's `file` plugin reads the capture data from one FIFO and writes the playback data
    to another; the `null` plugin underneath has no clock, so a feeder thread paces capture in
    real time (ALSA blocks reading the FIFO) and a drain thread paces playback. PortAudio sees
    them as ordinary ALSA devices ("default", "foresay_in", "foresay_out").
    """

    def __init__(self, tmp: Path, rate: int = 48_000, channels: int = 1, feed_ms: int = 20,
                 noise_db: float = -60.0):
        self.rate, self.channels = rate, channels
        self.noise = 10 ** (noise_db / 20) * 32768   # the mic's own hiss, always there
        self._rng = np.random.default_rng(0)
        self.feed_ms = feed_ms   # must equal the capture stream's block (ALSA reads one per call)
        self.infile, self.outfile = tmp / "capture.fifo", tmp / "playback.fifo"
        os.mkfifo(self.infile)
        os.mkfifo(self.outfile)
        # Holding both ends open keeps alsa-lib's opens from blocking.
        self._in_fd = os.open(self.infile, os.O_RDWR)
        self._out_fd = os.open(self.outfile, os.O_RDWR)
        for fd in (self._in_fd, self._out_fd):
            fcntl.fcntl(fd, F_SETPIPE_SZ, 4096)
            os.set_blocking(fd, False)
        self.conf = tmp / "asound.conf"
        self.conf.write_text(ALSA_CONF.format(rate=rate, channels=channels, infile=self.infile,
                                              outfile=self.outfile))
        self._pending = bytearray()
        self.loopback_gain: float | None = None
        self._loop_lag = 0       # capture sample k carries played sample k - lag
        self._fed = 0            # capture samples written so far
        self._lock = threading.Lock()
        self.captured_out = bytearray()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._feed, daemon=True),
                         threading.Thread(target=self._drain, daemon=True)]

    def start(self) -> None:
        for th in self._threads:
            th.start()

    def loop_back(self, gain_db: float | None, delay_ms: float = 20.0) -> None:
        """Feed what is played back into the capture at `gain_db` (None: off), like a
        speaker leaking into the mic. Both FIFOs run at the same pace, so the path is a fixed
        number of samples, as on a sound card whose input and output share a clock."""
        with self._lock:
            played = len(self.captured_out) // (2 * self.channels)
            self._loop_lag = self._fed - played + int(delay_ms * self.rate / 1000)
            self.loopback_gain = None if gain_db is None else 10 ** (gain_db / 20)

    def play_into_mic(self, x: np.ndarray) -> None:
        """Queue float samples (at the device rate) to be 'captured'; silence otherwise."""
        pcm = np.round(np.clip(x, -1, 1) * 32767).astype("<i2")
        if self.channels > 1:
            pcm = np.repeat(pcm[:, None], self.channels, axis=1)
        with self._lock:
            self._pending.extend(pcm.tobytes())

    def pending_s(self) -> float:
        with self._lock:
            return len(self._pending) / (2 * self.channels * self.rate)

    def output(self) -> np.ndarray:
        """What the playback device received so far, as float mono."""
        with self._lock:
            frame = 2 * self.channels
            data = bytes(self.captured_out[:len(self.captured_out) // frame * frame])
        pcm = np.frombuffer(data, "<i2").reshape(-1, self.channels)[:, 0]
        return pcm.astype(np.float32) / 32768

    def _paced(self, step_bytes: int, action) -> None:
        bytes_per_s = 2 * self.channels * self.rate
        t0, done = time.monotonic(), 0
        while not self._stop.is_set():
            action(step_bytes)
            done += step_bytes
            delay = t0 + done / bytes_per_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def _feed(self) -> None:
        def write(n):
            with self._lock:
                chunk = bytes(self._pending[:n])
                del self._pending[:n]
                chunk += bytes(n - len(chunk))
                pcm = np.frombuffer(chunk, "<i2").astype(np.float32)
                if self.loopback_gain is not None and self.channels == 1:
                    a = self._fed - self._loop_lag
                    played = np.frombuffer(
                        self.captured_out[max(0, 2 * a):2 * (a + len(pcm))], "<i2")
                    start = max(0, -a)
                    m = min(len(played), len(pcm) - start)
                    pcm[start:start + m] += played[:m] * self.loopback_gain
                self._fed += len(pcm) // self.channels
            pcm += self._rng.normal(0, self.noise, len(pcm))
            chunk = np.clip(np.round(pcm), -32768, 32767).astype("<i2").tobytes()
            while chunk and not self._stop.is_set():
                try:
                    chunk = chunk[os.write(self._in_fd, chunk):]
                except BlockingIOError:   # ALSA has not read yet
                    time.sleep(0.001)
        self._paced(2 * self.channels * self.rate * self.feed_ms // 1000, write)

    def _drain(self) -> None:
        def read(n):
            while n > 0 and not self._stop.is_set():
                try:
                    b = os.read(self._out_fd, n)
                except BlockingIOError:   # nothing played yet
                    time.sleep(0.001)
                    continue
                n -= len(b)
                with self._lock:
                    self.captured_out.extend(b)
        self._paced(2 * self.channels * self.rate // 100, read)

    def stop(self) -> None:
        self._stop.set()
        for th in self._threads:
            th.join(timeout=2)
        os.close(self._in_fd)
        os.close(self._out_fd)


def reinit_portaudio() -> None:
    import sounddevice as sd

    sd._terminate()
    sd._initialize()


@pytest.fixture
def alsa_fifo(tmp_path, monkeypatch):
    """PortAudio re-initialised over AlsaFifoDevices; restored afterwards."""
    pytest.importorskip("sounddevice")
    devices = AlsaFifoDevices(tmp_path)
    monkeypatch.setenv("ALSA_CONFIG_PATH", str(devices.conf))
    reinit_portaudio()
    devices.start()
    try:
        yield devices
    finally:
        devices.stop()
        monkeypatch.undo()
        reinit_portaudio()

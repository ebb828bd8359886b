"""Reading audio files: every common WAV layout, FLAC, bad files; the file source; `foresay vad`."""
from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest
from audio_kit import speech_clip, write_wav

from foresay.app.cli import main
from foresay.audio.blocks import SAMPLE_RATE, AudioSource
from foresay.audio.errors import AudioFileError
from foresay.audio.files import FileSource, load_audio, read_audio_file


def tone(rate: int, seconds: float = 0.5, freq: float = 440.0, channels: int = 1) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    x = 0.5 * np.sin(2 * np.pi * freq * t)
    if channels == 1:
        return x
    return np.stack([x * (1 - 0.25 * c) for c in range(channels)], axis=1)


def snr_db(got: np.ndarray, want: np.ndarray) -> float:
    n = min(len(got), len(want))
    err = got[:n] - want[:n]
    return 10 * np.log10(np.sum(want[:n] ** 2) / max(np.sum(err ** 2), 1e-20))


# 8-bit unsigned keeps ~40 dB at half scale; everything else is limited by the resampler (> 90 dB).
FORMATS = [("u8", False, 35), ("s16", False, 80), ("s24", False, 90), ("s32", False, 90),
           ("f32", False, 90), ("f64", False, 90), ("s16", True, 80), ("s24", True, 90),
           ("f32", True, 90)]


@pytest.mark.parametrize("kind,extensible,min_snr", FORMATS)
@pytest.mark.parametrize("rate,channels", [(16000, 1), (44100, 2), (48000, 1), (8000, 2)])
def test_every_wav_layout_decodes_to_16k_mono(tmp_path, kind, extensible, min_snr, rate, channels):
    x = tone(rate, channels=channels)
    path = write_wav(tmp_path / "in.wav", x, rate, kind, extensible=extensible)
    data, info = read_audio_file(path)
    assert (info.sample_rate, info.channels, info.frames) == (rate, channels, len(x))
    mono, _ = load_audio(path)
    want = tone(SAMPLE_RATE, channels=channels)
    if channels > 1:
        want = want.mean(axis=1)
    assert mono.dtype == np.float32 and mono.ndim == 1
    assert len(mono) == pytest.approx(len(want), abs=1)
    edge = SAMPLE_RATE // 50   # resampler edge effects at the very start and end
    assert snr_db(mono[edge:-edge], want[edge:-edge]) > min_snr


def test_flac_is_read(tmp_path):
    import soundfile as sf

    x = tone(22050)
    sf.write(tmp_path / "a.flac", x, 22050, subtype="PCM_16")
    mono, info = load_audio(tmp_path / "a.flac")
    assert info.sample_rate == 22050 and info.format.startswith("FLAC")
    assert snr_db(mono[320:-320], tone(SAMPLE_RATE)[320:-320]) > 60


def test_bad_files_give_clear_errors(tmp_path):
    with pytest.raises(AudioFileError, match="not found"):
        read_audio_file(tmp_path / "missing.wav")
    (tmp_path / "empty.wav").write_bytes(b"")
    with pytest.raises(AudioFileError, match="empty"):
        read_audio_file(tmp_path / "empty.wav")
    (tmp_path / "text.wav").write_text("this is not audio at all, just some words\n" * 20)
    with pytest.raises(AudioFileError, match="corrupt"):
        read_audio_file(tmp_path / "text.wav")
    good = write_wav(tmp_path / "good.wav", tone(16000), 16000, "s16").read_bytes()
    (tmp_path / "cut.wav").write_bytes(good[:30])            # header cut short
    with pytest.raises(AudioFileError, match="corrupt"):
        read_audio_file(tmp_path / "cut.wav")
    write_wav(tmp_path / "silent.wav", np.zeros(0), 16000, "s16")  # valid header, no frames
    with pytest.raises(AudioFileError, match="no audio"):
        read_audio_file(tmp_path / "silent.wav")
    with pytest.raises(AudioFileError, match="folder"):
        read_audio_file(tmp_path)


def test_file_source_blocks_and_times(tmp_path):
    path = write_wav(tmp_path / "a.wav", tone(48000, seconds=1.03), 48000, "s16")
    src = FileSource(path, block_ms=20, t0=100.0, pad_s=0.5)
    assert isinstance(src, AudioSource)

    async def collect():
        async with src:
            return [b async for b in src]

    blocks = asyncio.run(collect())
    assert all(len(b.samples) == 320 for b in blocks[:-1]) and 0 < len(blocks[-1].samples) <= 320
    assert sum(len(b.samples) for b in blocks) == int(1.53 * SAMPLE_RATE)
    assert blocks[0].t == 100.0
    for a, b in zip(blocks, blocks[1:]):
        assert b.t == pytest.approx(a.t_end)
    assert src.duration_s == pytest.approx(1.53)


def test_file_source_real_time_pacing(tmp_path):
    path = write_wav(tmp_path / "a.wav", tone(16000, seconds=0.4), 16000, "s16")

    async def run():
        t_start = time.monotonic()
        lags = []
        async for block in FileSource(path, realtime=True):
            lags.append(time.monotonic() - block.t_end)
        return time.monotonic() - t_start, lags

    elapsed, lags = asyncio.run(run())
    assert elapsed >= 0.39
    assert all(-0.001 <= lag < 0.05 for lag in lags)   # each block handed out once captured


def test_vad_command_prints_turns(tmp_path, capsys):
    clip = speech_clip(tmp_path, "What is the capital of Australia?", voice="en-us",
                       before_s=0.7, after_s=1.5)
    stereo = np.stack([clip.samples, clip.samples], axis=1)
    path = write_wav(tmp_path / "turn.wav", stereo, 16000, "s24")
    assert main(["vad", str(path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"turns", "sample_rate", "duration_s"}
    assert result["sample_rate"] == 16000
    assert result["duration_s"] == pytest.approx(len(clip.samples) / SAMPLE_RATE, abs=1e-3)
    [turn] = result["turns"]
    assert set(turn) == {"start_s", "last_voiced_s", "end_declared_s"}
    assert turn["start_s"] == pytest.approx(clip.speech_start, abs=0.031)
    assert turn["last_voiced_s"] == pytest.approx(clip.speech_end, abs=0.031)
    assert 0.7 - 1e-3 <= turn["end_declared_s"] - turn["last_voiced_s"] < 0.731

    assert main(["vad", str(path), "--mode", "push-to-talk", "--press", "0.2:1.5"]) == 0
    out = capsys.readouterr().out
    assert "1 turn(s)" in out and "start 0.20 s" in out and "end declared 1.50 s" in out

    assert main(["vad", str(tmp_path / "nope.wav")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["vad", str(path), "--mode", "push-to-talk"]) == 2
    assert "--press" in capsys.readouterr().err


def test_an_unreadable_file_is_reported_as_such(tmp_path, monkeypatch):
    from foresay.audio import files

    path = write_wav(tmp_path / "a.wav", tone(16000), 16000, "s16")

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(files, "open", denied, raising=False)
    with pytest.raises(AudioFileError, match="Permission denied") as err:
        FileSource(path)
    assert "not a WAV" not in str(err.value)


def test_a_header_only_wav_is_refused_when_the_source_is_made(tmp_path):
    path = write_wav(tmp_path / "silent.wav", np.zeros(0), 16000, "s16")
    with pytest.raises(AudioFileError, match="no audio"):
        FileSource(path)


def test_file_source_streams_a_long_multichannel_file_in_bounded_memory(tmp_path):
    """20 s of 48 kHz 6-channel audio (23 MB as float32) is replayed holding well under 2 MB."""
    import tracemalloc

    path = write_wav(tmp_path / "long.wav", tone(48000, seconds=20.0, channels=6), 48000, "s16")
    want = load_audio(path)[0]

    async def replay():
        got, peak = [], 0
        tracemalloc.start()
        try:
            async for block in FileSource(path):
                got.append(block.samples[::40].copy())   # keep a thinned copy to compare
                peak = max(peak, tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        return np.concatenate(got), peak

    thinned, peak = asyncio.run(replay())
    assert peak < 2_000_000
    assert len(thinned) == len(want[::40]) or abs(len(thinned) - len(want[::40])) <= 8
    n = min(len(thinned), len(want[::40]))
    assert snr_db(thinned[10:n - 10], want[::40][10:n - 10]) > 60

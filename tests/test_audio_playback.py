"""Playback through the WAV sink: timing, pre-buffer, underruns, flush and the played span."""
from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from foresay.audio.files import read_audio_file
from foresay.audio.playback import PlaybackConfig
from foresay.audio.wav_sink import WavSink
from foresay.engine.events import AudioChunk

TTS_RATE = 22050


def tone(seconds: float, freq: float = 300.0, rate: int = TTS_RATE) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.4 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def loud_extent(x: np.ndarray, rate: int) -> tuple[float, float]:
    win = rate // 100
    n = len(x) // win
    env = np.sqrt(np.mean(x[:n * win].reshape(n, win) ** 2, axis=1))
    idx = np.flatnonzero(env > 0.05)
    return idx[0] / 100, (idx[-1] + 1) / 100


def test_flush_stops_within_a_block_and_reports_the_played_span(tmp_path):
    text = "The first sentence is short. The second one is a good deal longer than that."
    s1, s2 = text[:28], text[29:]

    async def run():
        sink = WavSink(tmp_path / "out.wav", 24000, realtime=True,
                       config=PlaybackConfig(block_ms=10, prebuffer_ms=40))
        async with sink:
            t_enqueue = time.monotonic()
            t1 = await sink.enqueue(tone(1.0), TTS_RATE, span=(0, 28), text=s1)
            t2 = await sink.play(AudioChunk(turn_id=1, t=0.0, samples=tone(2.0, 500.0),
                                            sample_rate=TTS_RATE, span=(29, len(text))))
            start1 = await t1.started
            await asyncio.sleep(1.6 - (time.monotonic() - start1))
            t_flush = time.monotonic()
            played = sink.flush()
            start2, end1 = await t2.started, await t1.finished
            await asyncio.sleep(0.3)
            return t_enqueue, start1, end1, start2, t_flush, played, t2

    t_enqueue, start1, end1, start2, t_flush, played, t2 = asyncio.run(run())
    assert 0 <= start1 - t_enqueue < 0.05              # pre-buffer is met at once
    assert end1 - start1 == pytest.approx(1.0, abs=1e-3)
    assert start2 == pytest.approx(end1, abs=1e-3)      # back to back
    assert t2.finished.result() is None                 # flushed before its end
    heard = t_flush - start1
    assert played.seconds == pytest.approx(heard, abs=0.012)
    assert played.samples == pytest.approx(heard * TTS_RATE, abs=0.012 * TTS_RATE)
    assert (played.chunks_started, played.chunks_total, played.complete) == (2, 2, False)
    # 0.6 s of 2 s of the second sentence was heard: its first words, whole.
    a, b = played.text_span
    assert a == 0 and 29 < b < 29 + len(s2) * 0.35
    assert text[b - 1].isalpha() and text[b] == " "
    assert played.end_t == pytest.approx(t_flush, abs=0.015)
    # The file holds exactly what was heard, then silence (output stopped within one block).
    x, info = read_audio_file(tmp_path / "out.wav")
    on, off = loud_extent(x[:, 0], info.sample_rate)
    assert off - on == pytest.approx(heard, abs=0.011)


def test_prebuffer_end_reply_and_drain(tmp_path):
    async def run():
        sink = WavSink(tmp_path / "out.wav", 16000, realtime=True,
                       config=PlaybackConfig(prebuffer_ms=200))
        async with sink:
            short = await sink.enqueue(tone(0.1), TTS_RATE, span=(0, 5))
            await asyncio.sleep(0.15)
            waited = short.started.done()                 # below the pre-buffer: not yet
            t_end = time.monotonic()
            played = await sink.drain()                   # end_reply() lets it play
            return waited, t_end, short, played, sink.underruns

    waited, t_end, short, played, underruns = asyncio.run(run())
    assert not waited
    assert short.started.result() >= t_end - 0.011      # within the block being written
    assert played.complete and played.text_span == (0, 5) and underruns == 0
    assert played.samples == len(tone(0.1))


def test_underruns_are_filled_with_silence_and_counted(tmp_path):
    async def run():
        sink = WavSink(tmp_path / "out.wav", 16000, realtime=True,
                       config=PlaybackConfig(prebuffer_ms=20))
        async with sink:
            first = await sink.enqueue(tone(0.2), TTS_RATE)
            await asyncio.sleep(0.4)                      # the TTS is late with the next one
            second = await sink.enqueue(tone(0.2), TTS_RATE)
            played = await sink.drain()
            return sink.underruns, played, await first.finished, await second.started

    underruns, played, end1, start2 = asyncio.run(run())
    assert underruns == 1
    assert start2 - end1 == pytest.approx(0.2, abs=0.03)  # a gap of silence, then on
    assert played.complete and played.seconds == pytest.approx(0.4, abs=1e-3)


def test_bounded_buffer_makes_enqueue_wait(tmp_path):
    async def run():
        sink = WavSink(tmp_path / "out.wav", 16000, realtime=True,
                       config=PlaybackConfig(max_buffer_s=0.3, prebuffer_ms=10))
        async with sink:
            await sink.enqueue(tone(0.25), TTS_RATE)
            t0 = time.monotonic()
            await sink.enqueue(tone(0.25), TTS_RATE)      # must wait for room
            waited = time.monotonic() - t0
            sink.flush()
            return waited

    assert asyncio.run(run()) >= 0.15


def test_unpaced_wav_sink_writes_replies_back_to_back(tmp_path):
    async def run():
        sink = WavSink(tmp_path / "out.wav", 24000, realtime=False)
        async with sink:
            for _ in range(3):
                await sink.enqueue(tone(0.5), TTS_RATE)
            t0 = time.monotonic()
            played = await sink.drain()
            return played, time.monotonic() - t0, sink.samples_written

    played, took, written = asyncio.run(run())
    assert played.complete and played.seconds == pytest.approx(1.5, abs=1e-3)
    assert took < 0.5 and written == pytest.approx(1.5 * 24000, abs=3)
    x, info = read_audio_file(tmp_path / "out.wav")
    assert info.frames == written


def test_sink_writes_the_echo_reference(tmp_path):
    async def run():
        sink = WavSink(tmp_path / "out.wav", 48000, realtime=True,
                       config=PlaybackConfig(prebuffer_ms=10))
        async with sink:
            ticket = await sink.enqueue(tone(0.3, 440.0), TTS_RATE)
            await sink.drain()
            return sink.reference, await ticket.started

    ref, started = asyncio.run(run())
    x = ref.read(started - 0.1, 8000)                    # 16 kHz: 0.1 s before to 0.4 s after
    on, off = loud_extent(x, 16000)
    assert on == pytest.approx(0.1, abs=0.011) and off - on == pytest.approx(0.3, abs=0.011)
    assert ref.active(started + 0.3) and not ref.active(started + 2.0)


def test_a_paused_reply_is_silent_then_plays_on_from_where_it_stopped(tmp_path):
    """pause() silences the output within a block and drops nothing; resume() plays the rest; no
    underrun is counted for the wait."""
    async def run():
        sink = WavSink(tmp_path / "out.wav", 16000, realtime=True, config=PlaybackConfig(prebuffer_ms=20))
        async with sink:
            ticket = await sink.enqueue(tone(1.0), TTS_RATE, span=(0, 10))
            start = await ticket.started
            await asyncio.sleep(0.3 - (time.monotonic() - start))
            sink.pause()
            await asyncio.sleep(0.5)
            sink.resume()
            played = await sink.drain()
            return start, await ticket.finished, played, sink.underruns

    start, end, played, underruns = asyncio.run(run())
    assert end - start == pytest.approx(1.5, abs=0.03)   # 1 s of audio around a 0.5 s wait
    assert played.complete and played.seconds == pytest.approx(1.0, abs=1e-3) and underruns == 0
    x, info = read_audio_file(tmp_path / "out.wav")
    win = info.sample_rate // 100
    env = np.sqrt(np.mean(x[:len(x) // win * win, 0].reshape(-1, win) ** 2, axis=1)) > 0.05
    loud = np.flatnonzero(env)
    gaps = np.flatnonzero(np.diff(loud) > 1)
    assert len(gaps) == 1 and (loud[gaps[0] + 1] - loud[gaps[0]]) / 100 == pytest.approx(0.5, abs=0.03)

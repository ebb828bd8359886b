"""The fault paths of capture and playback, with a stand-in for PortAudio's stream on real ALSA
devices: busy and vanishing devices, streams that die or stall, overflows, a stalled loop."""
from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from audio_kit import alsa_fifo  # noqa: F401  (a fixture)

from foresay.audio import devices as devices_mod
from foresay.audio.capture import MicConfig, MicSource
from foresay.audio.errors import AudioDeviceLost, DeviceUnavailable
from foresay.audio.playback import DeviceSink, PlaybackConfig


# --- faults, with a stand-in for PortAudio's stream ---------------------------------------------


class FakeInputStream:
    """Calls back like PortAudio from its own thread; `stop_after` blocks it dies."""

    instances: list["FakeInputStream"] = []

    def __init__(self, *, samplerate, channels, blocksize, callback, finished_callback,
                 stop_after=None, overflow_every=None, **_):
        self.rate, self.channels, self.blocksize = samplerate, channels, blocksize
        self.callback, self.finished = callback, finished_callback
        self.stop_after, self.overflow_every = stop_after, overflow_every
        self.latency = 0.01
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        FakeInputStream.instances.append(self)

    def start(self):
        self._thread.start()

    def _run(self):
        n = 0
        while not self._stop.is_set():
            time.sleep(self.blocksize / self.rate)
            now = time.monotonic()
            info = SimpleNamespace(inputBufferAdcTime=now - 0.02, currentTime=now)
            status = SimpleNamespace(
                input_overflow=bool(self.overflow_every and n % self.overflow_every == 1))
            self.callback(np.zeros((self.blocksize, self.channels), np.float32), self.blocksize,
                          info, status)
            n += 1
            if self.stop_after is not None and n >= self.stop_after:
                self.finished()     # PortAudio ends a stream whose device went away
                return

    def abort(self):
        self._stop.set()

    def close(self):
        self._stop.set()


def take(mic: MicSource, n: int):
    async def run():
        blocks = []
        async with mic:
            async for block in mic:
                blocks.append(block)
                if len(blocks) >= n:
                    return blocks
    return asyncio.run(asyncio.wait_for(run(), 10))


def test_busy_device_is_reported_clearly(alsa_fifo):
    sd = devices_mod.sd()

    def busy(**kw):
        raise sd.PortAudioError("Device unavailable", -9985)
    with pytest.raises(DeviceUnavailable, match="'default' is busy or unavailable"):
        take(MicSource(MicConfig(device="default"), stream_factory=busy), 1)


def test_a_stream_that_dies_is_reopened(alsa_fifo):
    notices = []
    made = []

    def factory(**kw):
        made.append(FakeInputStream(stop_after=5 if not made else None, **kw))
        return made[-1]
    mic = MicSource(MicConfig(device="default", reopen_backoff_s=0.05), stream_factory=factory,
                    on_notice=notices.append)
    blocks = take(mic, 20)
    assert len(made) == 2 and mic.reopens == 1
    assert any("reopening" in n for n in notices) and any("reopened" in n for n in notices)
    assert len(blocks) == 20


def test_a_device_that_never_comes_back_tells_the_pipeline(alsa_fifo):
    sd = devices_mod.sd()
    made = []

    def factory(**kw):
        if made:
            raise sd.PortAudioError("Device unavailable", -9985)
        made.append(FakeInputStream(stop_after=3, **kw))
        return made[-1]
    mic = MicSource(MicConfig(device="default", reopen_attempts=2, reopen_backoff_s=0.01),
                    stream_factory=factory, on_notice=lambda m: None)
    with pytest.raises(AudioDeviceLost, match="could not be reopened after 2 attempts"):
        take(mic, 50)


def test_a_silent_stall_is_detected(alsa_fifo):
    class Stalled(FakeInputStream):
        def _run(self):
            pass    # never calls back, never finishes

    made = []

    def factory(**kw):
        made.append((Stalled if not made else FakeInputStream)(**kw))
        return made[-1]
    mic = MicSource(MicConfig(device="default", stall_timeout_s=0.2, reopen_backoff_s=0.01),
                    stream_factory=factory, on_notice=lambda m: None)
    assert len(take(mic, 3)) == 3 and mic.reopens == 1


def test_overflows_are_counted_not_fatal(alsa_fifo):
    mic = MicSource(MicConfig(device="default", sample_rate=48000),
                    stream_factory=lambda **kw: FakeInputStream(overflow_every=4, **kw))
    blocks = take(mic, 12)
    assert len(blocks) == 12 and mic.overflows >= 2

    # A consumer that falls behind loses the oldest blocks, counted as overflows too.
    async def slow():
        async with MicSource(MicConfig(device="default", queue_blocks=3),
                             stream_factory=lambda **kw: FakeInputStream(**kw)) as mic:
            await asyncio.sleep(0.3)
            got = [b async for b in _first(mic, 2)]
            return mic, got
    mic, got = asyncio.run(slow())
    assert mic.overflows >= 5 and len(got) == 2


async def _first(source, n):
    async for block in source:
        yield block
        n -= 1
        if n == 0:
            return


def test_device_sink_reopens_a_stream_that_stopped(alsa_fifo):
    class FakeOutputStream:
        def __init__(self, *, callback, finished_callback, **_):
            self.finished = finished_callback
            self.latency = 0.01

        def start(self):
            threading.Timer(0.05, self.finished).start() if not made[1:] else None

        def abort(self):
            pass

        def close(self):
            pass

    made = []

    def factory(**kw):
        made.append(FakeOutputStream(**kw))
        return made[-1]
    notices = []

    async def run():
        sink = DeviceSink(PlaybackConfig(device="default"), stream_factory=factory,
                          on_notice=notices.append)
        async with sink:
            await asyncio.sleep(1.2)
            return sink.reopens
    assert asyncio.run(run()) == 1 and len(made) == 2
    assert "stopped; reopening" in notices[0]


def test_a_stalled_loop_does_not_queue_callbacks_without_bound(alsa_fifo, monkeypatch):
    """A device that delivers faster than the loop drains (a null ALSA device does) once grew
    the process past 20 GB: the hand-off to the loop is bounded and what it drops is counted."""
    import foresay.audio.capture as capture

    class Flood(FakeInputStream):
        def _run(self):
            while not self._stop.is_set():
                now = time.monotonic()
                self.callback(np.zeros((self.blocksize, self.channels), np.float32), self.blocksize,
                              SimpleNamespace(inputBufferAdcTime=now, currentTime=now),
                              SimpleNamespace(input_overflow=False))
                time.sleep(0)

    posted = []
    real_post = capture.post
    monkeypatch.setattr(capture, "post", lambda *a: (posted.append(1), real_post(*a)))

    async def stall():
        async with MicSource(MicConfig(device="default", queue_blocks=8),
                             stream_factory=lambda **kw: Flood(**kw)) as mic:
            time.sleep(0.3)   # the loop is busy elsewhere; the device keeps calling back
            during = len(posted)
            got = [b async for b in _first(mic, 3)]
            return mic, during, got

    mic, during, got = asyncio.run(stall())
    assert during <= 8 and len(got) == 3
    assert mic.overflows > 8   # the flood was dropped and counted, not queued

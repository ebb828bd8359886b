"""Microphone capture: any device, any rate it accepts, delivered as 16 kHz mono blocks.

    async with MicSource(MicConfig(device="USB")) as mic:
        async for block in mic:        # AudioBlock: 16 kHz mono float32, block.t monotonic
            ...

The device is opened at a rate it accepts (its default first; USB mics that only take 48 kHz
work) and the stream is converted with soxr. The PortAudio callback only copies the samples
and hands them to the event loop (`call_soon_threadsafe`); mixing, resampling and timing happen
there. Overflows (the device's, or blocks dropped because the consumer fell behind) are counted
in `overflows`, never fatal.

Capture times: each callback carries PortAudio's ADC time of its first sample; mapped onto
`time.monotonic()` and smoothed against the sample count (`ClockMapper`), it gives every block's
`t`.

Faults: an open that fails says why (busy, no device, no usable rate). A stream that stops
delivering (device unplugged, PortAudio error) is reopened up to `reopen_attempts` times; if that
fails, iteration raises `AudioDeviceLost`, so the pipeline learns of it instead of hanging.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from dataclasses import dataclass
from typing import AsyncIterator, Callable

from .blocks import BLOCK_MS, SAMPLE_RATE, AudioBlock, AudioSource
from .clock import ClockMapper
from .devices import (DeviceInfo, block_time, choose_stream_format, close_quietly,
                      explain_portaudio_error, post, resolve_device, sd)
from .errors import AudioDeviceError, AudioDeviceLost
from .resample import Reblocker, StreamResampler, to_mono

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MicConfig:
    device: int | str | None = None   # index, (part of) a name, or None for the default input
    sample_rate: int | None = None    # device-side rate to try first; None: the device default
    block_ms: int = BLOCK_MS          # size of the 16 kHz blocks handed out
    latency: str | float = "low"      # PortAudio input latency ("low", "high" or seconds)
    queue_blocks: int = 200           # blocks (2 s) held for a slow consumer before dropping the oldest
    stall_timeout_s: float = 1.0      # no audio for this long means the stream died
    reopen_attempts: int = 5
    reopen_backoff_s: float = 0.5     # wait before reopen attempt k: k * backoff

    def __post_init__(self):
        if self.block_ms <= 0 or self.queue_blocks <= 0 or self.stall_timeout_s <= 0:
            raise ValueError("block_ms, queue_blocks and stall_timeout_s must be positive")


_LOST = object()


class MicSource(AudioSource):
    def __init__(self, config: MicConfig | None = None, *,
                 stream_factory: Callable | None = None,
                 on_notice: Callable[[str], None] | None = None):
        self.config = config or MicConfig()
        self._factory = stream_factory
        self._notice = on_notice or (lambda msg: log.warning("%s", msg))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self._stream = None
        self._gen = 0
        self._closing = False
        self.device: DeviceInfo | None = None
        self.device_rate = 0
        self.device_channels = 0
        self.overflows = 0      # device overflows plus blocks dropped for a slow consumer
        self._inflight = 0      # callbacks handed to the loop and not yet run there
        self._dropped_in_callback = 0
        self._inflight_lock = threading.Lock()
        self.reopens = 0
        self.blocks_delivered = 0

    # --- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> "MicSource":
        await self.start()
        return self

    async def start(self) -> None:
        if self._stream is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue(maxsize=self.config.queue_blocks)
        self._closing = False
        self._open(self.config.device)

    async def close(self) -> None:
        self._closing = True
        self._close_stream()
        if self._queue is not None:
            self._put(None)

    def _open(self, spec) -> None:
        device = resolve_device(spec, "input")
        rate, channels = choose_stream_format(device, "input", self.config.sample_rate)
        self._gen += 1
        gen = self._gen
        self.device, self.device_rate, self.device_channels = device, rate, channels
        self._n_in = 0
        self._n_out = 0
        self._clock = ClockMapper(rate)
        self._resampler = StreamResampler(rate, SAMPLE_RATE)
        self._reblock = Reblocker(SAMPLE_RATE * self.config.block_ms // 1000)
        factory = self._factory or sd().InputStream
        s = sd()
        try:
            stream = factory(device=device.index, samplerate=rate, channels=channels,
                             dtype="float32",
                             blocksize=int(round(rate * self.config.block_ms / 1000)),
                             latency=self.config.latency,
                             callback=functools.partial(self._callback, gen),
                             finished_callback=functools.partial(self._finished, gen))
            stream.start()
        except s.PortAudioError as exc:
            raise explain_portaudio_error(exc, "open the microphone", device) from exc
        self._stream = stream
        self._latency = float(getattr(stream, "latency", 0.0) or 0.0)
        log.info("capturing from %s at %d Hz, %d channel(s)", device.name, rate, channels)

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        self._gen += 1  # late callbacks of the old stream are ignored
        close_quietly(stream, "input")

    # --- audio thread -----------------------------------------------------------------------

    def _callback(self, gen, indata, frames, time_info, status) -> None:
        t_adc = block_time(time_info, "inputBufferAdcTime", time.monotonic())
        overflow = bool(getattr(status, "input_overflow", False))
        with self._inflight_lock:  # bounded hand-off: a stalled loop must not queue callbacks forever
            if self._inflight >= self.config.queue_blocks:
                self._dropped_in_callback += 1
                return
            self._inflight += 1
        post(self._loop, self._on_block, gen, indata.copy(), t_adc, overflow)

    def _finished(self, gen) -> None:
        post(self._loop, self._on_finished, gen)

    # --- event loop -------------------------------------------------------------------------

    def _on_finished(self, gen) -> None:
        if gen == self._gen and not self._closing:
            self._put(_LOST)

    def _on_block(self, gen, data, t_adc, overflow) -> None:
        with self._inflight_lock:
            self._inflight -= 1
            dropped, self._dropped_in_callback = self._dropped_in_callback, 0
        if gen != self._gen:
            return
        if dropped:
            self.overflows += dropped
            overflow = True   # the clock must not bridge the gap
        if overflow:
            self.overflows += 1
        frames = len(data)
        if t_adc is None:   # host API without timing information: one block plus latency ago
            t_adc = time.monotonic() - frames / self.device_rate - self._latency
        self._clock.update(self._n_in, t_adc, discontinuity=overflow)
        self._n_in += frames
        out = self._resampler.process(to_mono(data))
        for samples in self._reblock.push(out):
            t = self._clock.time_of(self._n_out, SAMPLE_RATE)
            self._n_out += len(samples)
            self._put(AudioBlock(samples, t))

    def _put(self, item) -> None:
        q = self._queue
        if q.full():
            try:
                q.get_nowait()
                self.overflows += 1
            except asyncio.QueueEmpty:
                pass
        q.put_nowait(item)

    # --- consumer ---------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[AudioBlock]:
        return self.blocks()

    async def blocks(self) -> AsyncIterator[AudioBlock]:
        if self._queue is None:
            await self.start()
        while True:
            try:
                item = await asyncio.wait_for(self._queue.get(), self.config.stall_timeout_s)
            except asyncio.TimeoutError:
                if self._closing:
                    return
                await self._recover(f"no audio for {self.config.stall_timeout_s:g} s")
                continue
            if item is None:
                return
            if item is _LOST:
                await self._recover("the stream stopped")
                continue
            self.blocks_delivered += 1
            yield item

    async def _recover(self, reason: str) -> None:
        name = self.device.name if self.device else "the microphone"
        self._notice(f"input device {name!r}: {reason}; reopening")
        self._close_stream()
        last: Exception | None = None
        for attempt in range(1, self.config.reopen_attempts + 1):
            await asyncio.sleep(self.config.reopen_backoff_s * attempt)
            if self._closing:
                return
            try:   # by name: after a replug the device may have another index
                self._open(self.device.name if self.device else self.config.device)
            except AudioDeviceError as exc:
                last = exc
                continue
            self.reopens += 1
            self._notice(f"input device {self.device.name!r} reopened")
            return
        raise AudioDeviceLost(f"input device {name!r} stopped ({reason}) and could not be "
                              f"reopened after {self.config.reopen_attempts} attempts: {last}")

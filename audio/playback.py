"""Playback: replies to the speaker (`DeviceSink`) or to a file (`wav_sink.WavSink`), one interface.

    sink = DeviceSink(PlaybackConfig(device=None))
    await sink.start()
    ticket = await sink.enqueue(samples, 24000, span=(0, 42), text=sentence)   # or play(chunk)
    t_first = await ticket.started     # when its first sample reached the output (monotonic)
    ...
    sink.end_reply()                   # nothing more for this reply: play out what is buffered
    played = await sink.drain()        # wait until it was all heard; a PlayedSpan
    # or, on barge-in:
    played = sink.flush()              # silence from the next block on; what was heard
    # or, while the user may be going on with their turn:
    sink.pause(); ...; sink.resume()   # silence from the next block on; then on from there

Chunks are resampled from their own rate (the TTS's) to the output rate on arrival and queued in
a bounded jitter buffer (`max_buffer_s`; `enqueue` waits while it is full). Output starts once
`prebuffer_ms` is queued, or at once after `end_reply()`. If the buffer runs dry in the middle
of a reply, the output is filled with silence, the underrun is counted in `underruns` and output
resumes after the pre-buffer has refilled.

Timing: a `PlaybackTicket` per chunk resolves `started` with the monotonic time at which the
chunk's first sample reaches the output (PortAudio's DAC time for devices), so voice-to-voice
latency can be measured to the speaker, and `finished` with the time after its last sample.

`flush()` stops audible output within one block: the next block the device asks for is silence.
Samples already handed to the device (its output latency, a block or two) still sound and are
counted as played. The returned `PlayedSpan` gives the samples of the reply that were played
(at the chunks' own rate), and, when chunks were tagged with `span` (and `text`), the character
span heard: whole chunks, plus the played fraction of the chunk that was cut, snapped back to a
word boundary when its text is known.

Every block sent to the output is also written, at 16 kHz and stamped with its output time, to
`sink.reference` (a `PlaybackReference`) for echo cancellation and the barge-in gate.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass

import numpy as np

from .blocks import SAMPLE_RATE
from .clock import ClockMapper
from .devices import (DeviceInfo, block_time, choose_stream_format, close_quietly,
                      explain_portaudio_error, post, resolve_device, sd)
from .errors import AudioDeviceError
from .reference import PlaybackReference
from .resample import resample, to_mono

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlaybackConfig:
    device: int | str | None = None   # output device: index, (part of) a name, None = default
    sample_rate: int | None = None    # output rate to try first; None: the device's default
    block_ms: int = 10                # output block; flush() silences within one of these
    latency: str | float = "low"
    prebuffer_ms: int = 60            # queued audio needed before output starts
    max_buffer_s: float = 30.0        # jitter buffer bound; enqueue() waits beyond it
    reopen_attempts: int = 3

    def __post_init__(self):
        if self.block_ms <= 0 or self.prebuffer_ms < 0 or self.max_buffer_s <= 0:
            raise ValueError("block_ms and max_buffer_s must be positive, prebuffer_ms >= 0")


from .playout import PlaybackTicket, PlayedSpan, _Chunk, _heard_span, _Playout  # noqa: F401  (PlayedSpan: API)


class PlaybackSink:
    """What both sinks offer; each output pulls blocks with `_core.read` and reports them
    through `_played`."""

    sample_rate: int

    def __init__(self, config: PlaybackConfig):
        self.config = config
        self.reference = PlaybackReference()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._core: _Playout | None = None
        self._clock: ClockMapper | None = None
        self._continuous = True   # one unbroken output stream (a device, a paced file)
        self._wake: asyncio.Event | None = None

    # --- the interface ----------------------------------------------------------------------

    @property
    def underruns(self) -> int:
        return self._core.underruns if self._core else 0

    async def enqueue(self, samples: np.ndarray, sample_rate: int, *,
                      span: tuple[int, int] | None = None,
                      text: str | None = None) -> PlaybackTicket:
        """Queue a chunk of a reply (mono, or (frames, channels) mixed down)."""
        if self._core is None:
            await self.start()
        if sample_rate <= 0:
            raise ValueError("sample_rate must be positive")
        src = to_mono(samples)
        out = resample(src, sample_rate, self.sample_rate)
        ref = resample(src, sample_rate, SAMPLE_RATE)
        ticket = PlaybackTicket(self._loop)
        if len(out) == 0:
            ticket._resolve(ticket.started, None)
            ticket._resolve(ticket.finished, None)
            return ticket
        cap = int(self.config.max_buffer_s * self.sample_rate)
        while self._core.buffered and self._core.buffered + len(out) > cap:
            await asyncio.sleep(self.config.block_ms / 1000)
        self._core.add(_Chunk(out, ref, len(src), int(sample_rate), span, text, ticket))
        self._wake.set()
        return ticket

    async def play(self, chunk) -> PlaybackTicket:
        """Queue an `engine.events.AudioChunk` (its samples, rate and text span)."""
        return await self.enqueue(chunk.samples, chunk.sample_rate, span=tuple(chunk.span))

    def end_reply(self) -> None:
        """No more chunks come for this reply: play what is queued even below the pre-buffer."""
        if self._core is not None:
            with self._core.lock:
                self._core.ended = True
            self._wake.set()

    async def drain(self) -> PlayedSpan:
        """end_reply(), then wait until the reply's last sample reached the output."""
        self.end_reply()
        if self._core is None:
            return self._span([], None)
        chunks = list(self._core.reply)
        if chunks:
            t_end = await chunks[-1].ticket.finished
            if t_end is not None:
                await asyncio.sleep(max(0.0, t_end - time.monotonic()))
        return self.flush()

    def pause(self) -> None:
        """Hold the reply: silence from the next block on, nothing dropped (`resume()` plays on
        from there, `flush()` stops it)."""
        if self._core is not None:
            with self._core.lock:
                self._core.paused = True

    def resume(self) -> None:
        if self._core is not None:
            with self._core.lock:
                self._core.paused = False
            self._wake.set()

    def flush(self) -> PlayedSpan:
        """Stop now (barge-in): drop everything not yet played, report what was."""
        if self._core is None:
            return self._span([], None)
        reply, dropped, last_n = self._core.take_reply()
        for c in dropped:
            c.ticket._resolve(c.ticket.started, None)
            c.ticket._resolve(c.ticket.finished, None)
        return self._span(reply, last_n)

    def _span(self, reply: list[_Chunk], last_n: int | None) -> PlayedSpan:
        samples = sum(c.played_src() for c in reply)
        seconds = sum(c.played_src() / c.src_rate for c in reply)
        end_t = None
        if reply and last_n is not None:
            # From the sample count: also right for blocks the loop has not yet heard about.
            end_t = self._clock.time_of(last_n) if self._continuous and self._clock.anchored \
                else self._core.last_out_t
        return PlayedSpan(samples=samples, seconds=seconds,
                          chunks_started=sum(1 for c in reply if c.pos > 0),
                          chunks_total=len(reply),
                          complete=all(c.pos >= len(c.samples) for c in reply),
                          text_span=_heard_span(reply), end_t=end_t)

    async def start(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- shared by the outputs --------------------------------------------------------------

    def _setup(self, rate: int) -> None:
        self._loop = asyncio.get_running_loop()
        self.sample_rate = rate
        self._core = _Playout(rate, rate * self.config.prebuffer_ms // 1000)
        self._wake = asyncio.Event()
        self._reset_clock()

    def _reset_clock(self) -> None:
        self._clock = ClockMapper(self.sample_rate)
        with self._core.lock:
            self._core.n_total = 0
            self._core.last_n = None

    def _played(self, n0: int, segments, t_out: float) -> None:
        """In the event loop: the output block starting at output sample n0, with these chunk
        `segments`, went out at t_out (estimated). A continuous output's times are smoothed
        against its sample count."""
        rate = self.sample_rate
        t0 = self._clock.update(n0, t_out) if self._continuous else t_out
        for c, first, count, k in segments:
            t = t0 + k / rate
            if first == 0:
                c.ticket._resolve(c.ticket.started, t)
            if first + count >= len(c.samples):
                c.ticket._resolve(c.ticket.finished, t + count / rate)
            self._core.last_out_t = t + count / rate
            if self._continuous:   # the chunk's 16 kHz copy, so the reference has no delay
                scale = len(c.ref) / len(c.samples)
                a, b = int(round(first * scale)), int(round((first + count) * scale))
                self.reference.write(c.ref[a:b], t)


class DeviceSink(PlaybackSink):
    """Plays to a sound device through a PortAudio callback stream."""

    def __init__(self, config: PlaybackConfig | None = None, *, stream_factory=None,
                 on_notice=None):
        super().__init__(config or PlaybackConfig())
        self._factory = stream_factory
        self._notice = on_notice or (lambda msg: log.warning("%s", msg))
        self._stream = None
        self._gen = 0
        self._closing = False
        self.device: DeviceInfo | None = None
        self.channels = 0
        self.device_underflows = 0
        self.reopens = 0

    async def start(self) -> None:
        if self._stream is not None:
            return
        self._closing = False
        device = resolve_device(self.config.device, "output")
        rate, channels = choose_stream_format(device, "output", self.config.sample_rate)
        if self._core is None:
            self._setup(rate)
        self._open(device, rate, channels)

    def _open(self, device: DeviceInfo, rate: int, channels: int) -> None:
        s = sd()
        self._gen += 1
        factory = self._factory or s.OutputStream
        try:
            stream = factory(device=device.index, samplerate=rate, channels=channels,
                             dtype="float32", blocksize=rate * self.config.block_ms // 1000,
                             latency=self.config.latency,
                             callback=functools.partial(self._callback, self._gen),
                             finished_callback=functools.partial(self._finished, self._gen))
            stream.start()
        except s.PortAudioError as exc:
            raise explain_portaudio_error(exc, "open the speaker", device) from exc
        self.device, self.channels, self._stream = device, channels, stream
        self._latency = float(getattr(stream, "latency", 0.0) or 0.0)
        log.info("playing to %s at %d Hz, %d channel(s)", device.name, rate, channels)

    async def close(self) -> None:
        self._closing = True
        if self._core is not None:
            self.flush()
        stream, self._stream = self._stream, None
        self._gen += 1
        close_quietly(stream, "output")

    def _callback(self, gen, outdata, frames, time_info, status) -> None:
        now = time.monotonic()
        t_out = block_time(time_info, "outputBufferDacTime", now)
        if t_out is None:   # host API without timing information: after the latency
            t_out = now + self._latency
        out, segments, n0 = self._core.read(frames)
        outdata[:] = out[:, None]
        underflow = bool(getattr(status, "output_underflow", False))
        post(self._loop, self._on_block, gen, n0, segments, t_out, underflow)

    def _on_block(self, gen, n0, segments, t_out, underflow) -> None:
        if gen != self._gen:
            return
        if underflow:
            self.device_underflows += 1
        self._played(n0, segments, t_out)

    def _finished(self, gen) -> None:
        post(self._loop, self._on_finished, gen)

    def _on_finished(self, gen) -> None:
        if gen != self._gen or self._closing:
            return
        self._loop.create_task(self._recover())

    async def _recover(self) -> None:
        """The stream stopped on its own (device gone, PortAudio error): reopen it."""
        name = self.device.name if self.device else "the speaker"
        played = self.flush()
        self._notice(f"output device {name!r} stopped; reopening "
                     f"({played.samples} samples of the reply had played)")
        self._stream = None
        for attempt in range(1, self.config.reopen_attempts + 1):
            await asyncio.sleep(0.5 * attempt)
            if self._closing:
                return
            try:
                device = resolve_device(name, "output")
                rate, channels = choose_stream_format(device, "output", self.sample_rate)
                if rate != self.sample_rate:
                    self._setup(rate)
                self._reset_clock()
                self._open(device, rate, channels)
            except AudioDeviceError as exc:
                self._notice(f"reopening {name!r} failed: {exc}")
                continue
            self.reopens += 1
            return
        self._notice(f"output device {name!r} is gone; replies are not played")

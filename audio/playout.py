"""The playout core shared by every sink: queued reply chunks at the output rate, read block by
block by the output, with the bookkeeping of what was heard (`PlayedSpan`) and when each chunk
reached the output (`PlaybackTicket`). No I/O: the sinks in `playback.py` drive it."""
from __future__ import annotations

import asyncio
import threading
from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PlayedSpan:
    """How much of a reply reached the output."""
    samples: int                          # at the chunks' own rate
    seconds: float
    chunks_started: int
    chunks_total: int
    complete: bool                        # every enqueued chunk was played to its end
    text_span: tuple[int, int] | None     # characters heard, from the chunks' tags
    end_t: float | None                   # output time just after the last played sample


class PlaybackTicket:
    """One enqueued chunk. `started` / `finished` are futures of monotonic output times; they
    resolve to None when the chunk was flushed before it got there."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.started: asyncio.Future = loop.create_future()
        self.finished: asyncio.Future = loop.create_future()

    @staticmethod
    def _resolve(fut: asyncio.Future, value) -> None:
        if not fut.done():
            fut.set_result(value)


class _Chunk:
    __slots__ = ("samples", "ref", "pos", "src_len", "src_rate", "span", "text", "ticket")

    def __init__(self, samples, ref, src_len, src_rate, span, text, ticket):
        self.samples, self.pos = samples, 0   # samples: at the output rate
        self.ref = ref                        # the same at 16 kHz, for the echo reference
        self.src_len, self.src_rate = src_len, src_rate
        self.span, self.text, self.ticket = span, text, ticket

    def played_src(self) -> int:
        if self.pos >= len(self.samples):
            return self.src_len
        return int(round(self.pos * self.src_len / max(1, len(self.samples))))


class _Playout:
    """The jitter buffer and the record of the current reply; shared with the audio thread."""

    def __init__(self, rate: int, prebuffer: int):
        self.rate = rate
        self.prebuffer = prebuffer
        self.lock = threading.Lock()
        self.queue: deque[_Chunk] = deque()
        self.reply: list[_Chunk] = []   # every chunk of the current reply, in order
        self.buffered = 0
        self.playing = False
        self.ended = False              # end_reply() was called for the current reply
        self.paused = False             # the reply waits, silent, where it stopped (pause())
        self.underruns = 0
        self.n_total = 0                # samples the output has taken since it (re)started
        self.last_n: int | None = None  # output sample index just after the reply's last
        self.last_out_t: float | None = None

    def add(self, chunk: _Chunk) -> None:
        with self.lock:
            self.queue.append(chunk)
            self.reply.append(chunk)
            self.buffered += len(chunk.samples)

    def read(self, n: int):
        """Up to n samples for the output, once per output block: (samples, segments, n0),
        where each segment (chunk, first, count, offset) says that samples [first, first +
        count) of the chunk went to the block at `offset`, and n0 is the output sample index
        of the block's start."""
        out = np.zeros(n, np.float32)
        segments = []
        k = 0
        with self.lock:
            if not self.playing and self._ready():
                self.playing = True
            if self.playing and not self.paused:
                while k < n and self.queue:
                    c = self.queue[0]
                    m = min(n - k, len(c.samples) - c.pos)
                    out[k:k + m] = c.samples[c.pos:c.pos + m]
                    segments.append((c, c.pos, m, k))
                    c.pos += m
                    k += m
                    self.buffered -= m
                    if c.pos >= len(c.samples):
                        self.queue.popleft()
                if k < n:
                    self.playing = False
                    if not self.ended:
                        self.underruns += 1
            n0 = self.n_total
            self.n_total += n
            if k:
                self.last_n = n0 + k
        return out, segments, n0

    def has_playable(self) -> bool:
        with self.lock:
            return bool(self.buffered) and not self.paused and (self.playing or self._ready())

    def _ready(self) -> bool:
        """Enough queued to start (or restart after an underrun); call with the lock held."""
        return bool(self.buffered) and not self.paused and (self.ended or self.buffered >= self.prebuffer)

    def idle(self) -> bool:
        with self.lock:
            return not self.queue

    def take_reply(self) -> tuple[list[_Chunk], list[_Chunk], int | None]:
        """Close the current reply: (its chunks, the unplayed ones dropped from the queue, the
        output sample index after its last played sample)."""
        with self.lock:
            reply, dropped, last_n = self.reply, list(self.queue), self.last_n
            self.last_n = None
            self.queue.clear()
            self.reply = []
            self.buffered = 0
            self.playing = False
            self.ended = False
            self.paused = False
        return reply, dropped, last_n


def _heard_span(chunks: list[_Chunk]) -> tuple[int, int] | None:
    tagged = [c for c in chunks if c.span is not None and c.pos > 0]
    if not tagged:
        return None
    start, end = tagged[0].span[0], tagged[0].span[0]
    for c in tagged:
        a, b = c.span
        if c.pos >= len(c.samples):
            end = max(end, b)
            continue
        frac = c.pos / len(c.samples)
        if c.text:
            cut = int(len(c.text) * frac)
            if cut < len(c.text) and not c.text[cut].isspace():   # drop the word being spoken
                cut = c.text.rfind(" ", 0, cut) + 1 if " " in c.text[:cut] else 0
            end = max(end, a + int(round(len(c.text[:cut].rstrip()) * (b - a) / len(c.text))))
        else:
            end = max(end, a + int((b - a) * frac))
        break
    return start, end

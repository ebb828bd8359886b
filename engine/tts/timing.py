"""Timing records of one preparation: per chunk, and the summary figures (TTFC, RTF)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChunkTiming:
    index: int
    audio_s: float    # seconds of audio in the chunk
    compute_s: float  # synthesis time spent on it; holds and waits for the model excluded
    ready_at: float   # time.monotonic() when the worker handed it over


@dataclass(frozen=True)
class SynthesisTiming:
    """A snapshot of a preparation's timing; times are on time.monotonic()."""
    prepared_at: float
    chunks: tuple[ChunkTiming, ...] = ()
    stream_started_at: float | None = None
    first_delivered_at: float | None = None  # first chunk handed out by stream()

    @property
    def ttfc_cold_s(self) -> float | None:
        """From prepare() to the first chunk being synthesized."""
        return self.chunks[0].ready_at - self.prepared_at if self.chunks else None

    @property
    def ttfc_stream_s(self) -> float | None:
        """From stream() to its first chunk: near zero when the audio was prepared."""
        if self.stream_started_at is None or self.first_delivered_at is None:
            return None
        return self.first_delivered_at - self.stream_started_at

    @property
    def audio_s(self) -> float:
        return sum(c.audio_s for c in self.chunks)

    @property
    def rtf(self) -> float | None:
        """Real-time factor: compute seconds per second of audio (below 1 is faster than real time)."""
        audio = self.audio_s
        return sum(c.compute_s for c in self.chunks) / audio if audio > 0 else None

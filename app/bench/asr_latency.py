"""Streaming delays of the ASR, simulated on one clock with the real model's compute time.

Random fixtures do not hear words, so word timing comes from a `SyntheticUtterance` (known
word ends) recognized by the `ScriptedBackend`, while the cadence is set by a real backend
decoding the same audio in lockstep: a hop ticks every `hop_ms` of audio, starts when the
worker is free (ticks that pass during a decode are skipped, as the live stage does) and its
partial appears after the real decode's measured wall time. The final starts at the end of
the turn (or when the hop in flight finishes) and takes the real final decode's time.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from foresay.engine.asr.backends import AsrBackend
from foresay.engine.asr.errors import AsrError
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.asr.scripted import ScriptedBackend, SyntheticUtterance
from foresay.engine.asr.streaming import StreamingConfig, StreamingTranscriber


@dataclass(frozen=True)
class StreamingDelays:
    word_delay_ms: tuple[float, ...]  # per word: first appearance in a partial minus the word's end
    final_delay_ms: float  # final transcript after the end of the turn
    hops: int
    skipped: int

    def summary(self) -> dict:
        delays = np.array(self.word_delay_ms)
        return {"word_delay_ms_mean": round(float(delays.mean()), 1),
                "word_delay_ms_p90": round(float(np.percentile(delays, 90)), 1),
                "final_delay_ms": round(self.final_delay_ms, 1)}


@dataclass(frozen=True)
class ClockedRun:
    final_text: str
    final_at: float  # seconds on the audio clock when the final transcript was ready
    shown: list[tuple[float, list[str]]]  # (when, words) of each hop of the companion
    skipped: int  # ticks that passed while a decode ran


def stream_on_clock(timed: StreamingTranscriber, audio: np.ndarray, config: StreamingConfig,
                    companion: StreamingTranscriber | None = None) -> ClockedRun:
    """Stream `audio` into `timed` on one clock: a hop every `hop_ms` of audio, started when the
    worker is free (ticks that pass during a decode are skipped), its result ready after the
    decode's measured wall time; the final starts at the end of the audio or when the hop in
    flight finishes. `companion` hears the same audio and hops alongside, untimed; its partials
    are what `shown` records, and its final is left to the caller."""
    hop, end = config.hop_ms / 1000, len(audio) / SAMPLE_RATE
    listeners = (timed,) if companion is None else (companion, timed)
    fed, free_at, tick, skipped = 0, 0.0, 1, 0
    shown: list[tuple[float, list[str]]] = []

    def feed_until(seconds: float) -> None:
        nonlocal fed
        upto = min(len(audio), int(round(seconds * SAMPLE_RATE)))
        for transcriber in listeners:
            transcriber.append(audio[fed:upto])
        fed = upto

    while tick * hop < end:
        if free_at > tick * hop:  # the worker is busy: these ticks are skipped
            next_tick = math.ceil(free_at / hop - 1e-9)
            skipped += next_tick - tick
            tick = next_tick
            continue
        feed_until(tick * hop)
        started = time.perf_counter()
        timed.hop()
        free_at = tick * hop + time.perf_counter() - started
        if companion is not None:
            shown.append((free_at, companion.hop().text.split()))
        tick += 1
    final_start = max(end, free_at)
    feed_until(end)
    started = time.perf_counter()
    text = timed.finish().text
    return ClockedRun(text, final_start + time.perf_counter() - started, shown, skipped)


def simulate(real: AsrBackend, utterance: SyntheticUtterance, config: StreamingConfig) -> StreamingDelays:
    audio = utterance.audio()
    heard = StreamingTranscriber(ScriptedBackend(utterance), config)
    run = stream_on_clock(StreamingTranscriber(real, config), audio, config, companion=heard)
    final_words = heard.finish().text.split()
    if final_words != list(utterance.words):
        raise AsrError(f"internal: the scripted recognizer heard {final_words}, not {list(utterance.words)}")
    shown = run.shown + [(run.final_at, final_words)]
    delays = []
    for i, (word, word_end) in enumerate(zip(utterance.words, utterance.word_ends_s())):
        first = next(t for t, words in shown if len(words) > i and words[i] == word)
        delays.append(1000 * (first - word_end))
    end = len(audio) / SAMPLE_RATE
    return StreamingDelays(tuple(delays), 1000 * (run.final_at - end), hops=len(shown) - 1, skipped=run.skipped)


@dataclass(frozen=True)
class ClipFinals:
    """Streaming over real clips: per clip, the final transcript's delay after the end of the
    turn, and the final text."""
    final_delay_ms: tuple[float, ...]
    texts: tuple[str, ...]

    def summary(self) -> dict:
        delays = np.array(self.final_delay_ms)
        return {"clips": len(delays), "final_delay_ms_median": round(float(np.median(delays)), 1),
                "final_delay_ms_p90": round(float(np.percentile(delays, 90)), 1),
                "final_delay_ms_mean": round(float(delays.mean()), 1)}


def clip_finals(real: AsrBackend, clips: list, config: StreamingConfig) -> ClipFinals:
    """Each clip streamed on the clock of `simulate` (`stream_on_clock`)."""
    delays, texts = [], []
    for audio in clips:
        run = stream_on_clock(StreamingTranscriber(real, config), audio, config)
        texts.append(run.final_text)
        delays.append(1000 * (run.final_at - len(audio) / SAMPLE_RATE))
    return ClipFinals(tuple(delays), tuple(texts))

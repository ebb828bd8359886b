"""The unit of audio that flows through Foresay: a block of 16 kHz mono float32 samples.

`AudioBlock.t` is the capture time of the block's first sample on the monotonic clock
(`time.monotonic()`), the clock the metrics use. Sources map their device or file clock onto it,
so sample `i` of a block was captured at `t + i / SAMPLE_RATE`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 16_000
"""The rate of every block handed to VAD, endpointing, ASR and barge-in."""

BLOCK_MS = 10
"""The sources' block (`MicConfig.block_ms`, `FileSource`). It divides the webrtc VAD's frames
(10, 20 or 30 ms), so each frame is judged as soon as its last sample arrives: with 20 ms blocks
every other 30 ms frame waited 10 ms for the rest of its block, and so did the end of a turn.
(Silero's 32 ms frames wait 4 ms on average, against 8 with 20 ms blocks.)"""


@dataclass(frozen=True)
class AudioBlock:
    samples: np.ndarray  # float32, 1-D, at SAMPLE_RATE, nominally in [-1, 1]
    t: float             # monotonic capture time of samples[0], in seconds

    @property
    def duration(self) -> float:
        return len(self.samples) / SAMPLE_RATE

    @property
    def t_end(self) -> float:
        """Capture time just after the last sample."""
        return self.t + len(self.samples) / SAMPLE_RATE


def to_pcm16(x: np.ndarray) -> np.ndarray:
    """float samples in [-1, 1] as int16 (clipped), for libraries that take 16-bit PCM."""
    return (np.clip(x, -1.0, 1.0) * 32767.0).astype(np.int16)


def rms_db(x: np.ndarray) -> float:
    """Root-mean-square level of `x` in dB relative to full scale (-120 for silence)."""
    if len(x) == 0:
        return -120.0
    power = float(np.mean(np.square(x, dtype=np.float64)))
    return 10.0 * np.log10(max(power, 1e-12))


ZEROS_DB = -110.0  # quieter than any converter's own noise, 16-bit dither included (about -101 dB)


def zeros(x: np.ndarray) -> bool:
    """Whether `x` holds no sound at all: zeros (a mute key, a gated or waking microphone, a
    dropout), or what an echo canceller makes of them."""
    return rms_db(x) < ZEROS_DB


def sound_db(frame: np.ndarray) -> float:
    """The level of the sound in a short frame, leaving out the DC offset that many microphones
    add (0.5-2% of full scale is common), which is no one's loudness."""
    x = np.asarray(frame, np.float64)
    return rms_db(x - x.mean()) if len(x) else -120.0


class AudioSource:
    """What every audio source offers (`MicSource`, `FileSource`): an async context manager
    and an async iterator of `AudioBlock`s in capture order.

        async with source:
            async for block in source:   # 16 kHz mono float32, block.t on the monotonic clock
                ...

    `overflows` counts blocks the source had to drop (device overflow or a consumer too slow);
    they are never fatal. Iteration ends when the source is exhausted or closed, and raises an
    `AudioDeviceLost` when a device stopped and could not be reopened. This base class is for
    documentation and isinstance checks; the sources implement the same methods.
    """

    sample_rate: int = SAMPLE_RATE
    overflows: int = 0

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        raise NotImplementedError

    def __aiter__(self):
        raise NotImplementedError

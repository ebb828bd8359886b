"""What the ASR stage keeps of a turn's decodes across a voice pause, an end and a resume."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from foresay.engine.asr.streaming import StreamingTranscriber


@dataclass
class PauseDecode:
    """A pause decode: its transcriber, the task making it, the capture time its audio runs to;
    `stale` once voice came back (a decode not started by then is skipped); `answered_samples`:
    the turn's audio received when its transcript went out; `late`: the second look in the same
    silence, once begun. One begun before the endpointer called the pause (`confirmed` False)
    keeps its transcript in `held` until the pause is confirmed."""
    transcriber: StreamingTranscriber
    task: asyncio.Task | None = None
    until_t: float = 0.0
    stale: bool = False
    answered_samples: int | None = None
    late: asyncio.Task | None = None
    confirmed: bool = True
    held: tuple | None = None  # the decode's result, waiting for the pause to be confirmed
    paused_t: float = 0.0  # the capture time the audio ran to when the pause was confirmed


@dataclass
class EndedTurn:
    """A turn declared ended: its transcriber, the audio it got after its pause decode (heard by
    the hops if the turn goes on), and that pause decode. `resumed` once the voice came back: a
    final transcript still under way for this end is then never said (the turn's words go on, and
    its next end has a final of its own)."""
    turn_id: int
    transcriber: StreamingTranscriber
    after_pause: np.ndarray
    pause: PauseDecode | None = None
    resumed: bool = False

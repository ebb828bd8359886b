"""What the room sounds like, frame by frame: its noise floor in the speech band, and its hiss.

`RoomNoise` is the endpointer's energy check. `margin(frame)` says how far a frame stands above
the room's noise floor, read in the speech band; `hisses(frame)` whether an unvoiced frame's
high frequencies stand out from the room's (a word's final "s"). Both track the room as they go:
`margin` is given every frame, in stream order (the speech band's filter carries its state from
one to the next), `hisses` every frame the VAD calls unvoiced.

The speech band (`SpeechBand`): a streaming 4th-order Butterworth high-pass at 100 Hz (50 Hz hum
lies 24 dB down, 60 Hz 18 dB, a low male voice's 85 Hz fundamental 6 dB), run as an FIR (its
impulse response up to where it has decayed by 80 dB, one `np.convolve` per frame) with its
state carried from frame to frame. Mains hum (a ground loop, a cheap USB microphone), rumble and
a microphone's DC offset stood over the quiet ends of words when levels were read over the whole
band.

The floor follows quiet frames down at once and rises 3 dB/s. Digital silence (zeros: a stream
that opens with them, a mute key, a dropout, a gated microphone, requests written with silence
around them) pulls it down to -120 dB, where every sound passes the check, as in a room of
digital silence it should; the first sound after zeros may be speech. Once 0.3 s of sound after
the zeros has stayed under -50 dBFS and within 6 dB, or 0.1 s of it so once it has come down to
the quietest moment heard since the zeros (a gap between words: the room again), or 1 s of it
under -50 dBFS however uneven, the room is back, and the floor goes to it at once: rising at
3 dB/s it took 15-20 s, and meanwhile the room passed the check, so turns began on it and ended
late. On that frame, and on the frame zeros come back after sound that ended steady and quiet
(ROOM_BEFORE_ZEROS_S: a gate closing), `came_back` holds what was heard since the zeros
(`RoomHeard`), so that the endpointer can tell which of those frames were the room's after all
(`room_frames`). (The VAD does not hear zeros, `vad.Vad.is_speech`: fed them, it called the room
speech too, and such a turn went on as long as the room did.) Zeros teach the hiss median
nothing, and a frame of them is read as silence, not as the filter's ringing after the last
sound. While the app's mute feeds zeros (`keep(True)`), floor and hiss median keep what they
learned.
"""
from __future__ import annotations

import math
from collections import deque
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from .blocks import SAMPLE_RATE, rms_db

CUTOFF_HZ = 100.0
DIGITAL_SILENCE_DB = -100.0  # quieter than any microphone's own noise: zeros, a bit of dither
# After zeros, the room is back once this long a sound has stayed this steady and this quiet
# (speech is neither; looser rules moved the ends of requests spoken in digital silence):
ROOM_BACK_S = 0.3
ROOM_SPREAD_DB = 6.0
ROOM_MAX_DB = -50.0
# ... or, however uneven, once this long a sound has stayed under ROOM_MAX_DB (a room whose level
# swings more than ROOM_SPREAD_DB otherwise passed as voice until the floor had risen to it):
ROOM_BACK_UNEVEN_S = 1.0
# Zeros again after a sound that ended this long steady and quiet (a gate closing after its hang
# time): that end was the room's, though too short to learn its floor from
ROOM_BEFORE_ZEROS_S = 0.1
# ... or sooner, once this long a steady, quiet sound comes down to the quietest moment of the
# sound before it since the zeros (of at least ROOM_QUICK_AFTER_S; within ROOM_QUICK_DB): as quiet
# as the quietest gap between the words, it is the room, heard again (a request spoken into a
# gated microphone was otherwise heard to end 0.3 s after the room came back)
ROOM_QUICK_S = 0.1
ROOM_QUICK_AFTER_S = 0.5
ROOM_QUICK_DB = 6.0
ROOM_QUICK_RANK = 3  # "the quietest moment": the third quietest frame (one glitch is no moment)
# ... and only a microphone's room: a synthesized voice in digital silence leaves near-silence of
# -95 to -99 dBFS between its words, where a quick rule reported a comma's pause as the room's
ROOM_QUICK_MIN_DB = -90.0


class RoomHeard(NamedTuple):
    """The speech-band levels of the frames since the last zeros (the last ROOM_BACK_UNEVEN_S of
    them, oldest first), when they turned out to end in the room: `floor_db` is the room's level
    they showed, and the last of them ended `ended_before_s` before the end of the current frame
    (0: it is the current frame; a frame's length: the current frame is zeros again)."""
    levels: tuple[float, ...]
    floor_db: float
    ended_before_s: float


def _butterworth_sections(cutoff_hz: float, rate: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The two biquads (b, a) of a 4th-order Butterworth high-pass (bilinear transform, prewarped)."""
    k = math.tan(math.pi * cutoff_hz / rate)
    sections = []
    for q in (1 / (2 * math.cos(math.pi / 8)), 1 / (2 * math.cos(3 * math.pi / 8))):
        norm = 1 / (1 + k / q + k * k)
        b = np.array([1.0, -2.0, 1.0]) * norm
        a = np.array([1.0, 2 * (k * k - 1) * norm, (1 - k / q + k * k) * norm])
        sections.append((b, a))
    return sections


@lru_cache(maxsize=4)
def impulse_response(cutoff_hz: float = CUTOFF_HZ, rate: int = SAMPLE_RATE, floor_db: float = -80.0) -> np.ndarray:
    """The high-pass's impulse response, cut where its envelope has fallen `floor_db` under its peak."""
    n = rate // 10  # 100 ms: far longer than the response lasts at any cutoff used here
    x = np.zeros(n)
    x[0] = 1.0
    for b, a in _butterworth_sections(cutoff_hz, rate):
        y = np.zeros(n)
        for i in range(n):  # once, at construction
            y[i] = (b[0] * x[i] + (b[1] * x[i - 1] if i >= 1 else 0.0) + (b[2] * x[i - 2] if i >= 2 else 0.0)
                    - (a[1] * y[i - 1] if i >= 1 else 0.0) - (a[2] * y[i - 2] if i >= 2 else 0.0))
        x = y
    envelope = np.maximum.accumulate(np.abs(x)[::-1])[::-1]  # the largest magnitude from each sample on
    keep = np.flatnonzero(envelope >= np.abs(x).max() * 10 ** (floor_db / 20))
    h = x[:keep[-1] + 1]
    h.flags.writeable = False  # shared by every SpeechBand
    return h


def _steady_and_quiet(levels) -> bool:
    """Whether frame levels all lie under ROOM_MAX_DB and within ROOM_SPREAD_DB of each other."""
    return max(levels) <= ROOM_MAX_DB and max(levels) - min(levels) <= ROOM_SPREAD_DB


def room_frames(levels: tuple[float, ...], floor_db: float, margin_db: float) -> tuple[int, int]:
    """Of frame levels (oldest first): how many of the last stand less than `margin_db` over the
    floor (the room's), and how many of those before them stand that far over it (voice)."""
    quiet = 0
    for level in reversed(levels):
        if level - floor_db >= margin_db:
            break
        quiet += 1
    loud = sum(1 for level in levels[:len(levels) - quiet] if level - floor_db >= margin_db)
    return quiet, loud


class SpeechBand:
    def __init__(self, cutoff_hz: float = CUTOFF_HZ, rate: int = SAMPLE_RATE):
        if not 0 < cutoff_hz < rate / 2:
            raise ValueError(f"speech band: cutoff_hz must be in (0, {rate / 2}), got {cutoff_hz}")
        self._h = impulse_response(cutoff_hz, rate)
        self._tail = np.zeros(len(self._h) - 1)  # the stream's last samples, which the next frame's output needs

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        """`frame` (the next samples of the stream) high-passed."""
        x = np.concatenate([self._tail, np.asarray(frame, np.float64)])
        self._tail = x[len(x) - len(self._tail):]
        return np.convolve(x, self._h, mode="valid")


class RoomNoise:
    def __init__(self, frame_s: float, hiss_db: float = 10.0, rise_db_per_s: float = 3.0):
        """`hiss_db`: how far over the room's median a frame's high frequencies must stand to
        hiss (0: never)."""
        self.hiss_db = hiss_db
        self._rise = rise_db_per_s * frame_s
        self._band = SpeechBand()
        self.floor_db: float | None = None  # the noise floor in the speech band, dBFS
        self.hiss_median_db: float | None = None  # median high-frequency level of unvoiced frames
        self._keep = False
        self._since_zeros: deque[float] = deque(maxlen=max(1, round(ROOM_BACK_UNEVEN_S / frame_s)))  # levels
        self._steady_frames = max(1, round(ROOM_BACK_S / frame_s))
        self._quick_frames = max(1, round(ROOM_QUICK_S / frame_s))
        self._quick_after = math.ceil(ROOM_QUICK_AFTER_S / frame_s - 1e-9)  # frames, fewer than _since_zeros holds
        self._quietest_before: list[float] = []  # their ROOM_QUICK_RANK quietest, but for the last _quick_frames
        self._frame_s = frame_s
        # on the frame the room came back after zeros, or zeros came back after the room: what was
        # heard since the zeros before (`RoomHeard`); else None
        self.came_back: RoomHeard | None = None

    def keep(self, keep: bool) -> None:
        """While `keep`, the audio is not the room's (the app's mute feeds zeros, or what the echo
        canceller makes of them): floor and hiss median keep what they learned, so after it the
        room is judged against its own floor at once."""
        self._keep = keep

    def margin(self, frame: np.ndarray) -> float | None:
        """How far `frame` stands above the noise floor, in dB (None: no floor known)."""
        band, raw = self._band(frame), rms_db(frame)
        self.came_back = None
        # a frame of digital silence stays silent: the filter's ringing after the last sound is not
        # sound (it held the end of every request spoken in digital silence one frame longer)
        level = raw if raw < DIGITAL_SILENCE_DB else rms_db(band)
        if self._keep:
            return None if self.floor_db is None else level - self.floor_db
        if level < DIGITAL_SILENCE_DB:
            if self._since_zeros and self.floor_db is not None and self.floor_db < DIGITAL_SILENCE_DB:
                self.came_back = self._room_before_zeros()
            self._since_zeros.clear()
            self._quietest_before = []
        elif self.floor_db is not None and self.floor_db < DIGITAL_SILENCE_DB:
            self._since_zeros.append(level)
            if len(self._since_zeros) > self._quick_frames:
                left = self._since_zeros[-self._quick_frames - 1]  # the frame that just left the last few
                self._quietest_before = sorted([*self._quietest_before, left])[:ROOM_QUICK_RANK]
            room = self._room_is_back()
            if room is not None:
                self.floor_db = room
                self.came_back = RoomHeard(tuple(self._since_zeros), room, 0.0)
                self._since_zeros.clear()
                self._quietest_before = []
                return level - self.floor_db
        if self.floor_db is None or level < self.floor_db:
            self.floor_db = level
        else:
            self.floor_db += self._rise
        return level - self.floor_db

    def _room_is_back(self) -> float | None:
        """The room's floor, if the sound since the last zeros has been a room's: ROOM_BACK_S of
        it steady within ROOM_SPREAD_DB and under ROOM_MAX_DB, ROOM_QUICK_S of it so that comes down
        to its quietest moment before, or ROOM_BACK_UNEVEN_S of it under ROOM_MAX_DB; else None."""
        levels = list(self._since_zeros)
        recent = levels[-self._steady_frames:]
        if len(recent) == self._steady_frames and _steady_and_quiet(recent):
            return min(recent)
        quick = levels[-self._quick_frames:]
        if (len(levels) >= self._quick_after
                and len(self._quietest_before) == ROOM_QUICK_RANK and _steady_and_quiet(quick)
                and min(quick) >= ROOM_QUICK_MIN_DB and min(quick) <= self._quietest_before[-1] + ROOM_QUICK_DB):
            return min(min(quick), self._quietest_before[-1])
        if len(levels) == self._since_zeros.maxlen and max(levels) <= ROOM_MAX_DB:
            return min(levels)
        return None

    def _room_before_zeros(self) -> RoomHeard | None:
        """What the sound since the zeros before showed, if it ended in ROOM_BEFORE_ZEROS_S of
        sound steady within ROOM_SPREAD_DB and under ROOM_MAX_DB (the very last frame, which the
        zeros may have begun inside, only under ROOM_MAX_DB); else None."""
        levels = tuple(self._since_zeros)
        n = max(1, round(ROOM_BEFORE_ZEROS_S / self._frame_s))
        last = levels[-n - 1:-1]
        if len(levels) > n + 1 and _steady_and_quiet(last) and levels[-1] <= ROOM_MAX_DB:
            return RoomHeard(levels, min(last), self._frame_s)
        return None

    def hisses(self, frame: np.ndarray) -> bool:
        """Whether an unvoiced frame's high frequencies (its first difference: +3 dB at 4 kHz,
        -22 dB at 200 Hz) stand `hiss_db` above their median over unvoiced frames, which this
        tracks. A median, not the whole band's minimum: outside speech a real microphone's clicks
        and breaths put single frames 8-20 dB above the quietest, where the median holds."""
        if self.hiss_db <= 0:
            return False
        if rms_db(frame) < DIGITAL_SILENCE_DB:
            return False  # zeros: no hiss, and nothing the room's median may learn
        level = rms_db(np.diff(frame))
        if self._keep:
            return self.hiss_median_db is not None and level - self.hiss_median_db >= self.hiss_db
        if self.hiss_median_db is None:
            self.hiss_median_db = level
        loud = level - self.hiss_median_db >= self.hiss_db
        self.hiss_median_db += 0.5 if level > self.hiss_median_db else -0.5  # the median, in a second or two
        return loud

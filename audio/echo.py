"""Keeping the assistant's own voice out of the microphone: echo cancellation and a gate.

Two layers, used together (see docs/audio.md for the choice and its limits):

1. `WebRtcEchoCanceller`: WebRTC's acoustic echo canceller (AEC3) from the `livekit` package's
   audio processing module, whose wheels carry it for Linux, Windows and macOS. For each 10 ms
   microphone frame it is given the audio that was played at the same moment (from the sinks'
   `PlaybackReference`, led by `lead_ms` so the reference never arrives after its echo) and
   subtracts the echo, leaving the user's voice. It adapts in about a second and removes 25-50
   dB of linear echo. Its output is used only while an echo path is detected (`EchoPathDetector`:
   the microphone correlates with what was played): with headphones, or in a recording without
   echo, AEC3's suppressor garbles the user's speech while a reply plays ("Convert 7 meters to
   centimeters." heard as "So remind me to"), so there the audio passes through untouched.
   Without livekit, `make_echo_canceller` returns a pass-through.

2. `EchoGate`, the playback-reference gate: a microphone frame counts as the user only when its
   energy exceeds the echo expected from what was played: the reference energy around the
   measured path delay (estimated by correlating the two energy envelopes) times the measured
   echo gain (a high percentile of mic/reference ratios while only the assistant talks), plus a
   margin. It catches what the canceller leaves (non-linear distortion, the first moments before
   it adapts) and is the only protection when no canceller is available.
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

import numpy as np

from .blocks import SAMPLE_RATE, AudioBlock, to_pcm16
from .errors import AudioError
from .reference import PlaybackReference
from .resample import Framer

log = logging.getLogger(__name__)


class EchoCanceller:
    """Interface: `process(block) -> block` with the echo of the playback removed."""

    name = "none"

    def process(self, block: AudioBlock) -> AudioBlock:
        return block


@dataclass(frozen=True)
class EchoPathConfig:
    """When the microphone is taken to hold an echo of the playback.

    window_ms: microphone audio correlated with the reference at a time.
    max_delay_ms: longest speaker-to-mic delay searched (output latency + air).
    threshold: normalized correlation (after pre-emphasis) at the best delay that may mark an echo,
        when a later window, not overlapping, finds it again at that delay (`EchoPathDetector`);
        the echo alone gives 0.45-0.95, unrelated speech mostly below 0.2 (up to 0.55 by chance).
    sure: a correlation that marks an echo at once.
    first_ms: the playback's audio heard before the first measurement.
    confirm_ms: the least audio a window measured below `sure` covers.
    memory_s: an echo path found stays assumed for this long (double talk lowers the correlation).
    every_frames: 10 ms frames between two measurements.
    """
    window_ms: int = 400
    max_delay_ms: int = 250
    threshold: float = 0.35
    sure: float = 0.7
    first_ms: int = 100
    confirm_ms: int = 200
    memory_s: float = 8.0
    every_frames: int = 5

    def __post_init__(self):
        if not 10 <= self.first_ms <= self.window_ms:
            raise AudioError("echo path: first_ms must lie in 10..window_ms")
        if not self.first_ms <= self.confirm_ms <= self.window_ms:
            raise AudioError("echo path: confirm_ms must lie in first_ms..window_ms")
        if self.window_ms < 50 or self.max_delay_ms < 0 or self.memory_s <= 0 or self.every_frames < 1:
            raise AudioError("echo path: window_ms >= 50, max_delay_ms >= 0, memory_s > 0, every_frames >= 1")
        if not 0 < self.threshold <= self.sure < 1:
            raise AudioError("echo path: threshold and sure must lie in (0, 1), threshold <= sure")


class EchoPathDetector:
    """Whether the microphone holds an echo of the playback: the best normalized correlation of
    the pre-emphasized mic window with the reference over the delays searched.

    A correlation over `sure` is an echo, measured from `first_ms` after the playback (re)started
    (the canceller's output is then used from the reply's first moments, as the echo gate that
    follows it expects). One between the threshold and `sure`, over at least `confirm_ms` of
    audio, is an echo when an earlier window that shares none of its audio passed the threshold at
    the same delay (within `LAG_TOLERANCE`). A user speaking just as a reply starts correlates
    with it by chance (0.35-0.55, measured with a real voice and with espeak-ng over espeak-ng)
    at a delay that holds only while the windows share their audio, and the canceller would then
    garble their words. A real path keeps its delay, give or take the few milliseconds by which
    the playback's clock settles in its first second; its echo alone correlates at 0.45-0.95
    (lower under a microphone's hiss, or through resampling that blurs the finest detail).
    The earlier an echo is found the better: the gates that follow measure the echo the canceller
    leaves, and a late switch to its output leaves them expecting the louder echo for a while.
    """

    LAG_TOLERANCE = 128  # samples (8 ms)

    def __init__(self, config: EchoPathConfig = EchoPathConfig()):
        self.config = c = config
        self._win = c.window_ms * SAMPLE_RATE // 1000
        self._lag = c.max_delay_ms * SAMPLE_RATE // 1000
        self._min_heard = c.first_ms * SAMPLE_RATE // 1000
        self._min_confirm = c.confirm_ms * SAMPLE_RATE // 1000
        self.correlation = 0.0
        self.found_t: float | None = None   # time an echo was last measured
        self._restart()

    def _restart(self) -> None:
        self._mic = np.zeros(self._win, np.float32)
        self._ref = np.zeros(self._win + self._lag, np.float32)
        self._heard = 0         # samples pushed since the playback (re)started
        self._frames = 0
        self._last_t: float | None = None
        # (time, end of its audio in samples heard, delay) of windows over the threshold
        self._passed: list[tuple[float, int, int]] = []

    def push(self, mic: np.ndarray, ref: np.ndarray, t: float) -> bool:
        """Adds one frame each of microphone and (time-aligned) reference; True while an echo path
        is assumed."""
        n = len(mic)
        if self._last_t is not None and t - self._last_t > 2.5 * n / SAMPLE_RATE:
            self._restart()  # the playback was idle: the window's audio is of an earlier reply
        self._last_t = t
        self._mic = np.concatenate([self._mic[n:], mic])
        self._ref = np.concatenate([self._ref[n:], ref])
        self._heard += n
        self._frames += 1
        if self._frames % self.config.every_frames == 0 and self._heard >= self._min_heard:
            self.correlation, lag = self._measure()
            if self.correlation >= self.config.sure:
                self.found_t = t
            elif self.correlation >= self.config.threshold and self._heard >= self._min_confirm:
                start = self._heard - min(self._heard, self._win)
                if any(end <= start and abs(lag - delay) <= self.LAG_TOLERANCE
                       for _, end, delay in self._passed):
                    self.found_t = t
                self._passed = [p for p in self._passed if t - p[0] <= self.config.memory_s]
                self._passed.append((t, self._heard, lag))
        return self.found_t is not None and t - self.found_t <= self.config.memory_s

    def _measure(self) -> tuple[float, int]:
        """The best normalized correlation and its offset into the reference window."""
        h = min(self._heard, self._win)            # the window's audio heard since the playback started
        m = _emphasis(self._mic[-h:])
        r = _emphasis(self._ref[-(h + self._lag):])
        e_m = float(np.dot(m, m))
        if e_m < 1e-9:
            return 0.0, 0
        size = 1 << int(np.ceil(np.log2(len(m) + len(r))))
        xc = np.fft.irfft(np.fft.rfft(r, size) * np.conj(np.fft.rfft(m, size)), size)[:len(r) - len(m) + 1]
        c = np.concatenate([[0.0], np.cumsum(r.astype(np.float64) ** 2)])
        e_r = c[len(m):] - c[:len(c) - len(m)]     # reference energy under the window, per offset
        rho = np.where(e_r > 1e-9, np.abs(xc) / np.sqrt(e_m * np.maximum(e_r, 1e-12)), 0.0)
        best = int(np.argmax(rho))
        return float(rho[best]), best


_SMOOTH = np.array([1, 4, 6, 4, 1], np.float32) / 16


def _emphasis(x: np.ndarray) -> np.ndarray:
    """The band the echo path is measured in, about 1-5 kHz: speech's low end correlates by chance
    (the difference takes it out), and a microphone's own hiss, white, lies mostly above it (the
    smoothing takes that out: an echo at -20 dB over -50 dBFS of hiss then correlates at 0.66, not
    0.31)."""
    return np.convolve(np.diff(x), _SMOOTH, "same")


def webrtc_aec_available() -> bool:
    try:
        from livekit import rtc  # noqa: F401
    except Exception:   # ImportError, or a wheel whose native library fails to load
        return False
    return True


class WebRtcEchoCanceller(EchoCanceller):
    """WebRTC AEC3 through livekit's AudioProcessingModule (10 ms frames, 16 kHz, int16).

    Output blocks have the input's times; while nothing has been played for `idle_s` the audio
    passes through untouched (and the canceller keeps what it learned of the room).
    """

    name = "webrtc-aec3"
    FRAME = SAMPLE_RATE // 100

    def __init__(self, reference: PlaybackReference, *, lead_ms: float = 20.0,
                 idle_s: float = 2.0, noise_suppression: bool = False,
                 echo_path: EchoPathConfig | None = EchoPathConfig()):
        """echo_path: when the canceller's output is used (None: always, while a reply plays)."""
        try:
            from livekit import rtc
        except Exception as exc:   # ImportError, or a native library that fails to load
            raise AudioError("the WebRTC echo canceller needs the livekit package "
                             f"(pip install livekit): {exc}") from exc

        self._rtc = rtc
        self.reference = reference
        self.lead_s = lead_ms / 1000
        self.idle_s = idle_s
        self._apm = rtc.AudioProcessingModule(echo_cancellation=True,
                                              noise_suppression=noise_suppression,
                                              high_pass_filter=False, auto_gain_control=False)
        self._frames = Framer(self.FRAME)
        self._path = EchoPathDetector(echo_path) if echo_path is not None else None
        self._used = False          # whether the last frame was the canceller's output
        self._ramp = np.linspace(0.0, 1.0, self.FRAME, dtype=np.float32)
        self.frames_processed = 0
        self.frames_cancelled = 0   # frames whose output is the canceller's
        self.errors = 0

    def process(self, block: AudioBlock) -> AudioBlock:
        frames = self._frames.push(block)
        if not frames:
            return AudioBlock(np.zeros(0, np.float32), block.t)
        return AudioBlock(np.concatenate([self._frame(f, t) for t, f in frames]), frames[0][0])

    def _frame(self, frame: np.ndarray, t: float) -> np.ndarray:
        if not self.reference.active(t, self.idle_s):
            self._used = False
            return frame
        rtc = self._rtc
        ref = self.reference.read(t + self.lead_s, self.FRAME)
        echo = self._path is None or self._path.push(frame, ref, t)
        far = rtc.AudioFrame(to_pcm16(ref).tobytes(), SAMPLE_RATE, 1, self.FRAME)
        near = rtc.AudioFrame(to_pcm16(frame).tobytes(), SAMPLE_RATE, 1, self.FRAME)
        try:
            self._apm.process_reverse_stream(far)
            self._apm.set_stream_delay_ms(0)   # the reference is already aligned (by time)
            self._apm.process_stream(near)
        except RuntimeError as exc:   # the native module refused: pass the frame through
            self.errors += 1
            if self.errors == 1:
                log.warning("echo canceller failed (%s); passing audio through", exc)
            return frame
        self.frames_processed += 1
        cancelled = np.frombuffer(near.data, np.int16).astype(np.float32) / 32768.0
        was, self._used = self._used, echo
        if echo:
            self.frames_cancelled += 1
        if echo == was:
            return cancelled if echo else frame
        w = self._ramp if echo else self._ramp[::-1]   # a 10 ms crossfade: no click at the switch
        return w * cancelled + (1 - w) * frame


def make_echo_canceller(reference: PlaybackReference, kind: str = "auto",
                        **kwargs) -> EchoCanceller:
    """"webrtc" (error if unavailable), "none", or "auto" (webrtc when livekit loads)."""
    if kind not in ("auto", "webrtc", "none"):
        raise ValueError("echo canceller must be 'auto', 'webrtc' or 'none'")
    if kind == "none":
        return EchoCanceller()
    if kind == "auto" and not webrtc_aec_available():
        log.warning("livekit is not installed: no echo canceller, only the playback-reference "
                    "gate guards against the assistant interrupting itself; prefer headphones")
        return EchoCanceller()
    return WebRtcEchoCanceller(reference, **kwargs)


@dataclass(frozen=True)
class EchoGateConfig:
    max_delay_ms: int = 200          # longest path (output latency + air) searched
    tail_ms: int = 150               # reverberation after the direct path
    margin_db: float = 8.0           # the user must be this much above the expected echo
    initial_echo_gain_db: float = 0.0  # expected echo / reference before it is measured
    history_s: float = 4.0           # ratio and envelope history for the estimates
    percentile: float = 95.0         # of echo-only mic/reference ratios, taken as the echo gain
    min_measurements: int = 10       # frames needed before the measured gain is used
    floor_db: float = -55.0          # quieter mic frames are never the user
    reference_floor_db: float = -60.0  # quieter reference frames count as silence
    echo_likeness: float = 0.8       # spectral similarity to the reference that marks a
                                     # voiced frame as echo, usable to measure the echo gain


class EchoGate:
    """Decides per frame whether the mic holds more than the echo of the playback.

    `user_dominant(frame, t)` takes a mic frame (after the echo canceller, if any) and its
    capture time; frames must be consecutive and of one size (`frame_samples`).
    """

    def __init__(self, reference: PlaybackReference, frame_samples: int,
                 config: EchoGateConfig | None = None):
        self.reference = reference
        self.config = c = config or EchoGateConfig()
        self.n = frame_samples
        self.f = frame_samples / SAMPLE_RATE
        hist = max(8, int(c.history_s / self.f))
        self._ratios: deque[float] = deque(maxlen=hist)
        self._env_mic: deque[float] = deque(maxlen=hist)
        self._env_ref: deque[float] = deque(maxlen=hist)
        self._max_lag = int(np.ceil(c.max_delay_ms / 1000 / self.f))
        self._tail = int(np.ceil(c.tail_ms / 1000 / self.f))
        self._floor = 10 ** (c.floor_db / 10)
        self._ref_floor = 10 ** (c.reference_floor_db / 10)
        self.delay_frames: int | None = None   # measured path delay, in frames
        self._since_estimate = 0
        self.echo_gain = 10 ** (c.initial_echo_gain_db / 10)   # power ratio
        self.last_expected_db = -120.0

    def forget_echo(self) -> None:
        """Measure the echo gain afresh (the signal changed); the last estimate holds until then."""
        self._ratios.clear()

    def _reference_frames(self, t: float) -> np.ndarray:
        """Reference frames from t - (max_lag + tail) frames to t + 1 frame, one per row."""
        back = self._max_lag + self._tail
        x = self.reference.read(t - back * self.f, (back + 2) * self.n)
        return x.reshape(back + 2, self.n)

    def user_dominant(self, frame: np.ndarray, t: float, voiced: bool = True) -> bool:
        """Whether the frame at `t` holds more than the echo; `voiced`: the VAD's verdict,
        which decides (with the frame's likeness to the reference) whether it may serve to
        measure the echo gain."""
        c = self.config
        e_mic = float(np.mean(np.square(frame, dtype=np.float64)))
        frames = self._reference_frames(t)
        energy = np.mean(np.square(frames, dtype=np.float64), axis=1)
        # lag j (frames the echo trails the reference) is row -2 - j; j = -1 allows a reference
        # stamped a frame late.
        if self.delay_frames is not None:
            lags = range(self.delay_frames - 1, self.delay_frames + self._tail + 1)
        else:
            lags = range(-1, self._max_lag + self._tail + 1)
        rows = [len(frames) - 2 - j for j in lags if 0 <= len(frames) - 2 - j < len(frames)]
        expected_unit = float(energy[rows].max())
        self._env_mic.append(e_mic)
        self._env_ref.append(float(energy[-2]))
        self._update_delay()
        if expected_unit < self._ref_floor:
            self.last_expected_db = -120.0
            return e_mic > self._floor
        expected = self.echo_gain * expected_unit
        self.last_expected_db = 10 * np.log10(max(expected, 1e-12))
        user = e_mic > self._floor and e_mic > expected * 10 ** (c.margin_db / 10)
        if not user and (not voiced or e_mic <= self._floor
                         or self._likeness(frame, frames[rows]) >= c.echo_likeness):
            self._ratios.append(e_mic / expected_unit)
            if len(self._ratios) >= c.min_measurements:
                self.echo_gain = float(np.percentile(self._ratios, c.percentile))
        return user

    def _likeness(self, frame: np.ndarray, candidates: np.ndarray) -> float:
        """Best correlation of the frame's log spectrum (200-4000 Hz) with a reference frame's."""
        lo, hi = int(200 * self.n / SAMPLE_RATE), int(4000 * self.n / SAMPLE_RATE)
        window = np.hanning(self.n)
        spec = np.abs(np.fft.rfft(frame * window))[lo:hi]
        refs = np.abs(np.fft.rfft(candidates * window, axis=1))[:, lo:hi]
        keep = np.mean(np.square(candidates), axis=1) > self._ref_floor
        if not keep.any():
            return 0.0
        a = np.log10(np.square(spec) + 1e-9)
        b = np.log10(np.square(refs[keep]) + 1e-9)
        a = a - a.mean()
        b = b - b.mean(axis=1, keepdims=True)
        denom = np.sqrt(np.sum(a * a) * np.sum(b * b, axis=1)) + 1e-12
        return float(np.max(b @ a / denom))

    def _update_delay(self) -> None:
        self._since_estimate += 1
        if self._since_estimate < max(1, int(0.5 / self.f)) or len(self._env_ref) < 32:
            return
        self._since_estimate = 0
        m = np.log10(np.asarray(self._env_mic) + 1e-10)
        r = np.log10(np.asarray(self._env_ref) + 1e-10)
        active = np.asarray(self._env_ref) > self._ref_floor
        best, best_lag = 0.0, None
        for lag in range(0, self._max_lag + 1):
            a = m[lag:]
            b = r[:len(r) - lag]
            sel = active[:len(r) - lag]
            if sel.sum() < 16:
                continue
            a, b = a[sel], b[sel]
            if a.std() < 1e-6 or b.std() < 1e-6:
                continue
            corr = float(np.corrcoef(a, b)[0, 1])
            if corr > best:
                best, best_lag = corr, lag
        self.delay_frames = best_lag if best >= 0.5 else None

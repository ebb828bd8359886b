"""Smart Turn v3.2 (pipecat's end-of-turn model, BSD-2) as an end-of-turn cue from the audio.

The model reads the last 8 s of a turn and gives P(the speaker has finished). Its input is
Whisper's log-mel spectrogram of that window, computed here in numpy (no torch, no transformers):

    window   the turn's last 8 s at 16 kHz, zeros in front of a shorter turn (`last_window`)
    normalize the whole 8 s window to zero mean and unit variance (the zeros in front included,
             as the model's own inference code does: it pads first, then normalizes)
    log-mel  STFT (periodic Hann of 400, hop 160, centred with reflected edges) -> power ->
             80 Slaney mel bins (0-8 kHz) -> log10 (floor 1e-10) -> the last frame dropped ->
             clamped to (max - 8) -> (x + 4) / 4: float32 [80, 800] (`log_mel`)

`SmartTurnModel` runs the int8 ONNX graph (`input_features` [1, 80, 800] -> a sigmoid
probability [1, 1]) in one onnxruntime session, one intra-op thread, warmed once. A call costs
tens of ms on a CPU, so it never runs per frame nor on the event loop: `smart_turn_stage`
calls it once per voice pause, in its own worker thread.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .blocks import SAMPLE_RATE

MODEL_NAME = "smart-turn-v3.2"
USES = ("auto", "on", "off")
MODEL_FILE = "smart-turn-v3.2-cpu.onnx"
WINDOW_S = 8.0                      # the model always reads 8 s
WINDOW_SAMPLES = int(WINDOW_S * SAMPLE_RATE)
N_FFT, HOP, N_MELS = 400, 160, 80
FRAMES = WINDOW_SAMPLES // HOP      # 800


@dataclass(frozen=True)
class SmartTurnConfig:
    """The Smart Turn cue ([audio.smart_turn]).

    use: "auto" (the default: on when the model is at hand, `model_path` or the registry copy
        fetched, and the recognizer learned from people's voices; on real speakers the cue halves
        the wait after commands and digit strings, which Whisper leaves without a full stop,
        while on synthetic voices, the demo's own recognizer's world, it carries no information:
        docs/benchmarks.md), "on" (a missing model is an error at start) or "off".
    model_path: the ONNX file; None: the registry copy (`foresay models fetch smart-turn-v3.2`).
    threads: onnxruntime intra-op threads (1: the call stays off the other cores).
    window_s: how much of the turn's end the model hears, at most 8 s (the rest of the 8 s
        input is zeros in front).
    The audio judged at a voice pause ends where the pause was declared (`VoicePaused.t`,
    [audio.endpointer] pause_ms after the last voiced frame); its weight in the end-of-turn
    decision is [audio.turn_end] cue_weight.
    """
    use: str = "auto"
    model_path: str | None = None
    threads: int = 1
    window_s: float = WINDOW_S

    def __post_init__(self):
        if self.use not in USES:
            raise ValueError(f"smart turn: use must be one of {', '.join(USES)}, got {self.use!r}")
        if self.threads < 1:
            raise ValueError("smart turn: threads must be at least 1")
        if not 0.0 < self.window_s <= WINDOW_S:
            raise ValueError(f"smart turn: window_s must be in (0, {WINDOW_S:g}] (the model reads {WINDOW_S:g} s)")


# --- features ---------------------------------------------------------------------------------

def last_window(audio: np.ndarray, samples: int = WINDOW_SAMPLES) -> np.ndarray:
    """The last `samples` of `audio` (float32), zero-padded in front when it is shorter."""
    audio = np.asarray(audio, np.float32).reshape(-1)
    if len(audio) >= samples:
        return audio[len(audio) - samples:]
    return np.concatenate([np.zeros(samples - len(audio), np.float32), audio])


def normalize(audio: np.ndarray) -> np.ndarray:
    """Zero mean, unit variance (1e-7 added to the variance: silence stays finite)."""
    audio = np.asarray(audio, np.float32)
    return (audio - audio.mean()) / np.sqrt(audio.var() + 1e-7)


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney's scale: linear below 1 kHz (3 mel per 200 Hz), logarithmic above."""
    hz = np.asarray(hz, np.float64)
    step = np.log(6.4) / 27.0
    return np.where(hz < 1000.0, 3.0 * hz / 200.0, 15.0 + np.log(np.maximum(hz, 1e-9) / 1000.0) / step)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, np.float64)
    step = np.log(6.4) / 27.0
    return np.where(mel < 15.0, 200.0 * mel / 3.0, 1000.0 * np.exp(step * (mel - 15.0)))


@functools.lru_cache(maxsize=1)
def mel_filters() -> np.ndarray:
    """[N_MELS, N_FFT // 2 + 1] triangular filters on Slaney's scale, each of unit area."""
    edges = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(SAMPLE_RATE / 2), N_MELS + 2))
    bins = np.linspace(0.0, SAMPLE_RATE / 2, N_FFT // 2 + 1)
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bins[None, :] - lower) / (centre - lower)
    falling = (upper - bins[None, :]) / (upper - centre)
    tri = np.maximum(0.0, np.minimum(rising, falling))
    return tri * (2.0 / (upper - lower))


@functools.lru_cache(maxsize=1)
def _hann() -> np.ndarray:
    n = np.arange(N_FFT)
    return 0.5 - 0.5 * np.cos(2 * np.pi * n / N_FFT)   # periodic: the window of an N-point DFT


def log_mel(audio: np.ndarray) -> np.ndarray:
    """Whisper's log-mel spectrogram of 16 kHz audio: float32 [80, len // 160]."""
    x = np.asarray(audio, np.float64).reshape(-1)
    if len(x) <= N_FFT // 2:
        raise ValueError(f"log-mel needs more than {N_FFT // 2} samples, got {len(x)}")
    x = np.pad(x, N_FFT // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(x, N_FFT)[::HOP]
    power = np.abs(np.fft.rfft(frames * _hann(), axis=-1)) ** 2           # [frames, bins]
    mel = np.log10(np.maximum(power @ mel_filters().T, 1e-10)).T[:, :-1]  # Whisper drops the last frame
    mel = np.maximum(mel, mel.max() - 8.0)
    return ((mel + 4.0) / 4.0).astype(np.float32)


def smart_turn_features(audio: np.ndarray, window_s: float = WINDOW_S) -> np.ndarray:
    """The model's `input_features` [1, 80, 800] for a turn's audio (see the module docstring)."""
    kept = last_window(audio, int(window_s * SAMPLE_RATE))
    return log_mel(normalize(last_window(kept)))[None]


# --- the model ----------------------------------------------------------------------------------

def wanted(config: SmartTurnConfig, hears_people: bool = True) -> bool:
    """Whether the cue runs: "on", or "auto" with the model at hand (no download is started) beside
    a recognizer that `hears_people` (`AsrConfig.hears_people`)."""
    from foresay.engine.errors import ModelUnavailable

    if config.use != "auto":
        return config.use == "on"
    if not hears_people:
        return False
    try:
        resolve_model_path(config)
    except ModelUnavailable:
        return False
    return True


def resolve_model_path(config: SmartTurnConfig) -> Path:
    """The ONNX file of `config`, or a clear error that says how to fetch it."""
    from foresay.engine.errors import ModelUnavailable
    from foresay.engine.registry_models import require_registry_model

    path = Path(config.model_path) if config.model_path else require_registry_model(MODEL_NAME) / MODEL_FILE
    if not path.is_file():
        raise ModelUnavailable(f"Smart Turn model {path} does not exist: run `foresay models fetch {MODEL_NAME}`"
                               f" (or give the path of {MODEL_FILE})")
    return path


class SmartTurnModel:
    """One onnxruntime session of Smart Turn, created and warmed once; `predict(audio)` -> P(end)."""

    def __init__(self, config: SmartTurnConfig | None = None):
        import onnxruntime

        self.config = config or SmartTurnConfig()
        self.path = resolve_model_path(self.config)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.config.threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(str(self.path), sess_options=options,
                                                     providers=["CPUExecutionProvider"])
        names = [i.name for i in self._session.get_inputs()]
        if names != ["input_features"]:
            raise ValueError(f"{self.path} is not a Smart Turn v3 model: its inputs are {names}")
        self.calls = 0
        self.predict_features(np.zeros((1, N_MELS, FRAMES), np.float32))  # warm-up, not counted
        self.calls = 0

    def predict_features(self, features: np.ndarray) -> float:
        (out,) = self._session.run(None, {"input_features": np.asarray(features, np.float32)})
        self.calls += 1
        return float(np.asarray(out).reshape(-1)[0])

    def predict(self, audio: np.ndarray) -> float:
        """P(end of turn) for a turn's audio (16 kHz; its last `window_s` are heard)."""
        return self.predict_features(smart_turn_features(audio, self.config.window_s))

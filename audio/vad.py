"""Voice activity detection behind one small interface.

A VAD looks at fixed-size frames of 16 kHz mono float32 audio and says whether each is speech:

    vad = make_vad(VadConfig(kind="webrtc", aggressiveness=2, frame_ms=30))
    vad.frame_samples          # 480
    vad.is_speech(frame)       # bool; vad.probability(frame) gives the score behind it
    vad.reset()                # forget state between unrelated streams

Two implementations:
- `WebRtcVad`: Google's WebRTC GMM VAD (webrtcvad-wheels) on 10, 20 or 30 ms frames; cheap
  and instant, aggressiveness 0 (keeps most) to 3 (rejects most non-speech). The default.
- `SileroVad`: the Silero VAD network that faster-whisper ships (an ONNX file run with
  onnxruntime) on 32 ms frames; more robust in noise and music, ~0.1 ms per frame on a CPU.

Both judge absolute levels: the same reading 30 dB quieter (a laptop microphone at arm's length)
has a sixth fewer of its frames called speech, the fading ends of words first, and the endpointer
then finds pauses inside requests that are not there. `LevelledVad` raises each frame before the
VAD hears it, so that the loudest recent frame sits at `speech_level_db`: the gain follows the
loudest frame heard, which decays `decay_db_per_s` when nothing louder comes; it only ever
boosts, by at most `max_gain_db` (a loud microphone is heard as it is; digital silence stays
silence), clipping to full scale. Only the VAD hears the boost: the endpointer's noise-floor
margin, the recognizer and the turn's audio get the samples as they came.
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

import numpy as np

from .blocks import SAMPLE_RATE, sound_db, to_pcm16, zeros
from .errors import AudioError


@dataclass(frozen=True)
class VadConfig:
    kind: str = "webrtc"          # "webrtc" or "silero"
    aggressiveness: int = 2       # webrtc only: 0..3
    frame_ms: int = 30            # webrtc only: 10, 20 or 30 (silero always uses 32 ms)
    threshold: float = 0.5        # speech when probability >= threshold (silero's score)
    model_path: str | None = None  # silero only: an ONNX file; default faster-whisper's copy
    speech_level_db: float = -25.0  # frames are raised (never lowered) so the loudest recent
                                  # one sits here before the VAD hears them (`LevelledVad`) ...
    max_gain_db: float = 30.0     # ... by at most this much (0: the VAD hears the samples as they came)

    def __post_init__(self):
        if self.kind not in ("webrtc", "silero"):
            raise ValueError(f"VAD kind must be 'webrtc' or 'silero', not {self.kind!r}")
        if self.aggressiveness not in (0, 1, 2, 3):
            raise ValueError("webrtc VAD aggressiveness must be 0, 1, 2 or 3")
        if self.kind == "webrtc" and self.frame_ms not in (10, 20, 30):
            raise ValueError("webrtc VAD frames must be 10, 20 or 30 ms")
        if not 0.0 < self.threshold < 1.0:
            raise ValueError("VAD threshold must be between 0 and 1")
        if not -60.0 <= self.speech_level_db <= 0.0:
            raise ValueError("VAD speech_level_db must be between -60 and 0 dBFS")
        if self.max_gain_db < 0:
            raise ValueError("VAD max_gain_db must not be negative")


ZEROS_RESET_S = 0.3  # after this long a run of zeros, the VAD starts afresh (a dropout is shorter)


class Vad:
    """Base class: `frame_samples`, `probability(frame)`, `is_speech(frame)`, `reset()`."""

    frame_samples: int
    threshold: float = 0.5
    _zero_samples: int = 0  # the run of zeros just heard

    def probability(self, frame: np.ndarray) -> float:
        raise NotImplementedError

    def is_speech(self, frame: np.ndarray) -> bool:
        """Whether `frame` is speech. Zeros are not, and the VAD does not hear them: one that adapts
        to what it hears (WebRTC's noise model, Silero's recurrent state, the levelling's loudest
        frame) takes zeros for the room, and then calls the room speech when it comes back
        (WebRTC's: 100 of 100 frames of room noise after 2 s of zeros, 4 of 100 without them).
        After `ZEROS_RESET_S` of them (a mute, a waking or gated microphone) it starts afresh,
        as at the start of a stream: what it learned before may not hold, and every sound after
        digital silence is heard alike, the first request and the next."""
        if zeros(frame):
            self._check(frame)  # `probability` checks every other frame
            self._zero_samples += len(frame)
            return False
        if self._zero_samples >= ZEROS_RESET_S * SAMPLE_RATE:
            self.reset()
        self._zero_samples = 0
        return self.probability(frame) >= self.threshold

    def reset(self) -> None:
        pass

    def _check(self, frame: np.ndarray) -> None:
        if len(frame) != self.frame_samples:
            raise ValueError(f"VAD frames must have {self.frame_samples} samples, got {len(frame)}")


class WebRtcVad(Vad):
    def __init__(self, aggressiveness: int = 2, frame_ms: int = 30, threshold: float = 0.5):
        import webrtcvad

        VadConfig(kind="webrtc", aggressiveness=aggressiveness, frame_ms=frame_ms)  # validate
        self._vad = webrtcvad.Vad(aggressiveness)
        self._aggressiveness = aggressiveness
        self.frame_samples = SAMPLE_RATE * frame_ms // 1000
        self.threshold = threshold

    def reset(self) -> None:
        import webrtcvad

        self._vad = webrtcvad.Vad(self._aggressiveness)  # its noise model, as at the start

    def probability(self, frame: np.ndarray) -> float:
        self._check(frame)
        return 1.0 if self._vad.is_speech(to_pcm16(frame).tobytes(), SAMPLE_RATE) else 0.0


def silero_model_path() -> str:
    """The Silero VAD ONNX file bundled with faster-whisper (found without importing it)."""
    spec = importlib.util.find_spec("faster_whisper")
    if spec is None or not spec.submodule_search_locations:
        raise AudioError("the Silero VAD needs faster-whisper installed (it ships the model); "
                         "use the webrtc VAD instead")
    assets = os.path.join(list(spec.submodule_search_locations)[0], "assets")
    names = sorted(n for n in os.listdir(assets) if n.startswith("silero") and n.endswith(".onnx"))
    if not names:
        raise AudioError(f"no Silero VAD model found in {assets}")
    return os.path.join(assets, names[-1])


class SileroVad(Vad):
    """Streaming Silero VAD: 512-sample frames with 64 samples of context and LSTM state."""

    CONTEXT = 64

    def __init__(self, model_path: str | None = None, threshold: float = 0.5):
        try:
            import onnxruntime
        except ImportError as exc:
            raise AudioError("the Silero VAD needs onnxruntime; "
                             "use the webrtc VAD instead") from exc
        opts = onnxruntime.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 4
        self._session = onnxruntime.InferenceSession(
            model_path or silero_model_path(), providers=["CPUExecutionProvider"],
            sess_options=opts)
        self.frame_samples = 512
        self.threshold = threshold
        self.reset()

    def reset(self) -> None:
        self._h = np.zeros((1, 1, 128), np.float32)
        self._c = np.zeros((1, 1, 128), np.float32)
        self._context = np.zeros(self.CONTEXT, np.float32)

    def probability(self, frame: np.ndarray) -> float:
        self._check(frame)
        frame = np.asarray(frame, np.float32)
        x = np.concatenate([self._context, frame])[None, :]
        out, self._h, self._c = self._session.run(None, {"input": x, "h": self._h, "c": self._c})
        self._context = frame[-self.CONTEXT:].copy()
        return float(np.asarray(out).reshape(-1)[0])


class LevelledVad(Vad):
    def __init__(self, vad: Vad, speech_level_db: float = -25.0, max_gain_db: float = 30.0,
                 decay_db_per_s: float = 1.0):
        if max_gain_db < 0 or decay_db_per_s < 0:
            raise ValueError("VAD levelling: max_gain_db and decay_db_per_s must not be negative")
        self.vad = vad
        self.frame_samples = vad.frame_samples
        self.threshold = vad.threshold
        self.speech_level_db = speech_level_db
        self.max_gain_db = max_gain_db
        self._decay_per_frame = decay_db_per_s * vad.frame_samples / SAMPLE_RATE
        self._loudest_db: float | None = None

    @property
    def gain_db(self) -> float:
        """The boost the next frame gets if it is no louder than the loudest recent one."""
        if self._loudest_db is None:
            return 0.0
        return float(np.clip(self.speech_level_db - self._loudest_db, 0.0, self.max_gain_db))

    def probability(self, frame: np.ndarray) -> float:
        self._check(frame)
        level = sound_db(frame)
        if self._loudest_db is None or level > self._loudest_db:
            self._loudest_db = level
        else:
            self._loudest_db -= self._decay_per_frame
        gain = self.gain_db
        if gain > 0:
            frame = np.clip(np.asarray(frame, np.float32) * np.float32(10 ** (gain / 20)), -1.0, 1.0)
        return self.vad.probability(frame)

    def reset(self) -> None:
        self.vad.reset()
        self._loudest_db = None


def make_vad(config: VadConfig | None = None) -> Vad:
    config = config or VadConfig()
    if config.kind == "silero":
        vad: Vad = SileroVad(config.model_path, config.threshold)
    else:
        vad = WebRtcVad(config.aggressiveness, config.frame_ms, config.threshold)
    if config.max_gain_db == 0:
        return vad
    return LevelledVad(vad, config.speech_level_db, config.max_gain_db)

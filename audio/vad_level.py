"""A VAD that hears quiet microphones as it hears loud ones.

WebRTC's VAD judges absolute levels: the same reading 30 dB quieter (a laptop microphone at
arm's length) has a sixth fewer of its frames called speech, the fading ends of words first, and
the endpointer then finds pauses inside requests that are not there. `LevelledVad` raises each
frame before the VAD hears it, so that the loudest recent frame sits at `speech_level_db`:

- the gain follows the loudest frame heard, which decays `decay_db_per_s` when nothing louder
  comes (a new speaker, or the same one further away, is re-levelled within seconds);
- it only ever boosts, by at most `max_gain_db` (a loud microphone is heard as it is; digital
  silence stays silence); boosted samples are clipped to full scale;
- only the VAD hears the boost: the endpointer's noise-floor margin, the recognizer and the
  turn's audio get the samples as they came.
"""
from __future__ import annotations

import numpy as np

from .blocks import SAMPLE_RATE, rms_db
from .vad import Vad


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
        level = rms_db(frame)
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

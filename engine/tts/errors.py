"""What can go wrong in text-to-speech, said so that a user can act on it."""
from __future__ import annotations

from foresay.engine.errors import ForesayError


class TtsUnavailable(ForesayError):
    """The TTS engine's software (espeak-ng, Zonos) is not installed or cannot start."""


class InvalidTtsConfig(ForesayError):
    """A TTS config or voice option is out of range or inconsistent."""


class NothingToSay(ForesayError):
    """The text to speak is empty or only whitespace."""


class PreparationCancelled(ForesayError):
    """A cancelled (stale) preparation was asked to play."""


class SynthesisFailed(ForesayError):
    """The engine failed while synthesizing; the message says where."""

"""Errors of the speech recognizer, each with a message meant for the user."""
from foresay.engine.errors import ForesayError


class AsrError(ForesayError):
    """Speech recognition cannot go on: a bad model folder, vocabulary or input."""


class InvalidAsrConfig(AsrError):
    """A configuration value is out of its documented range."""


class IncompatibleModels(AsrError):
    """A draft and a target Whisper that cannot be paired (different vocabularies)."""


class InvalidAudio(AsrError):
    """Audio that is not mono float samples at 16 kHz."""

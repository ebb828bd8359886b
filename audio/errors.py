"""Audio errors: each says what went wrong with which device or file, and what to do about it.

All are `ForesayError`s, so the CLI prints them without a traceback and the app can show them.
"""
from __future__ import annotations

from foresay.engine.errors import ForesayError


class AudioError(ForesayError):
    """Something about sound input or output failed."""


class AudioFileError(AudioError):
    """An audio file is missing, empty, corrupt or in a format that cannot be read."""


class AudioDeviceError(AudioError):
    """A sound device could not be found, opened or kept running."""


class NoAudioDevice(AudioDeviceError):
    """There is no input (or output) device, or none matches the one asked for."""


class DeviceUnavailable(AudioDeviceError):
    """The device exists but cannot be opened now (busy, unplugged, permission)."""


class UnsupportedSampleRate(AudioDeviceError):
    """The device accepts none of the sample rates tried."""


class AudioDeviceLost(AudioDeviceError):
    """A running stream stopped delivering audio and could not be reopened."""

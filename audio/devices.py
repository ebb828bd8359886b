"""Sound devices: listing them, choosing one by index or name, finding a rate it accepts.

PortAudio (through sounddevice) is loaded only when a function here is first called, so
file-only work runs on machines without it. Its errors become `AudioDeviceError`s that name the
device and say what to try.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

from .errors import (AudioDeviceError, DeviceUnavailable, NoAudioDevice, UnsupportedSampleRate)

log = logging.getLogger(__name__)

# Rates tried, after the device's own default, when opening a stream; USB mics often take only
# 48 kHz (or 44.1 kHz), and asking them for 16 kHz fails with "invalid sample rate".
COMMON_RATES = (48_000, 44_100, 16_000, 32_000, 96_000, 22_050, 24_000, 8_000)

# PortAudio error codes (portaudio.h, PaErrorCode) that we explain.
_PA_INVALID_CHANNEL_COUNT = -9998
_PA_INVALID_SAMPLE_RATE = -9997
_PA_INVALID_DEVICE = -9996
_PA_SAMPLE_FORMAT = -9994
_PA_DEVICE_UNAVAILABLE = -9985


def sd():
    """The sounddevice module, or a clear error when PortAudio is missing."""
    try:
        import sounddevice
    except OSError as exc:  # sounddevice raises OSError when libportaudio cannot be loaded
        raise AudioDeviceError(
            "the PortAudio library is missing, so no sound device can be used; install it "
            "(Debian/Ubuntu: apt install libportaudio2) or use files instead") from exc
    return sounddevice


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    hostapi: str
    max_input_channels: int
    max_output_channels: int
    default_samplerate: float
    is_default_input: bool
    is_default_output: bool

    @property
    def is_input(self) -> bool:
        return self.max_input_channels > 0

    @property
    def is_output(self) -> bool:
        return self.max_output_channels > 0

    def as_dict(self) -> dict:
        return asdict(self)


def list_devices() -> list[DeviceInfo]:
    """Every device PortAudio sees, with the default input and output marked."""
    s = sd()
    try:
        devices = s.query_devices()
        hostapis = s.query_hostapis()
        default_in, default_out = _default_indices()
    except s.PortAudioError as exc:
        raise explain_portaudio_error(exc, "list the sound devices") from exc
    return [DeviceInfo(index=int(d["index"]), name=str(d["name"]),
                       hostapi=str(hostapis[d["hostapi"]]["name"]),
                       max_input_channels=int(d["max_input_channels"]),
                       max_output_channels=int(d["max_output_channels"]),
                       default_samplerate=float(d["default_samplerate"]),
                       is_default_input=int(d["index"]) == default_in,
                       is_default_output=int(d["index"]) == default_out)
            for d in devices]


def _default_indices() -> tuple[int, int]:
    s = sd()
    default = s.default.device
    result = []
    for i, kind in enumerate(("input", "output")):
        idx = default[i]
        if idx is None or int(idx) < 0:
            try:   # PortAudio's own default for the default host API
                idx = int(s.query_devices(kind=kind)["index"])
            except (s.PortAudioError, ValueError):
                idx = -1
        result.append(int(idx))
    return result[0], result[1]


def resolve_device(spec: int | str | None, kind: str) -> DeviceInfo:
    """The device meant by `spec`: None (the default), an index, or (part of) a name.

    `kind` is "input" or "output". A name matches case-insensitively, an exact name first, then
    the devices whose name contains it (the default host API's first). Raises NoAudioDevice
    with the candidates when nothing fits.
    """
    if kind not in ("input", "output"):
        raise ValueError("kind must be 'input' or 'output'")
    devices = list_devices()
    usable = [d for d in devices if (d.is_input if kind == "input" else d.is_output)]
    hint = f"run `foresay devices` to see the {kind} devices"
    if not usable:
        raise NoAudioDevice(f"no {kind} device found (is one plugged in and enabled?)")
    if spec is None or (isinstance(spec, str) and spec.strip() == ""):
        default = [d for d in usable
                   if (d.is_default_input if kind == "input" else d.is_default_output)]
        if default:
            return default[0]
        log.warning("no default %s device; using %s", kind, usable[0].name)
        return usable[0]
    if isinstance(spec, int) or (isinstance(spec, str) and spec.strip().lstrip("-").isdigit()):
        index = int(spec)
        for d in devices:
            if d.index == index:
                if d not in usable:
                    raise NoAudioDevice(f"device {index} ({d.name}) has no {kind} channels; {hint}")
                return d
        raise NoAudioDevice(f"there is no device {index}; {hint}")
    want = str(spec).strip().lower()
    exact = [d for d in usable if d.name.lower() == want]
    if exact:
        return exact[0]
    partial = [d for d in usable if want in d.name.lower()]
    if not partial:
        names = ", ".join(repr(d.name) for d in usable)
        raise NoAudioDevice(f"no {kind} device matches {spec!r}; available: {names}")
    default_api = _default_hostapi_name()
    partial.sort(key=lambda d: d.hostapi != default_api)
    return partial[0]


def _default_hostapi_name() -> str | None:
    s = sd()
    try:
        return str(s.query_hostapis(s.default.hostapi)["name"])
    except (s.PortAudioError, ValueError, IndexError):
        return None


def choose_stream_format(device: DeviceInfo, kind: str, rate: int | None = None,
                         channel_options: tuple[int, ...] = (1, 2)) -> tuple[int, int]:
    """A (sample rate, channels) the device accepts for float32 streams.

    Tries `rate` (if given), the device's default rate, then COMMON_RATES; mono first, then
    stereo (the caller mixes down). Raises UnsupportedSampleRate naming what was tried.
    """
    s = sd()
    check = s.check_input_settings if kind == "input" else s.check_output_settings
    max_ch = device.max_input_channels if kind == "input" else device.max_output_channels
    channels = [c for c in channel_options if c <= max_ch] or [max_ch]
    rates: list[int] = []
    for r in ((rate,) if rate else ()) + (int(device.default_samplerate),) + COMMON_RATES:
        if r and r not in rates:
            rates.append(int(r))
    last_error: Exception | None = None
    for r in rates:
        for ch in channels:
            try:
                check(device=device.index, samplerate=r, channels=ch, dtype="float32")
            except s.PortAudioError as exc:
                last_error = exc
                continue
            if rate and r != rate:
                log.warning("%s does not accept %d Hz; using %d Hz", device.name, rate, r)
            return r, ch
    raise UnsupportedSampleRate(
        f"{kind} device {device.name!r} accepts none of the rates "
        f"{', '.join(str(r) for r in rates)} Hz with {' or '.join(map(str, channels))} "
        f"channel(s) ({last_error}); choose another device (see `foresay devices`)")


def block_time(time_info, attr: str, now: float) -> float | None:
    """PortAudio's time for a callback's block (`attr`: inputBufferAdcTime or
    outputBufferDacTime) moved onto the monotonic clock, given `now` = time.monotonic() taken
    in the callback; None when the host API gives no timing information."""
    try:
        t, current = float(getattr(time_info, attr)), float(time_info.currentTime)
    except (AttributeError, TypeError):
        return None
    if t <= 0 or current <= 0 or abs(t - current) >= 2.0:
        return None
    return now + (t - current)


def post(loop, fn, *args) -> None:
    """From an audio thread: run fn(*args) in the event loop (ignored once the loop closed)."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:   # the loop is closed: we are shutting down
        pass


def close_quietly(stream, what: str) -> None:
    """Abort and close a stream; a dead device may fail to, and is gone either way."""
    if stream is None:
        return
    try:
        stream.abort()
        stream.close()
    except Exception as exc:
        log.debug("closing the %s stream failed: %s", what, exc)


def portaudio_code(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[1], int):
        return args[1]
    return None


def explain_portaudio_error(exc: BaseException, action: str,
                            device: DeviceInfo | None = None) -> AudioDeviceError:
    """A user-facing error for a PortAudio failure while trying to `action`."""
    code = portaudio_code(exc)
    text = str(exc.args[0]) if getattr(exc, "args", None) else str(exc)
    name = f"{device.name!r}" if device else "the sound device"
    lowered = text.lower()
    if code == _PA_DEVICE_UNAVAILABLE or "unavailable" in lowered or "busy" in lowered:
        return DeviceUnavailable(
            f"cannot {action}: {name} is busy or unavailable ({text}); close other programs "
            "using it, check that it is still plugged in, or choose another device")
    if code == _PA_INVALID_SAMPLE_RATE or "sample rate" in lowered:
        return UnsupportedSampleRate(f"cannot {action}: {name} rejected the sample rate ({text})")
    if code in (_PA_INVALID_DEVICE, _PA_INVALID_CHANNEL_COUNT, _PA_SAMPLE_FORMAT):
        return NoAudioDevice(f"cannot {action}: {name} cannot be used that way ({text}); "
                             "run `foresay devices` and choose another device")
    return AudioDeviceError(f"cannot {action} on {name}: {text}")

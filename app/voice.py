"""Which voice speaks: the settings' engine when it can be had, else espeak-ng, said in one line.

Piper needs its voice: a path is used as given (a bad file is an error); a name is the registry
copy or the hub's cached copy, downloaded with progress on first use by profiles that download.
Without it (an offline profile, no network) espeak-ng speaks and the status says how to get the
voice. Zonos needs its package; without it, espeak-ng too. `foresay doctor`, the window's status
and the load progress all take their line from here."""
from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from typing import Callable

from foresay.app.config import OFFLINE_PROFILES, Settings
from foresay.app.downloads import HubDownload
from foresay.engine.errors import ForesayError

log = logging.getLogger(__name__)

ZONOS_MISSING = "Zonos is not installed: docs/tts.md says how to install it"


@dataclass(frozen=True)
class VoiceChoice:
    config: object                      # the engine config to build (EspeakConfig, PiperConfig, ZonosConfig)
    label: str                          # the voice, for status lines: "Piper en_US-joe-medium"
    fallback: str | None = None         # why espeak-ng speaks instead of the chosen engine
    download: HubDownload | None = None  # to fetch before loading (a Piper voice from the hub)

    @property
    def line(self) -> str:
        """One line saying which voice speaks (and why, when it is the fallback)."""
        return f"voice: {self.label}" + (f" ({self.fallback})" if self.fallback else "")


def _espeak(settings: Settings, why: str | None) -> VoiceChoice:
    return VoiceChoice(settings.tts.espeak, f"espeak-ng {settings.tts.espeak.voice.voice}", why)


def _hub_offline() -> bool:
    try:
        from huggingface_hub import constants
        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:
        return True


def choose_voice(settings: Settings) -> VoiceChoice:
    """The voice `settings` asks for, or espeak-ng with the reason (nothing is downloaded here)."""
    from foresay.engine.tts.piper_voices import (HUB_REPO, check_voice_files, fetch_hint, hub_files, is_voice_path,
                                                 local_voice)

    tts = settings.tts
    if tts.engine == "espeak":
        return _espeak(settings, None)
    if tts.engine == "zonos":
        if importlib.util.find_spec("zonos") is None:
            return _espeak(settings, ZONOS_MISSING)
        return VoiceChoice(tts.zonos, f"Zonos {tts.zonos.model}")
    config = tts.engine_config()
    if is_voice_path(config.voice):  # a bad file is an error, never replaced by another voice
        return VoiceChoice(config, f"Piper {check_voice_files(config.voice).model}")
    found = local_voice(config.voice)
    if found is not None:
        return VoiceChoice(config, f"Piper {found.name}")
    if settings.app.profile in OFFLINE_PROFILES or not config.download or _hub_offline():
        return _espeak(settings, f"no Piper voice: {fetch_hint(config.voice)}")
    return VoiceChoice(config, f"Piper {config.voice}",
                       download=HubDownload(HUB_REPO, hub_files(config.voice), None, f"voice {config.voice}"))


def shown_voice(settings: Settings) -> str:
    """The voice the settings dialog shows: the Piper voice when Piper speaks, else espeak-ng's."""
    if settings.tts.engine == "piper":
        return settings.tts.engine_config().voice
    return settings.tts.espeak.voice.voice


def with_voice(settings: Settings, voice: str) -> Settings:
    """`voice` from the settings dialog: a Piper voice name or .onnx path becomes the Piper voice,
    anything else the espeak-ng voice. The engine stays the profile's (tts.engine chooses it)."""
    from dataclasses import replace

    from foresay.engine.tts.piper_voices import is_voice_name

    tts, voice = settings.tts, voice.strip()
    if is_voice_name(voice):
        return replace(settings, tts=replace(tts, voice=voice))
    return replace(settings, tts=replace(tts, espeak=replace(tts.espeak, voice=replace(tts.espeak.voice, voice=voice))))


def fetch_voice(settings: Settings, choice: VoiceChoice, fetch: Callable[[HubDownload], object]) -> VoiceChoice:
    """Downloads the choice's voice (blocking); espeak-ng with the reason when that fails."""
    if choice.download is None:
        return choice
    from foresay.engine.tts.piper_voices import fetch_hint

    try:
        fetch(choice.download)
    except ForesayError as exc:
        log.warning("the Piper voice could not be downloaded: %s", exc)
        return _espeak(settings, f"no Piper voice, the download failed: {fetch_hint(choice.config.voice)}")
    return VoiceChoice(choice.config, choice.label)

"""Builds a TTS engine from its config (the app's one entry point into engine.tts)."""
from __future__ import annotations

from foresay.engine.tts.base import TtsEngine
from foresay.engine.tts.errors import InvalidTtsConfig


def build_engine(config) -> TtsEngine:
    """EspeakConfig -> EspeakEngine, PiperConfig -> PiperEngine, ZonosConfig -> ZonosEngine (Piper
    and Zonos load on warmup())."""
    from foresay.engine.tts.espeak import EspeakConfig, EspeakEngine

    if isinstance(config, EspeakConfig):
        return EspeakEngine(config)
    from foresay.engine.tts.piper_engine import PiperConfig, PiperEngine

    if isinstance(config, PiperConfig):
        return PiperEngine(config)
    from foresay.engine.tts.zonos import ZonosConfig, ZonosEngine

    if isinstance(config, ZonosConfig):
        return ZonosEngine(config)
    raise InvalidTtsConfig(f"no TTS engine takes a {type(config).__name__}; use EspeakConfig, PiperConfig or ZonosConfig")

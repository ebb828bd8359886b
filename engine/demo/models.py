"""The demo models' names and folders, as the runtime's registry knows them (training code
writes where runtime code reads)."""
from __future__ import annotations

from foresay.engine.model_registry import SHIPPED_CHAT as DEMO_CHAT
from foresay.engine.model_registry import SHIPPED_LLM_ASR as DEMO_LLM_ASR
from foresay.engine.model_registry import SHIPPED_WHISPER as DEMO_WHISPER
from foresay.engine.model_registry import shipped_model_dir as demo_model_dir
from foresay.engine.model_registry import shipped_models_root as demo_models_root

__all__ = ["DEMO_CHAT", "DEMO_LLM_ASR", "DEMO_WHISPER", "demo_model_dir", "demo_models_root"]

"""Where the models that ship with Foresay live: names -> folders of package data.

Runtime code (`engine/llm/model.py`, `engine/asr/whisper/models.py`) resolves built-in names here; the
training code in `engine/demo` writes into these folders and reads the same table, so runtime
never imports training code.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from foresay.engine.errors import ModelUnavailable

# What a speech recognizer's hub repository holds that its loader reads (Whisper and Qwen3-ASR in
# transformers' layout alike); `app/downloads.py` asks the hub for the same patterns.
SPEECH_FILES = ("*.json", "*.safetensors", "*.txt", "*.model")

# model name (as given to --model, --target, --draft and profiles) -> folder under assets/models/
SHIPPED_CHAT: dict[str, str] = {"demo": "demo-chat", "demo-cllm": "demo-chat-cllm",
                                "demo-streams": "demo-chat-streams"}
SHIPPED_WHISPER: dict[str, str] = {"demo": "demo-whisper", "demo-draft": "demo-whisper-draft"}
# the LLM-based recognizer pair (Qwen3-ASR architecture), trained by foresay.engine.demo.llm_asr
SHIPPED_LLM_ASR: dict[str, str] = {"demo-llm": "demo-llm-asr", "demo-llm-draft": "demo-llm-asr-draft"}


def shipped_models_root() -> Path:
    return Path(str(resources.files("foresay.assets").joinpath("models")))


def shipped_model_dir(name: str, table: dict[str, str]) -> Path:
    """The folder of shipped model `name` in `table`; a clear error when this install lacks it."""
    if name not in table:
        raise ModelUnavailable(f"{name!r} is not a shipped model (there are: {', '.join(table)})")
    folder = shipped_models_root() / table[name]
    if not (folder / "config.json").exists():
        raise ModelUnavailable(f"shipped model {name!r} is missing from {folder}: this install comes "
                               f"without it; train it (docs/models.md: python -m "
                               f"foresay.engine.demo.chat train / foresay.engine.demo.whisper train / "
                               f"foresay.engine.demo.llm_asr train)")
    return folder


def hub_speech_folder(name: str, what: str) -> Path:
    """The local copy of hub repository `name` (`SPEECH_FILES`, downloaded once); `what` names
    the model in the error when it is neither cached nor downloadable."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name, allow_patterns=list(SPEECH_FILES)))
    except Exception as exc:  # the hub client raises many kinds; all mean "not available"
        raise ModelUnavailable(
            f"{what} {name!r} is neither a local folder nor downloadable here "
            f"({type(exc).__name__}: {exc}). Download it once with a network connection "
            "or give the path of a local copy.") from exc

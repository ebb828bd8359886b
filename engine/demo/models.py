"""Where the committed demo models live (package data under `assets/models/`)."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from foresay.engine.errors import ModelUnavailable

# model name (as given to --model, --target, --draft and profiles) -> folder under assets/models/
DEMO_CHAT = {"demo": "demo-chat", "demo-cllm": "demo-chat-cllm"}
DEMO_WHISPER = {"demo": "demo-whisper", "demo-draft": "demo-whisper-draft"}


def demo_models_root() -> Path:
    return Path(str(resources.files("foresay.assets").joinpath("models")))


def demo_model_dir(name: str, table: dict[str, str]) -> Path:
    """The folder of demo model `name` in `table`; a clear error when this install lacks it."""
    if name not in table:
        raise ModelUnavailable(f"{name!r} is not a demo model (there are: {', '.join(table)})")
    folder = demo_models_root() / table[name]
    if not (folder / "config.json").exists():
        raise ModelUnavailable(f"demo model {name!r} is missing from {folder}: this install ships "
                               f"without it; train it (README, 'Demo models': python -m "
                               f"foresay.engine.demo.chat train / foresay.engine.demo.whisper train)")
    return folder

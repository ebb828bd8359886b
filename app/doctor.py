"""`foresay doctor`: checks what Foresay needs and says what to fix.

The one answer to "can Foresay run here, and what is missing": the command prints it and the
window's Help ▸ System check shows the same checks (`run_checks`).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    essential: bool = True


def _package(module: str, pip_name: str) -> Check:
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # an import can fail in many ways (missing libs, ABI)
        fix = ("this packaged Foresay is incomplete: reinstall it, and report the build's version "
               "(`foresay --version`)" if getattr(sys, "frozen", False)
               else f"pip install '{pip_name}' (or rerun: bash packaging/bootstrap.sh app)")
        return Check(f"python package {pip_name}", False, f"import {module} failed: {exc}", fix)
    return Check(f"python package {pip_name}", True, getattr(mod, "__version__", "installed"))


def check_packages() -> list[Check]:
    return [_package(m, p) for m, p in (
        ("torch", "torch"), ("transformers", "transformers"), ("faster_whisper", "faster-whisper"),
        ("numpy", "numpy"), ("soxr", "soxr"), ("webrtcvad", "webrtcvad-wheels"),
        ("PySide6", "PySide6-Essentials"), ("qasync", "qasync"))]


def check_torch() -> list[Check]:
    try:
        import torch
    except Exception:
        return []
    if not torch.cuda.is_available():
        build = "CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda} build, no GPU seen"
        return [Check("CUDA GPU", False, f"none ({build}); Foresay runs on the CPU with small models",
                      "for the flagship models install a CUDA build of torch and the NVIDIA driver",
                      essential=False)]
    checks = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        gib = props.total_memory / 2**30
        checks.append(Check(f"CUDA GPU {i}", True, f"{props.name}, {gib:.1f} GiB"))
    return checks


def check_portaudio() -> list[Check]:
    try:
        import sounddevice as sd
    except OSError as exc:
        return [Check("PortAudio", False, str(exc), "install libportaudio2 (apt install libportaudio2)")]
    except ImportError as exc:
        return [Check("PortAudio", False, str(exc), "pip install sounddevice")]
    devices = sd.query_devices()
    inputs = [d for d in devices if d["max_input_channels"] > 0]
    outputs = [d for d in devices if d["max_output_channels"] > 0]
    checks = [Check("PortAudio", True, sd.get_portaudio_version()[1])]
    checks.append(Check("input device", bool(inputs), f"{len(inputs)} found",
                        "connect a microphone, or use `foresay replay FILE.wav`"))
    # the window and `foresay run` cannot start without one: a problem, not a note
    checks.append(Check("output device", bool(outputs), f"{len(outputs)} found",
                        "connect speakers or headphones; `foresay replay IN.wav --out reply.wav` "
                        "writes replies to a WAV without one"))
    return checks


def check_espeak() -> list[Check]:
    path = shutil.which("espeak-ng")
    if not path:
        return [Check("espeak-ng", False, "not found on PATH",
                      "apt install espeak-ng / brew install espeak-ng / the Windows .msi from the "
                      "espeak-ng releases")]
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    return [Check("espeak-ng", out.returncode == 0, out.stdout.strip() or out.stderr.strip())]


def check_zonos() -> list[Check]:
    found = importlib.util.find_spec("zonos") is not None
    return [Check("Zonos TTS", found, "installed" if found else "not installed (espeak-ng is used)",
                  'pip install "zonos @ git+https://github.com/Zyphra/Zonos.git" (GPU recommended)',
                  essential=False)]


def _offline() -> str | None:
    """Why models cannot be downloaded now (offline mode, no network), or None."""
    from foresay.app.downloads import hub_unreachable

    try:
        from huggingface_hub import constants
        offline = bool(constants.HF_HUB_OFFLINE)
    except Exception:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0")
    return "offline (HF_HUB_OFFLINE=1)" if offline else hub_unreachable()


def _cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache
    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str) or \
        isinstance(try_to_load_from_cache(repo_id, "model.bin"), str)


def check_models(settings=None) -> list[Check]:
    """Whether the models of the profile Foresay would start with are here or can be fetched."""
    from foresay.app.downloads import hub_downloads, offline_hint

    try:
        if settings is None:
            from foresay.app.config import load_settings
            settings = load_settings()
        needed = [d.repo_id for d in hub_downloads(settings)]
        missing = [r for r in needed if not _cached(r)]
    except Exception as exc:   # a bad config file is its own error; say it here too
        return [Check("models", False, f"cannot tell ({exc})", "fix the config file, then run doctor again")]
    name = f"models of the {settings.app.profile!r} profile"
    if not missing:
        detail = ", ".join(needed) + " in the model cache" if needed else "built in, nothing to download"
        return [Check(name, True, detail)]
    why = _offline()
    if why:
        return [Check(name, False, f"not downloaded, and {why}: {', '.join(missing)}", offline_hint())]
    return [Check(name, False, f"not downloaded yet: {', '.join(missing)}; they download on first use, "
                  "with progress", "nothing to do with a network connection", essential=False)]


def check_demo_ear() -> list[Check]:
    """Which Whisper the demo profile hears with: a real one when fetched, else its own pair."""
    from foresay.app.demo_profile import OWN_EAR_NOTE, REAL_EAR, real_whisper

    folder = real_whisper()
    if folder is not None:
        return [Check("demo's speech recognizer", True, f"Whisper tiny.en ({folder}), which hears people")]
    return [Check("demo's speech recognizer", False, OWN_EAR_NOTE.split(":")[0],
                  f"foresay models fetch {REAL_EAR}", essential=False)]


def check_voice(settings=None) -> list[Check]:
    """Which voice the profile Foresay would start with speaks, and how to get a missing Piper voice."""
    from foresay.app.voice import choose_voice

    try:
        if settings is None:
            from foresay.app.config import load_settings
            settings = load_settings()
        choice = choose_voice(settings)
    except Exception as exc:   # a bad voice file or config: say it here too
        return [Check("voice", False, f"cannot tell ({exc})", "fix tts.voice or the config file")]
    if choice.fallback:
        fix = choice.fallback.split(": ", 1)[-1]
        return [Check("voice", False, choice.line.removeprefix("voice: "), fix, essential=False)]
    detail = choice.label + (", downloads on first use, with progress" if choice.download else "")
    return [Check("voice", True, detail)]


SETTINGS_CHECKS = (check_models, check_voice)   # checks of the settings Foresay runs with
CHECKS: list[Callable[[], list[Check]]] = [check_packages, check_torch, check_portaudio, check_espeak,
                                           check_zonos, check_models, check_voice, check_demo_ear]


def run_checks(checks=None, settings=None) -> list[Check]:
    """Every check; `settings`: those Foresay runs with (the window's), for the model and voice checks."""
    out = []
    for check in checks or CHECKS:
        out.extend(check(settings) if check in SETTINGS_CHECKS else check())
    return out


def run(args: argparse.Namespace) -> int:
    results = run_checks()
    for c in results:
        mark = "ok  " if c.ok else ("FAIL" if c.essential else "note")
        print(f"[{mark}] {c.name}: {c.detail}")
        if not c.ok and c.fix:
            print(f"       fix: {c.fix}")
    failed = [c for c in results if not c.ok and c.essential]
    print(f"doctor: {len(failed)} problem(s) to fix" if failed else "doctor: everything Foresay needs is here")
    return 1 if failed else 0


def register(commands) -> None:
    p = commands.add_parser("doctor", help="check packages, GPU, audio devices, espeak-ng, Zonos, models, the voice")
    p.set_defaults(func=run)

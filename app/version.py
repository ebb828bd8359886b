"""Which Foresay is running: the package version and the git revision it was built from.

A packaged build carries `foresay.app._build_info` (written into the staged sources by
`packaging/build.py`, never into the checkout); a checkout asks git; anything else says "unknown".
"""
from __future__ import annotations

import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

UNKNOWN = "unknown"


def _build_info():
    try:
        from foresay.app import _build_info
    except ImportError:
        return None
    return _build_info


def package_version() -> str:
    try:
        return version("foresay")
    except PackageNotFoundError:
        info = _build_info()
        return getattr(info, "VERSION", UNKNOWN)


def _describe_checkout(folder: Path) -> str | None:
    """`git describe` of the checkout holding `folder` (a worktree's .git is a file), or None."""
    if not (folder / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(folder), "describe", "--always", "--dirty", "--tags"],
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def git_revision() -> str:
    """The git revision this code was built from: the build's record, else the checkout's."""
    info = _build_info()
    if info is not None:
        return info.GIT_REVISION
    return _describe_checkout(Path(__file__).resolve().parents[1]) or UNKNOWN


def version_line() -> str:
    """What `foresay --version` prints, e.g. "foresay 0.1.0 (git 6c46e6a-dirty)"."""
    return f"foresay {package_version()} (git {git_revision()})"

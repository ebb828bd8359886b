"""Which Foresay is running: the package version and the git revision it was built from.

A packaged build carries `foresay.app._build_info` (written into the staged sources by
`packaging/build.py`, never into the checkout); a checkout is read from its git files (no git
command runs); anything else says "unknown". Asked only when shown (`--version`, About).
"""
from __future__ import annotations

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


def _git_dir(folder: Path) -> Path | None:
    """The git directory of the checkout at `folder` (a worktree's .git is a file naming it)."""
    dot_git = folder / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        text = dot_git.read_text("utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            path = Path(text.removeprefix("gitdir:").strip())
            return path if path.is_absolute() else (folder / path).resolve()
    return None


def _read_ref(git_dir: Path, ref: str) -> str | None:
    for base in (git_dir, _common_dir(git_dir)):
        loose = base / ref
        if loose.is_file():
            return loose.read_text("ascii", errors="replace").strip()
        packed = base / "packed-refs"
        if packed.is_file():
            for line in packed.read_text("ascii", errors="replace").splitlines():
                sha, _, name = line.partition(" ")
                if name == ref:
                    return sha
    return None


def _common_dir(git_dir: Path) -> Path:
    common = git_dir / "commondir"
    if common.is_file():
        path = Path(common.read_text("utf-8").strip())
        return path if path.is_absolute() else (git_dir / path).resolve()
    return git_dir


def _checkout_revision(folder: Path) -> str | None:
    """The commit checked out at `folder`, read from git's files (short hash), or None.

    No git command runs: `git describe --dirty` refreshes the index, which writes
    `.git/index.lock` into the user's checkout on every start and races their own git."""
    git_dir = _git_dir(folder)
    if git_dir is None:
        return None
    try:
        head = (git_dir / "HEAD").read_text("ascii", errors="replace").strip()
        sha = _read_ref(git_dir, head.removeprefix("ref:").strip()) if head.startswith("ref:") else head
    except OSError:
        return None
    if not sha or len(sha) < 7 or any(c not in "0123456789abcdef" for c in sha.lower()):
        return None
    return sha[:7]


def git_revision() -> str:
    """The git revision this code was built from: the build's record, else the checkout's."""
    info = _build_info()
    if info is not None:
        return info.GIT_REVISION
    return _checkout_revision(Path(__file__).resolve().parents[1]) or UNKNOWN


def version_line() -> str:
    """What `foresay --version` prints, e.g. "foresay 0.1.0 (git 6c46e6a-dirty)"."""
    return f"foresay {package_version()} (git {git_revision()})"

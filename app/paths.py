"""Files the user names on the command line: inputs read with clear errors, outputs checked
before anything is written (never over an input, never into a missing folder)."""
from __future__ import annotations

import os
from pathlib import Path

from foresay.engine.errors import ForesayError


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.expanduser().resolve() == b.expanduser().resolve()


def add_force_argument(p) -> None:
    p.add_argument("--force", action="store_true", help="write over output files that exist")


def check_outputs(outputs: dict[str, Path | None], inputs: dict[str, Path | None], force: bool = False) -> None:
    """Refuses, before anything is opened: an output that is an input or another output, a folder,
    one that exists (unless `force`: the command's --force), or one whose folder is missing or not
    writable. Keys name the options (e.g. "--metrics")."""
    named_inputs = {k: Path(v) for k, v in inputs.items() if v is not None}
    seen: dict[str, Path] = {}
    for option, value in outputs.items():
        if value is None:
            continue
        path = Path(value)
        for other, given in named_inputs.items():
            if _same(path, given):
                raise ForesayError(f"{option} {path} is the input {other}: refusing to write over it; "
                                   f"name another file")
        for other, taken in seen.items():
            if _same(path, taken):
                raise ForesayError(f"{option} and {other} name the same file {path}")
        if path.is_dir():
            raise ForesayError(f"{option} {path} is a folder; name a file in it")
        if path.exists() and not force:
            raise ForesayError(f"{option} {path} exists; add --force to write over it, or name another file")
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise ForesayError(f"{option} {path}: the folder {folder} does not exist; create it first")
        if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise ForesayError(f"{option} {path}: permission denied")
        seen[option] = path


def read_text(path: Path, what: str) -> str:
    """A UTF-8 text file the user gave; a clear error for a missing, unreadable or non-UTF-8 one."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ForesayError(f"cannot read {what} {path}: it does not exist") from None
    except IsADirectoryError:
        raise ForesayError(f"{what} {path} is a folder, not a file") from None
    except OSError as exc:
        raise ForesayError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ForesayError(f"{what} {path} is not UTF-8 text (line {line}, byte {exc.start}: "
                           f"{data[exc.start:exc.start + 1]!r}); save it as UTF-8") from None

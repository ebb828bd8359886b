"""Writing what the user keeps (metrics lines, benchmark reports) so that a failed write (a full
disk, a folder made read-only) loses nothing and corrupts nothing.

`write_all(fd, data)` writes every byte or, on failure, truncates the file back to where it was.
`LineFile` appends lines to a file the user named; lines that could not be written stay in
memory and go first at the next write, the failure is reported once through `warn`, and
`close()` prints what could still not be written and says so (a `ForesayError`). `write_report` writes a
JSON report whole or not at all, and on failure prints it so the results are not lost.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Callable

from foresay.engine.errors import ForesayError


def reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def write_all(fd: int, data: bytes) -> None:
    """All of `data` at the end of `fd` (opened O_APPEND), or nothing: a failed write is cut back."""
    size = os.fstat(fd).st_size
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        try:
            os.ftruncate(fd, size)
        except OSError:
            pass   # a torn line stays; readers of these files skip it
        raise


class LineFile:
    """Lines appended to `path` (created 0644 as any output, emptied at open), one write each."""

    def __init__(self, path: Path, warn: Callable[[str], None]):
        self.path = Path(path)
        self.warn = warn
        self.pending: list[bytes] = []
        self._failing = False
        try:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND
                              | getattr(os, "O_BINARY", 0), 0o644)
        except OSError as exc:
            raise ForesayError(f"cannot write {self.path}: {reason(exc)}") from None

    def write(self, line: str) -> bool:
        """Appends `line` (a newline is added) after any lines still pending; False if it waits."""
        self.pending.append(line.encode("utf-8") + b"\n")
        try:
            write_all(self.fd, b"".join(self.pending))
        except OSError as exc:
            if not self._failing:
                self._failing = True
                self.warn(f"cannot write {self.path}: {reason(exc)}; {len(self.pending)} line(s) kept "
                          f"in memory, written as soon as the file can take them")
            return False
        if self._failing:
            self._failing = False
            self.warn(f"{self.path} is being written again; nothing was lost")
        self.pending.clear()
        return True

    def close(self) -> None:
        """Closes the file; raises ForesayError if some lines could never be written."""
        if self.pending:
            try:
                write_all(self.fd, b"".join(self.pending))
                self.pending.clear()
            except OSError as exc:
                error = exc
        os.close(self.fd)
        if self.pending:
            sys.stdout.write(b"".join(self.pending).decode("utf-8"))
            sys.stdout.flush()
            raise ForesayError(f"{len(self.pending)} line(s) could not be written to {self.path}: "
                               f"{reason(error)}; they are printed above")


def write_report(path: Path, report: dict, option: str = "--json") -> None:
    """The report as JSON, whole (a temporary file renamed over `path`) or not at all; when it
    cannot be written, it is printed on stdout and a ForesayError says so."""
    path = Path(path)
    text = json.dumps(report, indent=2) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | getattr(os, "O_BINARY", 0), 0o644)
        try:
            write_all(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        sys.stdout.write(text)
        sys.stdout.flush()
        raise ForesayError(f"cannot write {option} {path}: {reason(exc)}; the results are printed "
                           f"above as JSON") from None

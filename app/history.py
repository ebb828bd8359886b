"""Conversation history on disk: one JSONL file per conversation in the user's data folder.

Each turn is appended as one line and fsynced (O(1) per turn, whatever the file's length); the
folder is fsynced when a file is created or replaced, so a crash loses at most the turn being
written, and a torn last line is set aside on the next load. Lines that cannot be read (bad JSON,
invalid UTF-8, missing fields) go to a side file next to the conversation (`<name>.damaged`),
reported once; the rest loads. The file keeps every turn; the model's context keeps only what
the model handles (engine.predgen.Conversation), which never touches the file.

Each start begins a new conversation; `resume=True` continues the latest one.
"""
from __future__ import annotations

import json
import logging
import os
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from foresay.app.saving import reason, write_all
from foresay.engine.errors import ForesayError

try:
    import fcntl
except ImportError:   # Windows: no advisory locks; two Foresays there may share a file
    fcntl = None

log = logging.getLogger(__name__)

PATTERN = "conversation-*.jsonl"


@dataclass(frozen=True)
class HistoryTurn:
    user: str
    assistant: str       # as far as the user heard it
    interrupted: bool = False
    t: float = 0.0       # wall-clock time the turn ended


def default_history_dir() -> Path:
    from platformdirs import user_data_dir
    return Path(user_data_dir("foresay")) / "conversations"


def _fsync_dir(folder: Path) -> None:
    if os.name == "nt":   # Windows cannot open a folder for fsync; NTFS journals renames
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse(raw: bytes) -> HistoryTurn:
    item = json.loads(raw.decode("utf-8"))
    if not isinstance(item, dict):
        raise TypeError("not a JSON object")
    return HistoryTurn(str(item["user"]), str(item["assistant"]), bool(item.get("interrupted", False)),
                       float(item.get("t", 0)))


def _line(turn: HistoryTurn) -> bytes:
    return (json.dumps(asdict(turn), ensure_ascii=False) + "\n").encode("utf-8")


class HistoryStore:
    """The conversation being saved. `notice` says what a load had to set aside, or that the
    conversation to resume is open in another Foresay (else None); `problem` that the folder
    cannot be written (else None). Turns that could not be written stay in `unsaved`."""

    def __init__(self, folder: Path | None = None, *, resume: bool = False):
        self.folder = Path(folder) if folder else default_history_dir()
        try:
            if not self.folder.is_dir():
                self.folder.mkdir(parents=True, exist_ok=True)
                os.chmod(self.folder, 0o700)   # conversations are private
        except OSError as exc:
            raise ForesayError(f"cannot create the conversation folder {self.folder}: {reason(exc)}") from None
        self._remove_leftovers()
        self.notice: str | None = None
        self.problem: str | None = None
        self.unsaved: list[tuple[Path, HistoryTurn]] = []
        self._fd: int | None = None
        self._failing = False
        latest = self._latest() if resume else None
        if latest is not None:
            try:
                taken = not self._open(latest, create=False)
            except OSError as exc:   # read-only: resumed all the same, saved when it can be
                taken, self.problem = False, self._cannot_save(exc)
            if taken:
                self.notice = (f"the latest conversation {latest.name} is open in another Foresay; "
                               f"this one starts a new conversation")
                latest = None
        self.path = latest or self._new_path()
        self.turns: list[HistoryTurn] = self._load(self.path) if latest else []
        if self.problem is None and self._fd is None:
            self.problem = self._check_writable()
        self._failing = self.problem is not None   # said at start, not again at the first turn

    def _check_writable(self) -> str | None:
        probe = self.folder / f".probe-{os.getpid()}"
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            probe.unlink()
        except OSError as exc:
            return self._cannot_save(exc)
        return None

    def _cannot_save(self, exc: OSError, where: Path | None = None) -> str:
        return (f"cannot save the conversation in {exc.filename or where or self.folder}: {reason(exc)}; the "
                f"conversation goes on, kept in memory, and is saved as soon as it can be")

    def _open(self, path: Path, create: bool) -> bool:
        """Opens `path` for appending, locked against other Foresays; False if another holds it
        (or, with `create`, made it first). OSError if it cannot be opened."""
        flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_BINARY", 0) | (os.O_CREAT | os.O_EXCL if create else 0)
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            return False
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
        self._close_file()
        self._fd = fd
        return True

    def _close_file(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _remove_leftovers(self) -> None:
        """Temporary copies an older Foresay left behind when killed while rewriting a file."""
        for tmp in self.folder.glob(".tmp-*.jsonl"):
            try:
                tmp.unlink()
            except OSError:
                pass

    def _latest(self) -> Path | None:
        files = sorted(self.folder.glob(PATTERN))
        return files[-1] if files else None

    def _new_path(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        n = 1
        while (path := self.folder / f"conversation-{stamp}-{n:03d}.jsonl").exists():
            n += 1
        return path

    def _load(self, path: Path) -> list[HistoryTurn]:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ForesayError(f"cannot read the conversation {path}: {exc.strerror or exc}") from None
        turns, good, bad = [], [], []
        for n, raw in enumerate(data.split(b"\n"), 1):
            if not raw.strip():
                continue
            try:
                turns.append(_parse(raw))
                good.append(raw + b"\n")
            except (ValueError, KeyError, TypeError) as exc:   # UnicodeDecodeError is a ValueError
                bad.append((n, raw, exc))
        if bad or (data and not data.endswith(b"\n")):
            self._set_aside(path, good, bad)
        return turns

    def _set_aside(self, path: Path, good: list[bytes], bad: list) -> None:
        """Moves damaged lines to the side file and rewrites the conversation without them, with
        the file's own permissions (once: the next load finds nothing to report). A file that
        cannot be rewritten is loaded all the same, and left as it is."""
        lines = ", ".join(str(n) for n, _, _ in bad[:5]) + (" ..." if len(bad) > 5 else "")
        side = path.with_name(path.name + ".damaged")
        mode = stat.S_IMODE(os.stat(path).st_mode)
        tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
        try:
            if bad:
                fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
                try:
                    write_all(fd, b"".join(raw + b"\n" for _, raw, _ in bad))
                    os.fsync(fd)
                finally:
                    os.close(fd)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
            try:
                os.fchmod(fd, mode) if hasattr(os, "fchmod") else None
                write_all(fd, b"".join(good))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            _fsync_dir(self.folder)
        except OSError as exc:
            if bad:
                self.notice = (f"conversation {path.name}: {len(bad)} damaged line(s) ({lines}; first: "
                               f"{bad[0][2]}) skipped, but they could not be set aside ({reason(exc)}); "
                               f"the other {len(good)} turn(s) loaded")
                log.warning("%s", self.notice)
            return
        finally:
            tmp.unlink(missing_ok=True)
        if bad:
            self.notice = (f"conversation {path.name}: {len(bad)} damaged line(s) ({lines}; first: "
                           f"{bad[0][2]}) set aside in {side.name}; the other {len(good)} turn(s) loaded")
            log.warning("%s", self.notice)
        if self._fd is not None:   # the lock was on the file replaced: take it on the new one
            try:
                self._open(path, create=False)
            except OSError:
                self._close_file()

    def append(self, turn: HistoryTurn) -> None:
        """Appends one line and fsyncs it; on failure the file is as it was (OSError)."""
        created = False
        while self._fd is None:   # the first turn creates the file
            create = not self.path.exists()
            if self._open(self.path, create):
                created = create
            else:   # another Foresay holds this name: a file of our own
                self.path = self._new_path()
        write_all(self._fd, _line(turn))
        os.fsync(self._fd)
        if created:
            _fsync_dir(self.folder)
        self.turns.append(turn)

    def keep(self, turn: HistoryTurn) -> tuple[str, str] | None:
        """Saves `turn` after any that are waiting; what cannot be written stays in `unsaved`
        (never raises OSError). Returns (level, text) to tell the user when saving starts
        failing ("warning") or works again ("info"), once each; else None."""
        self.unsaved.append((self.path, turn))
        while self.unsaved:
            path, waiting = self.unsaved[0]
            try:
                if path != self.path:   # a turn of the conversation before File > New conversation
                    self._append_to(path, waiting)
                else:
                    self.append(waiting)
            except OSError as exc:
                if self._failing:
                    return None
                self._failing = True
                return "warning", self._cannot_save(exc, path)
            self.unsaved.pop(0)
        if self._failing:
            self._failing, self.problem = False, None
            return "info", f"the conversation is saved again in {self.path.name}; nothing was lost"
        return None

    def _append_to(self, path: Path, turn: HistoryTurn) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
        try:
            write_all(fd, _line(turn))
            os.fsync(fd)
        finally:
            os.close(fd)

    def new_conversation(self) -> None:
        """Start a new file; the old conversation stays on disk."""
        self._close_file()
        self.path = self._new_path()
        self.turns = []

    def close(self) -> None:
        """Releases the file (and its lock)."""
        self._close_file()

    def __del__(self):
        if getattr(self, "_fd", None) is not None:
            self._close_file()

    def messages(self) -> list[tuple[str, str]]:
        return [(t.user, t.assistant) for t in self.turns]

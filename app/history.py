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
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from foresay.engine.errors import ForesayError

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
    """The conversation being saved. `notice` says what a load had to set aside (else None)."""

    def __init__(self, folder: Path | None = None, *, resume: bool = False):
        self.folder = Path(folder) if folder else default_history_dir()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ForesayError(f"cannot create the conversation folder {self.folder}: "
                               f"{exc.strerror or exc}") from None
        self._remove_leftovers()
        self.notice: str | None = None
        latest = self._latest() if resume else None
        self.path = latest or self._new_path()
        self.turns: list[HistoryTurn] = self._load(self.path) if latest else []

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
        """Moves damaged lines to the side file and rewrites the conversation without them
        (once: the next load finds nothing to report)."""
        if bad:
            side = path.with_name(path.name + ".damaged")
            with open(side, "ab") as f:
                for _, raw, _ in bad:
                    f.write(raw + b"\n")
                f.flush()
                os.fsync(f.fileno())
            lines = ", ".join(str(n) for n, _, _ in bad[:5]) + (" ..." if len(bad) > 5 else "")
            self.notice = (f"conversation {path.name}: {len(bad)} damaged line(s) ({lines}; first: "
                           f"{bad[0][2]}) set aside in {side.name}; the other {len(good)} turn(s) loaded")
            log.warning("%s", self.notice)
        tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
        try:
            with open(tmp, "wb") as f:
                f.writelines(good)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(self.folder)

    def append(self, turn: HistoryTurn) -> None:
        """Appends one line and fsyncs it; on failure the file is as it was."""
        line = _line(turn)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except BaseException:
                try:
                    os.ftruncate(fd, size)
                except OSError:
                    pass   # a torn line is set aside on the next load
                raise
        finally:
            os.close(fd)
        if created:
            _fsync_dir(self.folder)
        self.turns.append(turn)

    def new_conversation(self) -> None:
        """Start a new file; the old conversation stays on disk."""
        self.path = self._new_path()
        self.turns = []

    def messages(self) -> list[tuple[str, str]]:
        return [(t.user, t.assistant) for t in self.turns]

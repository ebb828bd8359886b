"""Conversation history on disk: one JSONL file per conversation in the user's data folder.

Each save rewrites the file through a temporary file and an atomic rename (after fsync), so a
crash leaves either the old or the new history, never half of one. The file keeps every turn;
dropping old turns from the model's context (engine.predgen.Conversation) never touches it.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from foresay.engine.errors import ForesayError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HistoryTurn:
    user: str
    assistant: str       # as far as the user heard it
    interrupted: bool = False
    t: float = 0.0       # wall-clock time the turn ended


def default_history_dir() -> Path:
    from platformdirs import user_data_dir
    return Path(user_data_dir("foresay")) / "conversations"


class HistoryStore:
    def __init__(self, folder: Path | None = None):
        self.folder = Path(folder) if folder else default_history_dir()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self._latest() or self._new_path()
        self.turns: list[HistoryTurn] = self._load(self.path) if self.path.exists() else []

    def _latest(self) -> Path | None:
        files = sorted(self.folder.glob("conversation-*.jsonl"))
        return files[-1] if files else None

    def _new_path(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        n = 1
        while (path := self.folder / f"conversation-{stamp}-{n:03d}.jsonl").exists():
            n += 1
        return path

    @staticmethod
    def _load(path: Path) -> list[HistoryTurn]:
        turns = []
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                turns.append(HistoryTurn(str(item["user"]), str(item["assistant"]),
                                         bool(item.get("interrupted", False)), float(item.get("t", 0))))
            except (ValueError, KeyError, TypeError) as exc:
                raise ForesayError(f"conversation history {path}:{n} is damaged ({exc}); move the "
                                   f"file away to start afresh") from None
        return turns

    def append(self, turn: HistoryTurn) -> None:
        self.turns.append(turn)
        self._save()

    def _save(self) -> None:
        text = "".join(json.dumps(asdict(t), ensure_ascii=False) + "\n" for t in self.turns)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".jsonl")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def new_conversation(self) -> None:
        """Start a new file; the old conversation stays on disk."""
        self.path = self._new_path()
        self.turns = []

    def messages(self) -> list[tuple[str, str]]:
        return [(t.user, t.assistant) for t in self.turns]

"""The saved conversation when the disk says no: private files, one file per running Foresay,
nothing lost when a write fails."""
import errno
import json
import os
import stat

import pytest

from foresay.app.history import HistoryStore, HistoryTurn
from foresay.app.turn_log import HistoryWriter
from foresay.engine.events import StatusMessage, TurnClosed


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def users(path) -> list[str]:
    return [json.loads(line)["user"] for line in path.read_text().splitlines()]


def test_conversations_are_private(tmp_path):
    store = HistoryStore(tmp_path / "conversations")
    store.append(HistoryTurn("a", "b"))
    assert mode(tmp_path / "conversations") == 0o700
    assert mode(store.path) == 0o600


@pytest.mark.parametrize("file_mode", [0o600, 0o640])
def test_repairing_a_damaged_file_keeps_its_mode(tmp_path, file_mode):
    path = tmp_path / "conversation-20260101-000000-001.jsonl"
    path.write_bytes(b'{"user": "u", "assistant": "a"}\nnot json\n')
    os.chmod(path, file_mode)
    store = HistoryStore(tmp_path, resume=True)
    assert store.notice and [t.user for t in store.turns] == ["u"]
    assert mode(path) == file_mode
    assert mode(path.with_name(path.name + ".damaged")) == 0o600


class FailingWrites:
    """os.write that fails (full disk, permission) while `failing` is set."""

    def __init__(self, monkeypatch, error):
        self.failing, self.error, self.real = True, error, os.write
        monkeypatch.setattr(os, "write", self)

    def __call__(self, fd, data):
        if self.failing:
            raise self.error
        return self.real(fd, data)


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"),
                                   PermissionError(errno.EACCES, "Permission denied")])
def test_turns_that_cannot_be_written_wait_and_are_written_with_the_next(tmp_path, monkeypatch, error):
    store = HistoryStore(tmp_path)
    said = []
    writer = HistoryWriter(store, said.append)
    disk = FailingWrites(monkeypatch, error)
    for i in range(3):
        writer.handle(TurnClosed(i + 1, 0.0, f"u{i}", f"a{i}", False, "accepted"))
    assert [(e.level, e.text.split(":")[0]) for e in said] == [("warning", f"cannot save the conversation in {store.path}")]
    assert [t.user for _, t in store.unsaved] == ["u0", "u1", "u2"]
    disk.failing = False
    writer.handle(TurnClosed(4, 0.0, "u3", "a3", False, "accepted"))
    assert users(store.path) == ["u0", "u1", "u2", "u3"] and store.unsaved == []
    assert len(said) == 2 and said[1].level == "info" and "nothing was lost" in said[1].text
    assert all(isinstance(e, StatusMessage) for e in said)


def test_a_folder_that_cannot_be_written_is_said_at_start(tmp_path, monkeypatch):
    real_open = os.open

    def read_only(path, flags, *args):
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args)
    monkeypatch.setattr(os, "open", read_only)
    store = HistoryStore(tmp_path)
    assert store.problem and "Permission denied" in store.problem
    said = []
    HistoryWriter(store, said.append).handle(TurnClosed(1, 0.0, "u", "a", False, "accepted"))
    assert said == [] and len(store.unsaved) == 1   # said once, at start


def test_a_second_foresay_never_appends_to_the_running_conversation(tmp_path):
    first = HistoryStore(tmp_path)
    first.append(HistoryTurn("first", "1"))
    second = HistoryStore(tmp_path, resume=True)   # wanted to resume the file the first one writes
    assert second.path != first.path and second.turns == []
    assert second.notice and "open in another Foresay" in second.notice
    second.append(HistoryTurn("second", "2"))
    first.append(HistoryTurn("first again", "1"))
    assert users(first.path) == ["first", "first again"] and users(second.path) == ["second"]
    first.close()
    second.close()
    assert HistoryStore(tmp_path, resume=True).turns[0].user in ("first", "second")


def test_two_new_conversations_started_at_once_get_two_files(tmp_path, monkeypatch):
    monkeypatch.setattr(HistoryStore, "_new_path", lambda self: self.folder / "conversation-same.jsonl")
    a, b = HistoryStore(tmp_path), HistoryStore(tmp_path)
    assert a.path == b.path   # both chose the name before either wrote
    a.append(HistoryTurn("a", "1"))
    monkeypatch.setattr(HistoryStore, "_new_path", lambda self: self.folder / "conversation-other.jsonl")
    b.append(HistoryTurn("b", "2"))
    assert b.path != a.path and users(a.path) == ["a"] and users(b.path) == ["b"]

import json
import os

import pytest

from foresay.app import history as history_module
from foresay.app.history import HistoryStore, HistoryTurn


def test_turns_persist_and_a_resumed_store_reloads_them(tmp_path):
    store = HistoryStore(tmp_path)
    store.append(HistoryTurn("hello", "Hi there.", t=1.0))
    store.append(HistoryTurn("tell me a story", "Once upon", interrupted=True, t=2.0))
    store.close()
    again = HistoryStore(tmp_path, resume=True)
    assert again.path == store.path
    assert again.turns == store.turns
    assert again.notice is None
    assert json.loads(store.path.read_text().splitlines()[1])["interrupted"] is True


def test_each_start_begins_a_new_conversation_unless_resumed(tmp_path):
    store = HistoryStore(tmp_path)
    store.append(HistoryTurn("a", "b"))
    fresh = HistoryStore(tmp_path)
    assert fresh.turns == [] and fresh.path != store.path
    assert not fresh.path.exists()   # nothing is written before its first turn
    store.close()
    assert HistoryStore(tmp_path, resume=True).path == store.path
    fresh.append(HistoryTurn("c", "d"))
    fresh.close()
    assert [t.user for t in HistoryStore(tmp_path, resume=True).turns] == ["c"]
    assert [t.user for t in HistoryStore(tmp_path / "empty", resume=True).turns] == []


def test_new_conversation_keeps_the_old_file(tmp_path):
    store = HistoryStore(tmp_path)
    store.append(HistoryTurn("a", "b"))
    old = store.path
    store.new_conversation()
    store.append(HistoryTurn("c", "d"))
    assert old.exists() and store.path != old
    store.close()
    assert [t.user for t in HistoryStore(tmp_path, resume=True).turns] == ["c"]


def test_an_append_writes_one_line_and_never_rewrites_the_file(tmp_path, monkeypatch):
    store = HistoryStore(tmp_path)
    store.append(HistoryTurn("first", "one"))
    inode = store.path.stat().st_ino
    synced_dirs = []
    monkeypatch.setattr(history_module, "_fsync_dir", synced_dirs.append)
    monkeypatch.setattr(os, "replace", lambda *a: pytest.fail("an append must not rewrite the file"))
    written = []
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: written.append(bytes(data)) or real_write(fd, data))
    store.append(HistoryTurn("second", "two"))
    assert written == [b'{"user": "second", "assistant": "two", "interrupted": false, "t": 0.0}\n']
    assert store.path.stat().st_ino == inode
    assert synced_dirs == []   # the file existed: no folder entry changed


def test_creating_a_file_fsyncs_its_folder(tmp_path, monkeypatch):
    synced_dirs = []
    monkeypatch.setattr(history_module, "_fsync_dir", synced_dirs.append)
    store = HistoryStore(tmp_path)
    store.append(HistoryTurn("a", "b"))
    assert synced_dirs == [tmp_path]


def test_a_failed_write_keeps_the_previous_history(tmp_path, monkeypatch):
    store = HistoryStore(tmp_path)
    store.append(HistoryTurn("first", "kept"))
    before = store.path.read_bytes()
    real_write = os.write

    def torn(fd, data):   # half the line reaches the disk, then the disk is full
        real_write(fd, bytes(data[:10]))
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "write", torn)
    with pytest.raises(OSError):
        store.append(HistoryTurn("second", "lost"))
    monkeypatch.undo()
    assert store.path.read_bytes() == before
    assert store.turns == [HistoryTurn("first", "kept")]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []


def test_damaged_lines_are_set_aside_and_reported_once(tmp_path):
    path = tmp_path / "conversation-20260101-000000-001.jsonl"
    good = [json.dumps({"user": f"u{i}", "assistant": f"a{i}"}).encode() for i in range(3)]
    path.write_bytes(good[0] + b"\n" + b'{"user": "x"}\n' + good[1] + b"\n" + b"\xff\xfe not utf-8\n"
                     + good[2] + b"\n" + b'{"user": "torn", "assis')   # a write killed mid-line
    store = HistoryStore(tmp_path, resume=True)
    assert [t.user for t in store.turns] == ["u0", "u1", "u2"]
    assert store.notice and "3 damaged line(s) (2, 4, 6" in store.notice
    side = path.with_name(path.name + ".damaged").read_bytes()
    assert side == b'{"user": "x"}\n\xff\xfe not utf-8\n{"user": "torn", "assis\n'
    store.close()
    again = HistoryStore(tmp_path, resume=True)   # reported once: the file is clean now
    assert again.notice is None and again.turns == store.turns
    again.append(HistoryTurn("u3", "a3"))
    again.close()
    assert [t.user for t in HistoryStore(tmp_path, resume=True).turns] == ["u0", "u1", "u2", "u3"]


def test_leftover_temporary_copies_are_removed(tmp_path):
    (tmp_path / ".tmp-abc123.jsonl").write_text('{"user": "a", "assistant": "b"}\n')
    HistoryStore(tmp_path)
    assert list(tmp_path.iterdir()) == []

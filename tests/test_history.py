import json
import os

import pytest

from foresay.app.history import HistoryStore, HistoryTurn
from foresay.engine.errors import ForesayError


def test_turns_persist_and_reload(tmp_path):
    store = HistoryStore(tmp_path)
    store.append(HistoryTurn("hello", "Hi there.", t=1.0))
    store.append(HistoryTurn("tell me a story", "Once upon", interrupted=True, t=2.0))
    again = HistoryStore(tmp_path)
    assert again.path == store.path
    assert again.turns == store.turns
    assert json.loads(store.path.read_text().splitlines()[1])["interrupted"] is True


def test_new_conversation_keeps_the_old_file(tmp_path):
    store = HistoryStore(tmp_path)
    store.append(HistoryTurn("a", "b"))
    old = store.path
    store.new_conversation()
    store.append(HistoryTurn("c", "d"))
    assert old.exists() and store.path != old
    assert [t.user for t in HistoryStore(tmp_path).turns] == ["c"]


def test_a_failed_write_keeps_the_previous_history(tmp_path, monkeypatch):
    store = HistoryStore(tmp_path)
    store.append(HistoryTurn("first", "kept"))
    before = store.path.read_text()

    def crash(*a):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        store.append(HistoryTurn("second", "lost"))
    assert store.path.read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []


def test_damaged_history_is_a_clear_error(tmp_path):
    (tmp_path / "conversation-20260101-000000.jsonl").write_text('{"user": "x"}\n')
    with pytest.raises(ForesayError, match="damaged"):
        HistoryStore(tmp_path)

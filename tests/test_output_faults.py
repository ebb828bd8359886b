"""Outputs when the disk says no, and inputs cut short: nothing hangs, nothing is lost without a
word, nothing is written over without --force, and the exit status tells the truth."""
import asyncio
import errno
import json
import os

import numpy as np
import pytest
from audio_kit import write_wav

from foresay.app import assemble, commands
from foresay.app.cli import main
from foresay.app.commands import MetricsWriter
from foresay.app.saving import LineFile, write_report
from foresay.audio.errors import AudioFileError
from foresay.audio.files import FileSource, audio_file_info, load_audio
from foresay.engine.errors import ForesayError
from foresay.engine.events import TurnMetrics


@pytest.fixture
def no_models(monkeypatch):
    async def refuse(*a, **k):
        raise AssertionError("the pipeline was built before the files were checked")
    monkeypatch.setattr(assemble, "build_pipeline", refuse)


class FullDisk:
    """os.write that raises ENOSPC while `full`."""

    def __init__(self, monkeypatch):
        self.full, self.real = True, os.write
        monkeypatch.setattr(os, "write", self)

    def __call__(self, fd, data):
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.real(fd, data)


def _speech(tmp_path, name="b.wav", seconds=1.0):
    t = np.arange(int(16000 * seconds)) / 16000
    return write_wav(tmp_path / name, 0.3 * np.sin(2 * np.pi * 220 * t), 16000, "s16")


def test_metrics_wait_in_memory_while_the_disk_is_full(tmp_path, monkeypatch, capsys):
    path = tmp_path / "m.jsonl"
    writer = MetricsWriter(path)
    disk = FullDisk(monkeypatch)
    for turn in (1, 2, 3):
        writer(TurnMetrics(turn, 0.0, {"turn": turn, "outcome": "accepted"}))
    err = capsys.readouterr().err
    assert err.count("[warning]") == 1 and "No space left on device" in err and "kept in memory" in err
    disk.full = False
    writer(TurnMetrics(4, 0.0, {"turn": 4, "outcome": "accepted"}))
    writer.close()
    assert [json.loads(line)["turn"] for line in path.read_text().splitlines()] == [1, 2, 3, 4]


def test_metrics_that_could_never_be_written_are_printed_and_an_error(tmp_path, monkeypatch, capsys):
    lines = LineFile(tmp_path / "m.jsonl", warn=lambda text: None)
    FullDisk(monkeypatch)
    assert lines.write('{"turn": 1}') is False
    with pytest.raises(ForesayError, match="1 line.*could not be written.*No space left.*printed above"):
        lines.close()
    assert capsys.readouterr().out == '{"turn": 1}\n'



def test_a_report_the_disk_refuses_is_printed_not_lost(tmp_path, monkeypatch, capsys):
    FullDisk(monkeypatch)
    with pytest.raises(ForesayError, match="cannot write --json .*No space left.*printed above"):
        write_report(tmp_path / "r.json", {"wall_s": 1.5})
    assert json.loads(capsys.readouterr().out) == {"wall_s": 1.5}
    assert list(tmp_path.iterdir()) == []   # no torn file, no temporary left


@pytest.mark.parametrize("option", ["--out", "--metrics"])
def test_replay_never_writes_over_an_existing_output_without_force(tmp_path, capsys, no_models, option):
    audio, existing = _speech(tmp_path), tmp_path / "exists"
    existing.write_text("keep me")
    assert main(["replay", str(audio), option, str(existing), "--profile", "tiny-random"]) == 2
    assert existing.read_text() == "keep me"
    assert "exists; add --force" in capsys.readouterr().err
    with pytest.raises(AssertionError, match="built"):   # --force goes on to the pipeline
        main(["replay", str(audio), option, str(existing), "--force", "--profile", "tiny-random"])


@pytest.mark.parametrize("bench", [["asr"], ["tts"], ["gpu", "--small", "--device", "cpu"], ["turn-rules", "set.jsonl"]])
def test_bench_json_refuses_an_existing_file_without_force(tmp_path, capsys, bench):
    """Before any work: the refusal comes at once, and the file keeps what it had."""
    existing = tmp_path / "r.json"
    existing.write_text("{}")
    assert main(["bench", *bench, "--json", str(existing)]) == 2
    assert "exists; add --force" in capsys.readouterr().err
    assert existing.read_text() == "{}"


def test_replay_exits_non_zero_when_every_turn_failed(tmp_path, capsys, monkeypatch):
    async def all_failed(*a, **k):
        return [{"turn": 1, "outcome": "failed"}, {"turn": 2, "outcome": "failed"}]
    monkeypatch.setattr(commands, "replay", all_failed)
    assert main(["replay", str(_speech(tmp_path)), "--profile", "tiny-random"]) == 1
    assert "every turn failed" in capsys.readouterr().err

    async def one_answered(*a, **k):
        return [{"turn": 1, "outcome": "failed"}, {"turn": 2, "outcome": "accepted"}]
    monkeypatch.setattr(commands, "replay", one_answered)
    assert main(["replay", str(_speech(tmp_path)), "--profile", "tiny-random"]) == 0


def _cut(tmp_path):
    whole = _speech(tmp_path, "whole.wav", seconds=2.0)
    data = whole.read_bytes()
    cut = tmp_path / "cut.wav"
    cut.write_bytes(data[:len(data) // 2])   # the header still promises 2 s
    return cut


def test_a_wav_cut_short_is_read_with_a_warning_of_what_is_missing(tmp_path, caplog):
    cut = _cut(tmp_path)
    info = audio_file_info(cut)
    assert info.missing_frames > 15000 and "promises 2.00 s" in info.truncation()
    assert audio_file_info(tmp_path / "whole.wav").truncation() is None
    samples, _ = load_audio(cut)
    assert len(samples) < 17000
    assert any("cut short" in r.getMessage() and "missing" in r.getMessage() for r in caplog.records)


def test_replay_refuses_a_wav_cut_short(tmp_path, capsys, no_models):
    assert main(["replay", str(_cut(tmp_path)), "--profile", "tiny-random"]) == 2
    err = capsys.readouterr().err
    assert "cut short" in err and "answered as if complete" in err and "Traceback" not in err


def test_a_recording_cut_while_replayed_is_an_error_not_an_end(tmp_path):
    audio = _speech(tmp_path, seconds=3.0)
    source = FileSource(audio, realtime=False)

    async def read_all():
        n = 0
        async for block in source:
            n += len(block.samples)
            if n == 16000:   # one second in, the file is cut (a copy still being written, a crash)
                with open(audio, "r+b") as f:
                    f.truncate(44 + 2 * 24000)
        return n
    with pytest.raises(AudioFileError, match="cut while being read.*not answered"):
        asyncio.run(read_all())

"""`foresay bench asr --windows`: time and WER of a CTranslate2 Whisper by encoder window."""
import argparse
import json

import pytest

from foresay.app.bench.asr_windows import parse_windows
from foresay.app.bench.wer import scored_words
from foresay.app.cli import main


def test_windows_and_words_are_read_as_documented():
    assert parse_windows("10,20,30") == (10.0, 20.0, 30.0)
    for bad in ("10,x", "0,30", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_windows(bad)
    assert scored_words("My PIN is 94110, twelve.") == ["my", "pin", "is", "9", "4", "1", "1", "0", "1", "2"]
    assert scored_words("nine four one one zero") == ["9", "4", "1", "1", "0"]


def test_bench_reports_each_window_and_the_automatic_choice(registry_model, tmp_path, capsys):
    registry_model("whisper-tiny.en")
    registry_model("piper-en_US-joe-medium")
    from foresay.engine.demo.piper_sets import build_piper_set

    path = build_piper_set(tmp_path / "set", 1, room="silence", seed=5)
    out = tmp_path / "windows.json"
    code = main(["bench", "asr", "--windows", "10,30", "--target", "tiny.en", "--audio", str(path),
                 "--threads", "1", "--repeats", "1", "--json", str(out)])
    assert code == 0
    report = json.loads(out.read_text())
    assert set(report["windows"]) == {"10", "30", "auto"}
    for row in report["windows"].values():
        assert row["clips"] == 1 and row["median_ms"] > 0 and 0 <= row["wer"] < 0.5 and row["looped"] == 0
    assert sum(report["windows"]["auto"]["windows_decoded"].values()) == 1  # one window, no loop redone
    assert report["setup"]["clips"] == 1 and report["setup"]["target"] == "tiny.en"
    assert "auto" in capsys.readouterr().out


def test_bench_needs_a_truth_set_and_windows_the_model_hears(registry_model, tmp_path, capsys):
    assert main(["bench", "asr", "--windows", "10", "--target", "tiny.en"]) != 0
    assert "--windows needs --audio" in capsys.readouterr().err


def test_bench_guess_compares_the_decoders_on_the_hops_guess(registry_model, tmp_path, capsys):
    registry_model("whisper-tiny.en")
    registry_model("piper-en_US-joe-medium")
    from foresay.engine.demo.piper_sets import build_piper_set

    path = build_piper_set(tmp_path / "set", 2, room="silence", seed=5)
    out = tmp_path / "guess.json"
    code = main(["bench", "asr", "--guess", "--target", "tiny.en", "--audio", str(path),
                 "--threads", "1", "--repeats", "1", "--json", str(out)])
    assert code == 0
    rows = json.loads(out.read_text())["decoders"]
    assert set(rows) == {"ctranslate2", "guess decoder", "guess decoder, hop's guess"}
    for row in rows.values():
        assert row["clips"] == 2 and row["median_ms"] > 0 and 0 <= row["wer"] < 0.5
    guessed = rows["guess decoder, hop's guess"]
    assert guessed["changed_by_the_guess"] == 0 and guessed["wer"] == rows["guess decoder"]["wer"]
    assert 0 < guessed["accepted"] <= guessed["guess_tokens"]
    assert "hop's guess" in capsys.readouterr().out
    assert main(["bench", "asr", "--guess", "--windows", "10", "--target", "tiny.en", "--audio", str(path)]) != 0
    assert "two different benchmarks" in capsys.readouterr().err

import json

from foresay.app.cli import main


def test_bench_tts_espeak_writes_its_json(tmp_path, capsys):
    out = tmp_path / "tts.json"
    assert main(["bench", "tts", "--engine", "espeak", "--text", "Hello there. Bye.", "--repeats", "2",
                 "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert {"engine", "ttfc_cold_ms", "ttfc_prepared_ms", "rtf"} <= set(result)
    assert result["engine"] == "espeak" and result["repeats"] == 2
    assert result["ttfc_cold_ms"] > 0 and result["ttfc_prepared_ms"] >= 0 and 0 < result["rtf"] < 1
    assert "time to first chunk" in capsys.readouterr().out


def test_bench_tts_reports_bad_input_without_a_traceback(capsys):
    assert main(["bench", "tts", "--engine", "espeak", "--repeats", "0"]) == 2
    assert "repeats must be at least 1" in capsys.readouterr().err
    assert main(["bench", "tts", "--engine", "espeak", "--voice", "xx-nope"]) == 2
    assert "no voice" in capsys.readouterr().err

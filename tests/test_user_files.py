"""Files the user gives: never written over, outputs opened only after inputs are checked, and
every bad file a clear error instead of a traceback."""
import numpy as np
import pytest
from audio_kit import write_wav

from foresay.app import assemble
from foresay.app.cli import main
from foresay.app.config import ConfigError, load_settings


@pytest.fixture
def no_models(monkeypatch):
    """Fails the test if a command gets as far as building the pipeline."""
    async def refuse(*a, **k):
        raise AssertionError("the pipeline was built before the files were checked")
    monkeypatch.setattr(assemble, "build_pipeline", refuse)


def _speech(tmp_path, name="b.wav"):
    t = np.arange(16000) / 16000
    return write_wav(tmp_path / name, 0.3 * np.sin(2 * np.pi * 220 * t), 16000, "s16")


@pytest.mark.parametrize("option", ["--metrics", "--out"])
def test_replay_never_writes_over_its_input(tmp_path, capsys, no_models, option):
    audio = _speech(tmp_path)
    before = audio.read_bytes()
    assert main(["replay", str(audio), option, str(tmp_path / "." / "b.wav"), "--profile", "tiny-random"]) == 2
    assert audio.read_bytes() == before
    assert "refusing to write over it" in capsys.readouterr().err


def test_replay_checks_the_recording_before_opening_its_outputs(tmp_path, capsys, no_models):
    metrics = tmp_path / "m.jsonl"
    metrics.write_text('{"turn": 1}\n')
    (tmp_path / "bad.wav").write_text("not audio")
    assert main(["replay", str(tmp_path / "bad.wav"), "--metrics", str(metrics), "--profile", "tiny-random"]) == 2
    assert metrics.read_text() == '{"turn": 1}\n'   # not truncated
    assert "not a WAV or FLAC file" in capsys.readouterr().err


def test_a_missing_output_folder_is_a_clear_error(tmp_path, capsys, no_models):
    audio = _speech(tmp_path)
    assert main(["replay", str(audio), "--metrics", str(tmp_path / "nope" / "m.jsonl"),
                 "--profile", "tiny-random"]) == 2
    err = capsys.readouterr().err
    assert "the folder" in err and "does not exist" in err and "Traceback" not in err
    assert main(["replay", str(audio), "--out", str(tmp_path / "o.wav"), "--metrics", str(tmp_path / "o.wav"),
                 "--profile", "tiny-random"]) == 2
    assert "name the same file" in capsys.readouterr().err


def test_a_config_file_that_is_not_utf8_is_a_clear_error(tmp_path):
    path = tmp_path / "config.toml"
    path.write_bytes(b'[app]\nprofile = "d\xe9mo"\n')   # Latin-1
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_settings(path)


def test_bench_predgen_prompts_with_invalid_utf8(tmp_path, capsys):
    prompts = tmp_path / "p.jsonl"
    prompts.write_bytes(b'{"prompt": "hello"}\n{"prompt": "caf\xe9"}\n')
    assert main(["bench", "predgen", "--model", "tiny-random", "--prompts", str(prompts)]) == 2
    err = capsys.readouterr().err
    assert "not UTF-8" in err and "line 2" in err and "Traceback" not in err
    assert main(["bench", "predgen", "--model", "tiny-random", "--prompts", str(tmp_path / "p.jsonl"),
                 "--json", str(prompts)]) == 2
    assert prompts.read_bytes().startswith(b'{"prompt"')


def test_bench_asr_with_a_header_only_wav(tmp_path, capsys):
    empty = write_wav(tmp_path / "empty.wav", np.zeros(0), 16000, "s16")
    assert main(["bench", "asr", "--audio", str(empty)]) == 2
    assert "no audio" in capsys.readouterr().err
    clip = _speech(tmp_path)
    assert main(["bench", "asr", "--audio", str(clip), "--json", str(clip)]) == 2
    assert "refusing to write over it" in capsys.readouterr().err

"""Numbers on the command line and in config.toml that make no sense are refused in one line,
before any work, and the options do what their help says."""
import asyncio
import time

import numpy as np
import pytest
from audio_kit import write_wav

from foresay.app.cli import main
from foresay.app.config import ConfigError, load_settings
from foresay.audio.files import FileSource


def _wav(tmp_path, seconds=0.5):
    t = np.arange(int(16000 * seconds)) / 16000
    return write_wav(tmp_path / "a.wav", 0.3 * np.sin(2 * np.pi * 220 * t), 16000, "s16")


@pytest.mark.parametrize("argv, message", [
    (["bench", "asr", "--threads", "-1"], "--threads 0 or more"),
    (["bench", "asr", "--hop-ms", "0"], "--hop-ms must be at least 1"),
    (["bench", "predgen", "--limit", "-1"], "--limit must be at least 1"),
    (["bench", "predgen", "--limit", "0"], "--limit must be at least 1"),
    (["bench", "predgen", "--turn-cost", "-3"], "--turn-cost must be 0"),
])
def test_bad_numbers_are_refused_before_any_work(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_vad_refuses_a_negative_start(tmp_path, capsys):
    assert main(["vad", str(_wav(tmp_path)), "--start-ms", "-5"]) == 2
    assert "--start-ms must be positive" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["app = 5\n", 'audio = "loud"\n'])
def test_a_section_that_is_not_a_table_is_refused(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text)
    section = text.split(" ")[0]
    for profile in (None, "tiny-random"):
        with pytest.raises(ConfigError, match=f"{section}: expected a table"):
            load_settings(path, profile)


def test_a_realtime_file_source_is_paced_whatever_its_first_timestamp(tmp_path):
    source = FileSource(_wav(tmp_path, 0.4), realtime=True, t0=0.0)   # `foresay vad --realtime`

    async def play():
        start = time.monotonic()
        async for _ in source:
            pass
        return time.monotonic() - start
    assert asyncio.run(play()) >= 0.35


@pytest.mark.parametrize("model", ["/missing", "/missing/model.gguf"])
def test_a_missing_local_model_is_a_wrong_path_not_an_offline_problem(tmp_path, capsys, model):
    assert main(["replay", str(_wav(tmp_path)), "--profile", "demo", "--set", f"llm.model={model}"]) == 2
    error = [line for line in capsys.readouterr().err.splitlines() if line.startswith("foresay: error:")]
    assert len(error) == 1 and "does not exist; check the path (llm.model)" in error[0]
    assert "internet" not in error[0] and "--profile" not in error[0]


@pytest.mark.parametrize("before", [None, 0o600, 0o640])
def test_saving_the_profile_keeps_config_toml_private(tmp_path, before):
    import os
    import stat

    from foresay.app.config import remember_profile

    path = tmp_path / "config" / "config.toml"
    if before is not None:
        path.parent.mkdir()
        path.write_text('[app]\nmode = "push-to-talk"\n')
        os.chmod(path, before)
    remember_profile(path, "demo")
    assert stat.S_IMODE(path.stat().st_mode) == (before or 0o600)
    assert load_settings(path).app.profile == "demo"

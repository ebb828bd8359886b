"""Command-line errors give command-line advice; the window gets the window's."""
from foresay.app.cli import main
from foresay.app.downloads import offline_hint


def test_the_offline_hint_fits_where_it_is_shown():
    assert "--profile demo" in offline_hint() and "File" not in offline_hint()
    assert "File \u25b8 Settings" in offline_hint(window=True) and "--profile" not in offline_hint(window=True)


def test_a_missing_model_in_replay_gets_command_line_advice(tmp_path, capsys, monkeypatch):
    import numpy as np
    from audio_kit import write_wav

    from foresay.app import assemble
    from foresay.engine.errors import ModelUnavailable

    def offline(*a, **k):
        raise ModelUnavailable("model 'Qwen/Qwen2.5-0.5B-Instruct' is not in the local cache")
    monkeypatch.setattr(assemble, "download_models", offline)
    audio = write_wav(tmp_path / "a.wav", np.zeros(16000), 16000, "s16")
    assert main(["replay", str(audio), "--profile", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "--profile demo" in err and "File" not in err


def test_on_an_offline_profile_the_advice_names_the_setting_not_the_profile(tmp_path, capsys, monkeypatch):
    """`--profile demo --set llm.model=<hub id>` offline: the demo profile is already in use, so
    advising `--profile demo` would be no help; the setting that names the model is."""
    import numpy as np
    from audio_kit import write_wav

    from foresay.app import assemble
    from foresay.app.downloads import offline_hint as hint
    from foresay.engine.errors import ModelUnavailable

    def offline(*a, **k):
        raise ModelUnavailable("the chat model 'Qwen/Qwen2.5-0.5B-Instruct' cannot be downloaded now. " + hint())
    monkeypatch.setattr(assemble, "download_models", offline)
    audio = write_wav(tmp_path / "a.wav", np.zeros(16000), 16000, "s16")
    assert main(["replay", str(audio), "--profile", "demo", "--set", "llm.model=Qwen/Qwen2.5-0.5B-Instruct"]) == 2
    error = [line for line in capsys.readouterr().err.splitlines() if line.startswith("foresay: error:")]
    assert len(error) == 1 and "does not ship this model" in error[0] and "--set" in error[0]
    assert "--profile" not in error[0]


def test_run_without_a_microphone_points_to_replay(capsys, monkeypatch):
    from foresay.audio import devices
    from foresay.audio.errors import NoAudioDevice

    def none(spec, kind):
        raise NoAudioDevice(f"no {kind} device found (is one plugged in and enabled?)")
    monkeypatch.setattr(devices, "resolve_device", none)
    assert main(["run", "--no-ui", "--profile", "tiny-random"]) == 2
    err = capsys.readouterr().err
    assert "no input device found" in err and "foresay replay" in err


def test_the_command_line_says_when_it_runs_another_profile_than_the_configured(tmp_path, capsys):
    from argparse import Namespace

    from foresay.app.arguments import settings_from

    config = tmp_path / "config.toml"
    config.write_text('[app]\nprofile = "cpu"\n')
    assert settings_from(Namespace(config=config, profile="demo", set=[])).app.profile == "demo"
    assert capsys.readouterr().err.strip() == f"foresay: running the 'demo' profile (--profile); {config} chooses 'cpu'"
    settings_from(Namespace(config=config, profile="cpu", set=[]))
    settings_from(Namespace(config=config, profile=None, set=[]))
    assert capsys.readouterr().err == ""   # the configured profile: nothing to say

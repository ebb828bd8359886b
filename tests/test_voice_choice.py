"""Which voice speaks: Piper on the CPU profiles when its voice is here (or downloadable), espeak-ng
named in one line when not; the doctor and the status say which."""
import pytest

from foresay.app import doctor
from foresay.app.config import ConfigError, load_settings
from foresay.app.voice import choose_voice, fetch_voice
from foresay.engine.errors import ModelUnavailable
from foresay.engine.tts.errors import InvalidTtsConfig
from foresay.engine.tts.espeak import EspeakConfig
from foresay.engine.tts.piper_engine import PiperConfig

FETCH = "run `foresay models fetch piper-en_US-joe-medium`"


@pytest.fixture
def empty(tmp_path):
    path = tmp_path / "empty.toml"
    path.write_text("")
    return path


@pytest.fixture
def no_voice_here(tmp_path, monkeypatch):
    monkeypatch.setenv("FORESAY_REGISTRY_DIR", str(tmp_path / "no-registry"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hub"))


def test_piper_is_the_voice_of_the_cpu_profiles_and_zonos_of_the_large_gpus(empty):
    for profile in ("cpu", "gpu-8gb", "demo"):
        assert load_settings(empty, profile=profile).tts.engine == "piper", profile
    for profile in ("gpu-24gb", "gpu-16gb"):
        assert load_settings(empty, profile=profile).tts.engine == "zonos", profile
    assert load_settings(empty, profile="tiny-random").tts.engine == "espeak"


def test_tts_voice_names_the_piper_voice_and_bad_values_are_refused(empty):
    settings = load_settings(empty, profile="cpu", overrides=['tts.voice="/voices/x.onnx"', "tts.piper.threads=2"])
    config = settings.tts.engine_config()
    assert isinstance(config, PiperConfig) and config.voice == "/voices/x.onnx" and config.threads == 2
    with pytest.raises(ConfigError, match="tts engine must be one of espeak, piper, zonos"):
        load_settings(empty, profile="cpu", overrides=['tts.engine="festival"'])
    with pytest.raises(ConfigError, match="a Piper voice must be named"):
        load_settings(empty, profile="cpu", overrides=['tts.voice=" "'])


def test_the_demo_profile_speaks_with_piper_when_the_voice_is_here(empty, registry_model):
    registry_model("piper-en_US-joe-medium")
    choice = choose_voice(load_settings(empty, profile="demo"))
    assert isinstance(choice.config, PiperConfig) and choice.fallback is None and choice.download is None
    assert choice.line == "voice: Piper en_US-joe-medium"


def test_without_the_voice_an_offline_profile_speaks_with_espeak_and_says_how_to_get_it(empty, no_voice_here):
    choice = choose_voice(load_settings(empty, profile="demo"))
    assert isinstance(choice.config, EspeakConfig) and choice.download is None
    assert choice.line == f"voice: espeak-ng en-us (no Piper voice: {FETCH})"
    [check] = doctor.check_voice(load_settings(empty, profile="demo"))
    assert not check.ok and not check.essential and check.fix == FETCH


def test_an_online_profile_downloads_the_voice_and_falls_back_when_that_fails(empty, no_voice_here, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    settings = load_settings(empty, profile="cpu")
    choice = choose_voice(settings)
    assert choice.download.repo_id == "rhasspy/piper-voices"
    assert choice.download.files == ("en/en_US/joe/medium/en_US-joe-medium.onnx",
                                     "en/en_US/joe/medium/en_US-joe-medium.onnx.json")
    [check] = doctor.check_voice(settings)
    assert check.ok and "downloads on first use" in check.detail
    fetched = []
    assert fetch_voice(settings, choice, fetched.append).config is choice.config and fetched == [choice.download]

    def offline(item):
        raise ModelUnavailable("no network")
    fallback = fetch_voice(settings, choice, offline)
    assert isinstance(fallback.config, EspeakConfig) and FETCH in fallback.line


def test_a_voice_path_is_used_as_given_and_a_bad_one_is_a_clear_error(empty, tmp_path, registry_model):
    model = registry_model("piper-en_US-joe-medium") / "en_US-joe-medium.onnx"
    settings = load_settings(empty, profile="cpu", overrides=[f'tts.voice="{model}"'])
    assert choose_voice(settings).label == f"Piper {model}"
    missing = load_settings(empty, profile="cpu", overrides=[f'tts.voice="{tmp_path / "x.onnx"}"'])
    with pytest.raises(InvalidTtsConfig, match="Piper voice file not found"):
        choose_voice(missing)
    [check] = doctor.check_voice(missing)
    assert not check.ok and check.essential and "Piper voice file not found" in check.detail

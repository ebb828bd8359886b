import pytest

from foresay.app.config import PROFILES, Settings, load_settings
from foresay.app.settings import ConfigError


def test_profile_file_and_overrides_stack(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[app]\nprofile = "tiny-random"\nmode = "push-to-talk"\n'
                    '[predgen]\nverifier = "topk:3"\n[tts.espeak.voice]\nrate_wpm = 200\n')
    s = load_settings(path, overrides=["predgen.max_new_tokens=32", "llm.seed=3"])
    assert isinstance(s, Settings)
    assert s.app.profile == "tiny-random" and s.app.mode == "push-to-talk"
    assert s.llm.model == "tiny-random" and s.llm.seed == 3
    assert s.asr.draft == "tiny-random-draft"
    assert s.predgen.verifier == "topk:3" and s.predgen.max_new_tokens == 32
    assert s.tts.espeak.voice.rate_wpm == 200


def test_every_profile_builds(tmp_path):
    empty = tmp_path / "c.toml"
    empty.write_text("")
    for name in PROFILES:
        assert load_settings(empty, profile=name).app.profile == name


def test_auto_profile_on_a_cpu_machine(tmp_path):
    empty = tmp_path / "c.toml"
    empty.write_text("")
    assert load_settings(empty).app.profile == "cpu"


@pytest.mark.parametrize("text,message", [
    ("[llmm]\nmodel = 'x'\n", "unknown key 'llmm'"),
    ("[llm]\nmodle = 'x'\n", "unknown key 'llm.modle'"),
    ("[llm]\ndtype = 'float8'\n", "\\[llm\\]: LLM config: dtype"),
    ("[predgen]\nverifier = 'topk:x'\n", "verifier must be"),
    ("[app]\nmode = 'telepathy'\n", "mode must be one of"),
    ("[app]\nprofile = 'huge'\n", "unknown profile 'huge'"),
    ("[tts.espeak.voice]\nrate_wpm = 'fast'\n", "tts.espeak.voice.rate_wpm: expected a whole number"),
    ("[llm\n", "not valid TOML"),
])
def test_broken_configs_name_the_problem(tmp_path, text, message):
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(path, profile=None if "profile" in text else "tiny-random")


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_the_documented_example_config_is_valid(tmp_path):
    from pathlib import Path
    page = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    block = page.split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "config.toml"
    path.write_text(block.replace('profile = "auto"', 'profile = "cpu"'))
    s = load_settings(path)
    assert s.llm.model == "Qwen/Qwen2.5-3B-Instruct" and s.asr.draft == "openai/whisper-tiny.en"
    assert s.audio.input_device == "USB" and s.audio.hangover.max_s == 1.2

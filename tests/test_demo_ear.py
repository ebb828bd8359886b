"""The demo profile's ear: a real Whisper tiny.en where one is on this machine, its own Whisper pair
where not (and it says so); `demo-own-ear` and the user's asr settings choose for themselves. And
what the demo tells the user it knows."""
from dataclasses import replace

import pytest

from foresay.app import demo_profile, doctor
from foresay.app.assemble import ready_line
from foresay.app.config import load_settings
from foresay.engine import registry_models
from foresay.engine.asr.streaming import StreamingConfig

CT2 = ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")


@pytest.fixture
def empty(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("")
    return path


@pytest.fixture
def ear(tmp_path, monkeypatch):
    """`ear(True)`: a fetched registry copy of whisper-tiny.en (a folder of names); `ear(False)`:
    none. Never a hub copy, whatever this machine's Hugging Face cache holds."""
    folder = tmp_path / "whisper-tiny.en"
    folder.mkdir()
    monkeypatch.setattr(demo_profile, "hub_copy", lambda: None)

    def set_ear(present: bool):
        monkeypatch.setattr(registry_models, "registry_model_path",
                            lambda name: folder if present and name == "whisper-tiny.en" else None)
        return folder
    return set_ear


def test_the_demo_hears_with_the_real_whisper_when_it_is_fetched(ear, empty):
    folder = ear(True)
    demo = load_settings(empty, profile="demo")
    assert (demo.asr.target, demo.asr.draft, demo.asr.chosen_backend) == (str(folder), None, "faster-whisper")
    assert demo.streaming == StreamingConfig()   # the defaults measured on real tiny.en, not the pair's
    assert demo.llm.model == "demo" and demo.audio.end_of_turn == "decision" and demo.app.profile == "demo"
    own = load_settings(empty, profile="demo-own-ear")   # the pair, asked for by name
    assert (own.asr.target, own.asr.draft, own.asr.chosen_backend) == ("demo", "demo-draft", "specasr")
    assert own.streaming.prompt_tokens == 0 and own.streaming.segment_s == 3.5
    assert demo.asr.hears_people and not own.asr.hears_people   # Smart Turn's "auto" joins the real ear only
    line = ready_line(demo, "demo (qwen2)", "voice: Piper")
    assert line == "ready: demo profile, demo (qwen2), hearing with Whisper tiny.en (faster-whisper); voice: Piper"
    line = ready_line(demo, "demo (qwen2)", "voice: Piper", audio_cue=True)
    assert "hearing with Whisper tiny.en (faster-whisper) and Smart Turn; " in line
    assert demo_profile.OWN_EAR_NOTE not in ready_line(own, "demo", "voice: Piper")   # chosen, not for want of one


def test_without_a_real_whisper_the_demo_keeps_its_pair_and_says_so(ear, empty, caplog):
    ear(False)
    demo = load_settings(empty, profile="demo")
    assert demo == replace(load_settings(empty, profile="demo-own-ear"), app=demo.app)
    assert demo.asr.target == "demo" and demo.asr.chosen_backend == "specasr"
    with caplog.at_level("WARNING"):
        line = ready_line(demo, "demo (qwen2)", "voice: Piper")
    assert line.startswith("ready: demo profile, demo (qwen2), hearing with the demo's own Whisper (demo + demo-draft")
    assert line.endswith("voice: Piper; the demo hears with its own small Whisper, trained on synthetic voices: run "
                         "`foresay models fetch whisper-tiny.en` for one that hears people")
    assert demo_profile.OWN_EAR_NOTE in caplog.text
    [check] = doctor.check_demo_ear()
    assert not check.ok and not check.essential and check.fix == "foresay models fetch whisper-tiny.en"


def test_the_users_asr_settings_win_over_the_ear(ear, empty):
    ear(True)
    base = load_settings(empty, profile="demo", overrides=["asr.target=base.en"])
    assert (base.asr.target, base.asr.chosen_backend) == ("base.en", "faster-whisper")
    empty.write_text('[asr]\ntarget = "demo"\ndraft = "demo-draft"\nbackend = "specasr"\n')
    pair = load_settings(empty, profile="demo")
    assert (pair.asr.target, pair.asr.draft, pair.asr.chosen_backend) == ("demo", "demo-draft", "specasr")
    line = ready_line(pair, "demo", "voice: Piper")
    assert "own Whisper" in line and demo_profile.OWN_EAR_NOTE not in line


def test_a_complete_hub_copy_in_the_cache_is_a_real_whisper(tmp_path, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(registry_models, "registry_model_path", lambda name: None)
    snapshot = tmp_path / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache",
                        lambda repo, name: str(snapshot / name) if repo == demo_profile.HUB_REAL_EAR else None)
    for name in CT2[:-1]:
        (snapshot / name).write_text("x")
    assert demo_profile.real_whisper() is None   # no vocabulary: not a whole model
    (snapshot / CT2[-1]).write_text("x")
    assert demo_profile.real_whisper() == snapshot
    [check] = doctor.check_demo_ear()
    assert check.ok and str(snapshot) in check.detail


def test_the_demo_says_what_it_knows_and_answers_its_examples_right():
    from foresay.engine.demo.evaluate_chat import answer
    from foresay.engine.llm.backend import load_llm
    from foresay.engine.llm.config import LLMConfig
    from foresay.engine.predgen.conversation import Conversation
    import json
    from importlib.resources import files

    intro = demo_profile.assistant_intro("demo")
    assert "capitals, languages and currencies" in intro.knows and "and of Spain?" in intro.knows
    assert 4 <= len(intro.examples) <= 6
    assert demo_profile.assistant_intro("Qwen/Qwen2.5-0.5B-Instruct").knows == ""
    lm = load_llm(LLMConfig(model="demo", threads=2))
    data = json.loads(files("foresay.assets").joinpath("demo_intro.json").read_text("utf-8"))
    assert [answer(Conversation(lm), e["ask"], 32) for e in data["examples"]] == [e["reply"] for e in data["examples"]]

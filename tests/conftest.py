import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from asr_support import asr_fixture_root, whisper_models  # noqa: E402,F401  (shared ASR fixtures)


@pytest.fixture(scope="session")
def fixture_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("fixtures")
    os.environ["FORESAY_FIXTURE_DIR"] = str(path)
    return path


@pytest.fixture(scope="session")
def load_fixture_lm(fixture_dir):
    from foresay.engine.llm.config import LLMConfig
    from foresay.engine.llm.backend import load_llm
    loaded = {}

    def load(name="tiny-random", seed=0, **kw):
        key = (name, seed, tuple(sorted(kw.items())))
        if key not in loaded:
            loaded[key] = load_llm(LLMConfig(model=name, seed=seed, **kw))
        return loaded[key]
    return load


@pytest.fixture(scope="session")
def tiny_lm(load_fixture_lm):
    return load_fixture_lm("tiny-random")



@pytest.fixture(scope="session")
def registry_model():
    """`registry_model(name)`: the folder of a fetched registry model (real weights). Missing, it
    skips the test with the command that fetches it; under CI (CI=true) it fails instead, so a
    green CI run has really run the real-model tests."""
    from foresay.engine.registry_models import registry_model_path

    def find(name: str):
        folder = registry_model_path(name)
        if folder is None:
            message = f"registry model {name!r} is not fetched: run `foresay models fetch {name}`"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
        return folder
    return find


@pytest.fixture(scope="session")
def tiny_en(registry_model):
    """The registry's Whisper tiny.en through CTranslate2, on one thread."""
    from foresay.engine.asr.whisper.faster import FasterWhisperBackend, FasterWhisperConfig

    registry_model("whisper-tiny.en")
    return FasterWhisperBackend(FasterWhisperConfig("tiny.en", cpu_threads=1))


@pytest.fixture(scope="session")
def piper_model(registry_model):
    """The registry's Piper voice en_US-joe-medium, loaded once for the whole session."""
    from foresay.engine.tts.piper_model import PiperModel
    from foresay.engine.tts.piper_voices import check_voice_files

    folder = registry_model("piper-en_US-joe-medium")
    return PiperModel(check_voice_files(folder / "en_US-joe-medium.onnx", "en_US-joe-medium", "registry"), threads=1)


@pytest.fixture
def shared_piper(piper_model, monkeypatch):
    """Every PiperEngine built in the test (a pipeline's too) speaks with the session's loaded voice."""
    from foresay.engine.tts.piper_engine import PiperEngine

    def load(self):
        self.files = piper_model.files
        return piper_model
    monkeypatch.setattr(PiperEngine, "_load_model", load)
    return piper_model

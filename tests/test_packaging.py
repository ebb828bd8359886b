import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_built_wheel_installs_and_imports(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path / "dist"), str(ROOT)], check=True)
    wheel = next((tmp_path / "dist").glob("foresay-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for top in ("app", "engine", "audio", "ui", "assets"):  # every package folder ships
        for init in (ROOT / top).glob("**/__init__.py"):
            assert "foresay/" + init.relative_to(ROOT).as_posix() in names
    assert "foresay/engine/predgen/turn.py" in names
    assert "foresay/assets/prompts/system.txt" in names
    assert "foresay/assets/icons/foresay-256.png" in names and "foresay/assets/icons/foresay.ico" in names
    assert "foresay/assets/whisper_vocab/gpt2.tiktoken" in names  # the tiny-random fixtures' vocabulary
    for model in ("demo-chat", "demo-whisper", "demo-whisper-draft"):  # the offline demo profile's models
        assert f"foresay/assets/models/{model}/model.safetensors" in names
    assert not any(n.startswith(("app/", "engine/", "ui/", "audio/")) for n in names)
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    out = subprocess.run(
        [str(python), "-c", "import foresay.engine, foresay.engine.events as e, importlib.resources as r;"
         "print(e.TurnEnded.__name__, len(r.files('foresay.assets').joinpath('prompts/system.txt')"
         ".read_text()) > 0)"], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.split() == ["TurnEnded", "True"]


def test_editable_install_reads_assets():
    from foresay.engine.predgen.conversation import default_system_prompt
    assert "truncated" in default_system_prompt()

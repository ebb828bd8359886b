"""The bootstrap's torch choice (packaging/torch_choice.sh) with a fake pip: the CPU build without
an NVIDIA GPU, the default index when the CPU index cannot be reached, FORESAY_TORCH above all."""
import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "packaging" / "torch_choice.sh"
FAKE_PIP = ('fake_pip() { echo "pip $*" >> "$LOG"; case "$*" in *whl/cpu*) return "$CPU_INDEX_FAILS";; '
            'esac; }')  # the CPU index answers, or not


def choose(tmp_path, gpu: bool, cpu_index_fails: bool = False, override: str = "") -> list[str]:
    log = tmp_path / "pip.log"
    log.unlink(missing_ok=True)
    proc = tmp_path / "nvidia-version"
    proc.unlink(missing_ok=True)
    if gpu:
        proc.write_text("NVRM version: 550\n")
    env = {**os.environ, "LOG": str(log), "CPU_INDEX_FAILS": "1" if cpu_index_fails else "0",
           "FORESAY_NVIDIA_PROC": str(proc), "FORESAY_TORCH": override, "PATH": "/usr/bin:/bin"}
    script = f'{FAKE_PIP}\nsource "{SCRIPT}"\nnvidia-smi() {{ return 1; }}\ninstall_torch fake_pip'
    subprocess.run(["bash", "-c", script], env=env, check=True, capture_output=True, text=True)
    return log.read_text().splitlines()


@pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash")
def test_the_bootstrap_picks_the_torch_build_for_the_machine(tmp_path):
    cpu = "pip install --retries 1 --timeout 15 --index-url https://download.pytorch.org/whl/cpu torch==2.13.0"
    assert choose(tmp_path, gpu=False) == [cpu]
    assert choose(tmp_path, gpu=False, cpu_index_fails=True) == [cpu, "pip install torch==2.13.0"]
    assert choose(tmp_path, gpu=True) == ["pip install torch==2.13.0"]
    assert choose(tmp_path, gpu=False, override="torch==2.12.0") == ["pip install torch==2.12.0"]
    cuda = "torch --index-url https://download.pytorch.org/whl/cu128"   # the README's example
    assert choose(tmp_path, gpu=False, override=cuda) == [f"pip install {cuda}"]

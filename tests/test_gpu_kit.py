"""The GPU kit: its dry run on the CPU reports every section, what it imports is on the GPU image
or carried, `prepare` carries only what the image lacks, and a section's hang or crash is
recorded without losing the others."""
import importlib.util
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from foresay.app.bench import gpu_kit

ROOT = Path(__file__).resolve().parents[1]


def wheels_module():
    spec = importlib.util.spec_from_file_location("gpu_kit_wheels", ROOT / "packaging" / "gpu_kit_wheels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def numbers_in(value) -> list:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [value]
    if isinstance(value, dict):
        return [n for v in value.values() for n in numbers_in(v)]
    if isinstance(value, list):
        return [n for v in value for n in numbers_in(v)]
    return []


def distributions_of(modules) -> set[str]:
    """Normalized distributions that provide the top-level `modules` (stdlib and Foresay left out)."""
    owners = metadata.packages_distributions()
    tops = {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) - {"foresay"}
    return {re.sub(r"[-_.]+", "-", d).lower() for top in tops if not top.startswith("_") for d in owners.get(top, [])}


def allowed_on_image(wheels) -> set[str]:
    """The image's packages, the carried ones, and (installed here) what they require, extras left out."""
    allowed = set(wheels.image_packages()) | {wheels.normalized(n) for n in wheels.CARRIED}
    todo = list(allowed)
    while todo:
        try:
            requires = metadata.requires(todo.pop()) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            if re.search(r"\bextra\s*==", line):
                continue
            name = wheels.normalized(re.split(r"[ ;<>=!~\[(]", line, maxsplit=1)[0])
            if name not in allowed:
                allowed.add(name)
                todo.append(name)
    return allowed


# The dry run in a fresh interpreter, so that everything it imports can be seen.
DRY_RUN = """
import json, sys
from foresay.app.bench import gpu_kit
code = gpu_kit.main(["--out", sys.argv[1], "--device", "cpu", "--small", "--in-process", "--work", sys.argv[2]])
json.dump(sorted(sys.modules), open(sys.argv[3], "w"))
sys.exit(code)
"""


def test_dry_run_reports_every_section_with_figures_or_a_reason(tmp_path, fixture_dir):
    modules = tmp_path / "modules.json"
    subprocess.run([sys.executable, "-c", DRY_RUN, str(tmp_path), str(tmp_path / "work"), str(modules)],
                   check=True, env={**os.environ, "FORESAY_FIXTURE_DIR": str(fixture_dir)})
    imported = json.loads(modules.read_text())
    report = json.loads((tmp_path / gpu_kit.REPORT).read_text())
    assert list(report["sections"]) == list(gpu_kit.SECTIONS)
    for name, entry in report["sections"].items():
        if entry["status"] == "skipped":
            assert entry["reason"].strip(), name
        else:
            assert entry["status"] == "ok", (name, entry)
            assert numbers_in(entry["figures"]), name
    sections = report["sections"]
    assert sections["zonos"]["status"] == "skipped" and "Zonos" in sections["zonos"]["reason"]
    assert set(sections["bench_gpu"]["figures"]["llm"]["by_context"]) == {"32", "64"}
    assert set(sections["bench_gpu"]["figures"]["asr"]["by_window_s"]) == {"10", "30"}
    exact = sections["exactness"]["figures"]
    assert exact["reply_identical"] == 1.0 and exact["exact_verified"] and exact["dtype"] == "bfloat16"
    fusion = sections["fusion"]["figures"]
    assert fusion["plain"]["exact_verified"] and fusion["fused"]["exact_verified"]
    assert fusion["agreement"]["agrees"] and fusion["fused"]["compiled"]["rotary"] > 0
    whisper = sections["profile"]["figures"]["whisper"]["by_window_s"]
    assert set(whisper) == {"30", "10"} and all(w["kernels_per_pass"] > 0 and w["top"] for w in whisper.values())
    assert whisper["30"]["frames"] == 3 * whisper["10"]["frames"]
    split = sections["split"]["figures"]
    assert split["split"]["split_kept"] and not split["whole"]["split_kept"]
    assert split["split"]["exact_verified"] and split["agreement"]["agrees"]
    for name in ("asr_final", "qwen3_asr"):
        rows = sections[name]["figures"].values()
        assert rows and all(row["identical"] and row["greedy_ms"] > 0 for row in rows)
        assert all(row["first_difference"] is None for row in rows)
    replay = sections["replay"]["figures"]
    assert replay["turns"] and "warming up" in replay["load_s"]
    assert {"plain", "streams"} <= set(sections["streams"]["figures"]["methods"]) or \
        sections["streams"]["figures"]["missed_turns"] == 0
    assert report["kit"]["small"] is True and report["kit"]["total_s"] > 0
    # everything the sections imported is on the GPU image or carried to it
    wheels = wheels_module()
    assert distributions_of(imported) - allowed_on_image(wheels) == set()


def test_prepare_carries_only_what_the_image_lacks(monkeypatch):
    wheels = wheels_module()
    image = wheels.image_packages()
    assert {"torch", "transformers", "numpy", "tokenizers", "safetensors", "onnxruntime"} <= image
    assert wheels.missing_from_image(wheels.carried(image), image) == wheels.carried(image)
    assert wheels.missing_from_image(["numpy", "Platformdirs", "huggingface_hub", "soxr"], image) == \
        ["Platformdirs", "soxr"]
    monkeypatch.setitem(wheels.CARRIED, "numpy", "a package the image has")
    with pytest.raises(SystemExit, match="numpy already in the GPU image"):
        wheels.carried(image)
    monkeypatch.delitem(wheels.CARRIED, "numpy")
    pins = wheels.requirements(wheels.carried(image))
    assert all(re.fullmatch(r"[\w.-]+==[\w.+-]+", pin) for pin in pins)


def test_zonos_travels_with_pinned_wheels_of_what_the_image_lacks(monkeypatch):
    wheels = wheels_module()
    image = wheels.image_packages()
    pins = wheels.zonos_carried(image)
    assert all(re.fullmatch(r"[\w.-]+==[\w.+-]+", pin) for pin in pins)
    assert {"phonemizer", "inflect", "sudachipy"} <= {pin.split("==")[0] for pin in pins}
    assert not any(pin.startswith("sudachidict") for pin in pins)  # over 60 MB: imported without it
    monkeypatch.setitem(wheels.ZONOS_CARRIED, "torch", "2.0")
    with pytest.raises(SystemExit, match="torch already in the GPU image"):
        wheels.zonos_carried(image)


def test_the_kit_carries_zonos_from_a_git_directory_or_a_checkout(tmp_path):
    """`carry_zonos` of gpu_kit.sh: the zonos package and its revision, from either form."""
    repo = tmp_path / "Zonos"
    (repo / "zonos" / "backbone").mkdir(parents=True)
    (repo / "zonos" / "model.py").write_text("# the model\n")
    (repo / "zonos" / "backbone" / "_torch.py").write_text("# a backbone\n")
    (repo / "README.md").write_text("not carried\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "zonos"]):
        subprocess.run(git + args, check=True)
    revision = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    script = ROOT / "packaging" / "gpu_kit.sh"

    def carry(source, dest, **kwargs):
        return subprocess.run(["bash", "-c", f'source <(sed -n "/^carry_zonos()/,/^}}/p" {script}); '
                               'carry_zonos "$0" "$1"', str(source), str(dest)], **kwargs)

    for name, source in (("checkout", repo), ("git-dir", repo / ".git")):
        dest = tmp_path / name
        carry(source, dest, check=True)
        assert (dest / "src" / "zonos" / "backbone" / "_torch.py").is_file()
        assert not (dest / "src" / "README.md").exists()
        assert (dest / "revision").read_text().strip() == revision
    assert carry(tmp_path, tmp_path / "none", capture_output=True).returncode != 0


def test_each_verb_of_the_kit_script_runs_its_own_step(tmp_path):
    """`run` without a carried kit stops at once with what to do (it does not run another step)."""
    (tmp_path / "packaging").mkdir()
    (tmp_path / "packaging" / "gpu_kit.sh").write_text((ROOT / "packaging" / "gpu_kit.sh").read_text())
    script = tmp_path / "packaging" / "gpu_kit.sh"
    done = subprocess.run(["bash", str(script), "run"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "OUT": str(tmp_path / "out")})
    assert done.returncode == 1 and "no .whl folder" in done.stderr and "gpu kit]" not in done.stdout
    usage = subprocess.run(["bash", str(script), "unknown"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "prepare | run [ARGS] | dry-run [ARGS]" in usage.stderr
    names = re.findall(r"^([a-z_]+)\(\) \{", script.read_text(), flags=re.M)
    assert len(names) == len(set(names)) and {"prepare", "run", "dry_run", "carry_espeak", "carry_zonos"} <= set(names)


def test_a_hung_or_crashed_section_becomes_an_error_entry(tmp_path):
    part = tmp_path / "part.json"
    hung = gpu_kit.run_isolated([sys.executable, "-c", "import time; time.sleep(30)"], part, 1)
    assert hung["status"] == "timeout" and "1 s" in hung["error"]
    crashed = gpu_kit.run_isolated([sys.executable, "-c", "import os; os._exit(3)"], part, 30)
    assert crashed["status"] == "error" and "exit code 3" in crashed["error"]
    part.write_text(json.dumps({"status": "ok", "figures": {"x": 1}, "seconds": 0.1}))
    assert gpu_kit.run_isolated([sys.executable, "-c", "pass"], part, 30)["figures"] == {"x": 1}


def test_a_section_stopped_at_its_limit_keeps_what_it_measured(tmp_path):
    part = tmp_path / "zonos.part.json"
    child = ("import sys, time; from pathlib import Path; from foresay.app.bench.gpu_kit_sections import Kit; "
             "Kit('cpu', True, Path('.'), Path('r.wav'), Path(sys.argv[1])).progress({'eager': {'step_ms': 7.5}}); "
             "time.sleep(30)")
    stopped = gpu_kit.run_isolated([sys.executable, "-c", child, str(part)], part, 5)
    assert stopped["status"] == "timeout" and stopped["figures"] == {"eager": {"step_ms": 7.5}}


def test_unknown_section_is_a_one_line_error(capsys):
    with pytest.raises(SystemExit):
        gpu_kit.main(["--out", "x", "--sections", "bench_gpu,nope"])
    assert "unknown section(s) nope" in capsys.readouterr().err


def test_the_gpu_sections_name_models_that_exist_offline():
    """The GPU-only pairs are not run here: each name must be a fixture or a shipped model."""
    from foresay.app.bench import gpu_kit_sections as sections
    from foresay.engine.asr.llm.fixtures import is_llm_fixture
    from foresay.engine.asr.whisper.fixtures import is_fixture
    from foresay.engine.llm.fixtures import FIXTURES
    from foresay.engine.model_registry import SHIPPED_LLM_ASR, SHIPPED_WHISPER

    for pair in sections.WHISPER_PAIRS["gpu"]:
        assert all(is_fixture(name) or name in SHIPPED_WHISPER for name in pair), pair
    for pair in sections.LLM_ASR_PAIRS["gpu"]:
        assert all(is_llm_fixture(name) or name in SHIPPED_LLM_ASR for name in pair), pair
    assert sections.Kit("cuda", False, Path("."), Path("r.wav")).llm() in FIXTURES


def test_first_difference_says_where_a_transcript_leaves_the_reference():
    from foresay.app.bench.gpu_kit_sections import first_difference

    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2, 3], [1, 2]) == 2

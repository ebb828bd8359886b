"""`foresay bench gpu` on a CPU with small shapes: every figure the issue names, and exactness."""
import json

from foresay.app.bench import gpu as bench_gpu

KEYS = {"device", "bandwidth_tbps", "llm", "asr", "tts", "predgen"}
LLM_KEYS = {"model", "weight_gb", "floor_ms", "decode_step_ms", "verify_ms", "ratio_to_floor", "warmup_s", "exact"}


def test_bench_gpu_small_on_cpu_writes_every_figure(tmp_path, fixture_dir, capsys):
    out = tmp_path / "gpu.json"
    assert bench_gpu.main(["--device", "cpu", "--small", "--cache", "static", "--repeats", "2",
                           "--prompts", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report) == KEYS
    assert set(report["llm"]) == LLM_KEYS
    assert set(report["asr"]) == {"target", "draft", "target_pass_ms", "draft_pass_ms", "encoder_ms"}
    assert set(report["tts"]) == {"engine", "step_ms", "ttfc_ms", "rtf"}
    assert set(report["predgen"]) == {"reply_identical", "speedup"}
    llm = report["llm"]
    assert llm["model"] == "tiny-random" and llm["exact"] is True
    assert report["bandwidth_tbps"] > 0 and llm["floor_ms"] > 0 and llm["decode_step_ms"] > 0
    assert abs(llm["ratio_to_floor"] - llm["decode_step_ms"] / llm["floor_ms"]) < 0.05 * llm["ratio_to_floor"] + 0.01
    assert report["predgen"]["reply_identical"] == 1.0
    assert all(report["asr"][k] > 0 for k in ("target_pass_ms", "draft_pass_ms", "encoder_ms"))
    assert json.loads(capsys.readouterr().out) == report


def test_bench_gpu_rejects_a_missing_gpu(capsys):
    import torch
    if torch.cuda.is_available():
        return
    assert bench_gpu.main(["--device", "cuda", "--small"]) == 2
    assert "CUDA" in capsys.readouterr().err

"""`foresay bench gpu` on a CPU with small shapes: every figure the issue names, and exactness."""
import json

from foresay.app.bench import gpu as bench_gpu

KEYS = {"device", "bandwidth_tbps", "llm", "asr", "tts", "predgen"}
LLM_KEYS = {"key_spans", "model", "weight_gb", "floor_ms", "decode_step_ms", "verify_ms", "ratio_to_floor", "warmup_s", "exact",
            "context", "by_context", "fused"}


def test_bench_gpu_small_on_cpu_writes_every_figure(tmp_path, fixture_dir, capsys):
    out = tmp_path / "gpu.json"
    assert bench_gpu.main(["--device", "cpu", "--small", "--cache", "static", "--repeats", "2",
                           "--prompts", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report) == KEYS
    assert set(report["llm"]) == LLM_KEYS
    assert set(report["asr"]) == {"target", "draft", "target_pass_ms", "draft_pass_ms", "encoder_ms", "by_window_s"}
    assert set(report["tts"]) == {"engine", "step_ms", "ttfc_ms", "rtf"}
    assert set(report["predgen"]) == {"reply_identical", "speedup"}
    llm = report["llm"]
    assert llm["model"] == "tiny-random" and llm["exact"] is True
    assert llm["fused"] is False  # "auto" fuses on CUDA only
    assert report["bandwidth_tbps"] > 0 and llm["floor_ms"] > 0 and llm["decode_step_ms"] > 0
    assert abs(llm["ratio_to_floor"] - llm["decode_step_ms"] / llm["floor_ms"]) < 0.05 * llm["ratio_to_floor"] + 0.01
    assert report["predgen"]["reply_identical"] == 1.0
    assert set(llm["by_context"]) == {"32", "64"} and llm["context"] == 32  # --small's two contexts
    assert {k: llm[k] for k in ("decode_step_ms", "verify_ms")} == \
        {k: llm["by_context"]["32"][k] for k in ("decode_step_ms", "verify_ms")}
    assert all(c["decode_step_ms"] > 0 and c["verify_ms"] > 0 for c in llm["by_context"].values())
    windows = report["asr"]["by_window_s"]
    assert set(windows) == {"10", "30"} and windows["30"]["encoder_ms"] == report["asr"]["encoder_ms"]
    assert all(w["encoder_ms"] > 0 and w["target_pass_ms"] > 0 for w in windows.values())
    assert all(report["asr"][k] > 0 for k in ("target_pass_ms", "draft_pass_ms", "encoder_ms"))
    assert json.loads(capsys.readouterr().out) == report


def test_bench_gpu_rejects_a_missing_gpu(capsys):
    import torch
    if torch.cuda.is_available():
        return
    assert bench_gpu.main(["--device", "cuda", "--small"]) == 2
    assert "CUDA" in capsys.readouterr().err


def test_bench_gpu_rejects_bad_lists_in_one_line(capsys):
    import pytest

    for argv in (["--context", "512,x"], ["--windows", "0"]):
        with pytest.raises(SystemExit):
            bench_gpu.main(["--device", "cpu", "--small", *argv])
        assert "expected positive whole numbers" in capsys.readouterr().err
    assert bench_gpu.main(["--device", "cpu", "--small", "--windows", "10,60"]) == 2
    assert "at most 30 s" in capsys.readouterr().err


def test_a_pass_profile_accounts_for_its_time_by_group():
    from foresay.app.bench.pass_profile import group_of, profile_pass
    from foresay.engine.llm.backend import load_llm
    from foresay.engine.llm.config import LLMConfig

    assert group_of("fmha_cutlassF_bf16_aligned_64x128_rf_sm80") == "attention"
    assert group_of("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64") == "matmul"
    assert group_of("void at::native::index_copy_kernel_impl") == "other"
    lm = load_llm(LLMConfig(model="tiny-random", device="cpu", cache="static", exact=True))
    lm.warmup()
    spare = lm.static_engine()._spare
    figures = profile_pass(lm, context=24, repeats=2, top=5)
    assert figures["rows"] == 16 and figures["kernel_ms_per_pass"] > 0
    assert abs(sum(figures["by_group_ms"].values()) - figures["kernel_ms_per_pass"]) < 0.01
    assert figures["by_group_ms"].get("attention", 0) > 0 and figures["by_group_ms"].get("matmul", 0) > 0
    assert len(figures["top"]) == 5 and figures["top"][0]["ms_per_pass"] >= figures["top"][-1]["ms_per_pass"]
    assert lm.static_engine()._spare is spare  # the warmed-up cache stays for the next conversation

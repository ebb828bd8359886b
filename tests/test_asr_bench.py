"""`foresay bench asr`: the JSON it promises, its inputs, and the streaming-delay simulation."""
import json
import wave

import numpy as np
import pytest

from asr_slow import SlowScripted
from foresay.app.bench.asr_latency import simulate
from foresay.app.bench.asr_pass_timing import time_passes
from foresay.app.bench.asr import load_clips
from foresay.app.cli import main
from foresay.engine.asr.scripted import ScriptedBackend, SyntheticUtterance
from foresay.engine.asr.streaming import StreamingConfig

METHOD_KEYS = {"target_passes_per_s", "draft_passes_per_s", "accepted_per_round", "wall_s",
               "speedup_vs_greedy", "speedup_vs_chain", "identical"}


def write_wav(path, samples, rate, channels=1):
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes((np.repeat(samples, channels) * 20000).astype(np.int16).tobytes())


def test_bench_reports_every_method_identical(asr_fixture_root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FORESAY_FIXTURE_DIR", str(asr_fixture_root))
    write_wav(tmp_path / "clip.wav", np.random.default_rng(0).uniform(-0.3, 0.3, 8000 * 3), 8000, channels=2)
    out = tmp_path / "asr.json"
    code = main(["bench", "asr", "--audio", str(tmp_path), "--max-new-tokens", "16", "--stream-tail-tokens", "4",
                 "--threads", "1", "--repeats", "1", "--json", str(out)])
    assert code == 0
    report = json.loads(out.read_text())
    assert set(report["methods"]) == {"target_greedy", "chain_speculative", "specasr_adaptive", "specasr_tree"}
    for row in report["methods"].values():
        assert set(row) == METHOD_KEYS and row["identical"] is True
    greedy, tree = report["methods"]["target_greedy"], report["methods"]["specasr_tree"]
    assert greedy["target_passes_per_s"] == pytest.approx(16 / 3, abs=0.01)  # one pass per token
    assert tree["target_passes_per_s"] < greedy["target_passes_per_s"]
    assert set(report["streaming"]) == {"word_delay_ms_mean", "word_delay_ms_p90", "final_delay_ms", "clips"}
    assert set(report["streaming"]["clips"]) == {"clips", "final_delay_ms_median", "final_delay_ms_p90",
                                                 "final_delay_ms_mean"}  # the given audio streamed, clip by clip
    assert "no GPU" in report["pass_timing"]
    assert "specasr_tree" in capsys.readouterr().out


def test_bad_audio_is_reported(tmp_path, capsys):
    (tmp_path / "bad.wav").write_text("not a wav")
    assert main(["bench", "asr", "--audio", str(tmp_path / "bad.wav")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["bench", "asr", "--audio", str(tmp_path / "none")]) == 2


def test_long_files_are_cut_into_windows(tmp_path):
    write_wav(tmp_path / "long.wav", np.zeros(16000 * 70, dtype=np.float32), 16000)
    clips = load_clips(tmp_path / "long.wav")
    assert [len(c) / 16000 for c in clips] == [30.0, 30.0, 10.0]


def test_a_clip_longer_than_a_short_window_model_is_cut_to_its_window(tmp_path, capsys):
    t = np.arange(16000 * 7) / 16000   # the demo Whispers read 6 s windows
    write_wav(tmp_path / "seven.wav", 0.3 * np.sin(2 * np.pi * 220 * t), 16000)
    assert main(["bench", "asr", "--target", "demo", "--draft", "demo-draft", "--audio", str(tmp_path / "seven.wav"),
                 "--repeats", "1", "--pass-timing", "skip", "--max-new-tokens", "8"]) == 0
    out, err = capsys.readouterr()
    assert "window" not in err and "streaming the 2 clips" in out


def test_delays_follow_the_cadence_and_the_compute_time():
    utterance = SyntheticUtterance(tuple("one two three four five six".split()))
    instant = simulate(ScriptedBackend(utterance), utterance, StreamingConfig(hop_ms=100))
    # a word shows at the first tick after it ends, plus the (tiny) decode time; margins for busy CI
    assert all(0 <= d <= 100 + 50 for d in instant.word_delay_ms) and instant.skipped == 0
    assert instant.final_delay_ms < 50
    slow = simulate(SlowScripted(utterance, 0.25), utterance, StreamingConfig(hop_ms=100))
    assert slow.skipped > 0 and min(slow.word_delay_ms) >= 240 and slow.final_delay_ms >= 250
    assert slow.summary()["word_delay_ms_p90"] >= slow.summary()["word_delay_ms_mean"]


def test_pass_timing_runs_on_cpu_with_toy_shapes():
    result = time_passes("cpu", {"toy": dict(d_model=32, layers=1, heads=2, ffn=32)}, dtype="float32",
                         repeats=1, context=4, verify=3)
    assert set(result["toy"]) == {"encoder_ms", "decoder_pass_1_ms", "decoder_pass_3_ms"}

import json

import pytest

from foresay.app.bench.predgen import load_prompts
from foresay.app.cli import main
from foresay.engine.errors import ForesayError


def test_bench_predgen_runs_and_writes_json(fixture_dir, tmp_path, capsys):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"turns": ["What is the weather in Paris today?", "And tomorrow?"]}\n'
                       '{"prompt": "Set a timer for ten minutes please"}\n')
    out = tmp_path / "r.json"
    code = main(["bench", "predgen", "--model", "tiny-random", "--prompts", str(prompts),
                 "--methods", "greedy,topk:2", "--max-new-tokens", "12", "--speed", "3000",
                 "--multi-turn", "--turn-cost", "3", "--json", str(out)])
    assert code == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1].startswith("summary: 3 prompts")
    report = json.loads(out.read_text())
    assert report["model"] == "tiny-random" and report["device"] == "cpu" and report["prompts"] == 3
    assert set(report["methods"]) == {"baseline", "greedy", "topk:2"}
    for m in report["methods"].values():
        assert set(m) >= {"ttfs_ms", "nfetfs", "latency_ms", "speedup", "first_sentence_identical",
                          "reply_identical", "outcomes", "overhead_share", "turns", "replies_differing", "lossless"}
        assert 0 <= m["overhead_share"] <= 1 and sum(m["outcomes"].values()) == 3
    for name, m in report["methods"].items():  # per turn, by conversation: two models compare turn by turn
        turns = [t for conv in report["per_turn"][name] for t in conv]
        assert [len(conv) for conv in report["per_turn"][name]] == [2, 1]
        assert {o: sum(t[0] == o for t in turns) for o in m["outcomes"]} == m["outcomes"]
        assert sum(t[1] for t in turns) / 3 == pytest.approx(m["nfetfs"])
    assert report["methods"]["greedy"]["reply_identical"] == 1.0
    assert report["methods"]["greedy"]["lossless"] and not report["methods"]["topk:2"]["lossless"]
    assert report["prompt_source"] == str(prompts)
    assert report["methods"]["baseline"]["speedup"] == 1.0
    assert report["pass_timing"]["decode_step_ms"] > 0
    cost = report["turn_cost"]
    assert cost["turns"] == 3 and cost["turn_1_ms"] > 0 and cost["turn_3_ms"] > 0
    assert cost["context_tokens"] > 2 * len("What is the weather in Paris today?".split())


def test_bad_prompt_files(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"turns": []}\n')
    with pytest.raises(ForesayError, match="bad.jsonl:1"):
        load_prompts(str(bad), None, False)
    bad.write_text("not json\n")
    with pytest.raises(ForesayError, match="not valid JSON"):
        load_prompts(str(bad), None, False)
    with pytest.raises(ForesayError, match="cannot read"):
        load_prompts(str(tmp_path / "none.jsonl"), None, False)
    assert len(load_prompts(None, 3, False)) == 3


def test_cli_reports_errors_without_traceback(capsys, tmp_path):
    assert main(["bench", "predgen", "--prompts", str(tmp_path / "none.jsonl")]) == 2
    assert "foresay: error: cannot read prompts file" in capsys.readouterr().err


def test_demo_models_get_demo_domain_prompts_by_default(tmp_path):
    from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
    held_out = DialogueGenerator(DomainConfig(), "test").dialogues(5)
    for model in ("demo", "demo-cllm", "demo-streams"):
        assert load_prompts(None, 5, False, model) == [[d.turns[0].user] for d in held_out]
    assert load_prompts(None, 5, True, "demo") == [[t.user for t in d.turns] for d in held_out]
    shipped = load_prompts(None, 5, False)
    assert load_prompts(None, 5, False, "small-random") == shipped != load_prompts(None, 5, False, "demo")
    own = tmp_path / "own.jsonl"
    own.write_text('{"prompt": "Spell cat."}\n')
    assert load_prompts(str(own), None, False, "demo") == [["Spell cat."]]


def _method(speedup, replies_differing, lossless, outcomes):
    return {"ttfs_ms": 100.0, "nfetfs": 4.0, "latency_ms": 600 / speedup, "speedup": speedup,
            "first_sentence_identical": 1 - replies_differing / 8, "reply_identical": 1 - replies_differing / 8,
            "turns": 8, "replies_differing": replies_differing, "lossless": lossless, "outcomes": outcomes,
            "overhead_share": 0.05}


def test_a_lossy_method_is_never_called_faster_without_how_often_its_reply_differs(capsys):
    from foresay.app.bench.predgen_table import print_table
    report = {"model": "demo", "device": "cpu", "prompts": 8, "tts_latency_ms": 150, "methods": {
        "baseline": _method(1.0, 0, True, {"baseline": 8}),
        "topk:3": _method(3.97, 4, False, {"accepted": 6, "rejected": 2}),
        "greedy": _method(1.08, 0, True, {"accepted": 1, "partial": 3, "rejected": 4}),
        "greedy+specbound@best": _method(9.0, 0, True, {"accepted": 8})}}  # a ceiling, never crowned
    print_table(report)
    lines = capsys.readouterr().out.splitlines()
    assert "sentence, ms" in "\n".join(lines[:3]) and "audio, ms" in "\n".join(lines[:3])
    topk = next(line for line in lines if line.startswith("topk:3 "))
    assert "3.97x" in topk and "reply differs from baseline's in 4 of 8 turns" in topk
    assert "lossless" in next(line for line in lines if line.startswith("greedy "))
    summary = lines[-1]
    assert summary.startswith("summary: 8 prompts on demo")
    assert summary.index("lossless method greedy") < summary.index("lossy method topk:3")
    assert "topk:3, first audio 3.97x faster than baseline" in summary
    assert summary.endswith("its reply differs from baseline's in 4 of 8 turns")


def test_served_runs_count_requests_and_every_note_says_what_it_compares(capsys):
    from foresay.app.bench.predgen_table import print_table
    greedy = _method(0.8, 0, True, {"rejected": 8})
    greedy.update(missed_turns=8, nfetfs_missed=3.0, continuation_passes_missed=10,
                  continuation_tokens_missed=25, continuation_positions_missed=40, ttfs_missed_ms=90.0,
                  ttfs_missed_median_ms=80.0, ttfs_missed_vs_plain=0.8)
    report = {"model": "demo", "device": "cpu", "prompts": 8, "tts_latency_ms": 150,
              "methods": {"baseline": _method(1.0, 0, True, {"baseline": 8}), "greedy+jacobi": greedy},
              "round_trip": {"requests": 40, "median_ms": 3.0, "verification_median_ms": 4.0,
                             "verification_p90_ms": 6.0}}
    print_table(report)
    out = capsys.readouterr().out
    assert "requests to" in out and "passes to" not in out
    assert "server requests" in out and "90th percentile 6.0 ms" in out
    assert "2.50 tokens fixed per pass" in out and "1.25x slower than greedy with plain steps" in out
    assert "first audio 1.25x slower than baseline" in out.splitlines()[-1]

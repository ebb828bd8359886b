"""Reference end-of-turn rules replayed offline (`foresay bench turn-rules`): fixed silence and
pipecat's Smart Turn behind a VAD, scored by the code that scores `bench turns`."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from foresay.app.bench.turn_records import Recording, TruthTurn
from foresay.app.bench.turn_rules import FixedSilenceRule, SmartTurnRule, replay
from foresay.app.bench.turn_sweep import parse_sweep, sweep
from foresay.app.cli import main
from foresay.engine.errors import ForesayError
from foresay.engine.events import SpeechStarted, TurnEnded

FRAME = 512            # Silero's 32 ms
FRAME_S = FRAME / 16000


def labelled(spans: list[tuple[float, float]], total_s: float) -> list[tuple[np.ndarray, bool, float]]:
    """Frames voiced inside `spans` (seconds), each frame's samples its own index (to trace audio)."""
    out = []
    for i in range(int(total_s / FRAME_S)):
        t = i * FRAME_S
        voiced = any(a <= t + FRAME_S / 2 < b for a, b in spans)
        out.append((np.full(FRAME, i, np.float32), voiced, t))
    return out


def test_fixed_silence_ends_the_turn_that_long_after_the_last_voiced_frame():
    frames = labelled([(0.5, 1.5), (1.9, 2.5)], 4.0)   # a 0.4 s pause inside the request
    short = replay(FixedSilenceRule(0.3), frames)
    assert len(short.started) == 2 and len(short.ends) == 2     # cut in the pause, the rest a new turn
    long = replay(FixedSilenceRule(0.5), frames)
    assert len(long.ends) == 1
    (turn, t, last_voiced), = long.ends
    assert last_voiced == pytest.approx(2.5, abs=FRAME_S) and 0.5 <= t - last_voiced < 0.5 + FRAME_S
    assert long.started[turn] == pytest.approx(0.5, abs=FRAME_S)
    # a voiced blip shorter than start_s starts nothing
    assert replay(FixedSilenceRule(0.5), labelled([(0.5, 0.6)], 2.0)).ends == []


class Scripted:
    """Smart Turn's stand-in: answers in order, records what it heard."""

    def __init__(self, answers):
        self.answers, self.heard = list(answers), []

    def __call__(self, audio):
        self.heard.append(audio)
        return self.answers.pop(0)


def test_smart_turn_ends_at_the_vad_stop_when_the_model_finds_the_turn_finished():
    frames = labelled([(1.0, 2.0)], 6.0)
    model = Scripted([0.9])
    obs = replay(SmartTurnRule(model, threshold=0.5, stop_s=0.2, latency_s=0.05), frames)
    (_, t, last_voiced), = obs.ends
    assert t - last_voiced == pytest.approx(6 * FRAME_S + 0.05)   # the stop: 0.2 s in whole frames, as pipecat
    heard = model.heard[0]   # the turn from pre_speech_s (0.5 s) before its first voiced frame to the stop
    first, last = int(heard[0]), int(heard[-1])
    assert first * FRAME_S == pytest.approx(0.5, abs=FRAME_S) and (last + 1) * FRAME_S == pytest.approx(t - 0.05)


def test_smart_turn_waits_for_voice_then_falls_back_to_a_long_silence():
    frames = labelled([(1.0, 2.0), (2.6, 3.0)], 8.0)
    model = Scripted([0.2, 0.3])   # unfinished at both stops: the pause and the real end
    rule = SmartTurnRule(model, threshold=0.5, stop_s=0.2, fallback_s=3.0)
    obs = replay(rule, frames)
    (_, t, last_voiced), = obs.ends         # one turn: the voice after the pause came back in time
    assert last_voiced == pytest.approx(3.0, abs=FRAME_S) and 6 * FRAME_S + 3.0 <= t - last_voiced < 7 * FRAME_S + 3.0
    assert len(model.heard) == 2 and len(model.heard[1]) > len(model.heard[0])   # the whole turn again
    assert rule.probabilities == [0.2, 0.3]
    assert rule.counts == {"model_calls": 2, "ended_by_model": 0, "ended_by_fallback": 1}
    # the same answers above a lower threshold end the turn in the pause: a cut-off
    cut = replay(SmartTurnRule(Scripted([0.2, 0.3]), threshold=0.1), frames)
    assert len(cut.ends) == 2
    # voice after the stop cancels its fallback: speech longer than the fallback is not cut
    long_resume = replay(SmartTurnRule(Scripted([0.2, 0.9]), fallback_s=2.0), labelled([(1.0, 2.0), (2.6, 6.0)], 9.0))
    (_, t, last_voiced), = long_resume.ends
    assert last_voiced == pytest.approx(6.0, abs=FRAME_S) and t > last_voiced


def test_the_sweep_scores_each_value_with_the_bench_turns_scoring():
    frames = labelled([(0.5, 1.5), (1.9, 2.5)], 6.0)
    rec = Recording(Path("x.wav"), turns=(TruthTurn(0.5, 2.5, "set a timer for ten minutes"),))
    points = sweep(lambda s: FixedSilenceRule(s), [0.3, 0.5], [("pause", [rec], [frames])])
    short, long = (p["all"] for p in points)
    assert (short["premature_cutoffs"], short["premature_recovered"], short["turns_found"]) == (1, 0, 2)
    assert short["requests_cut"] == 1 and long["requests_cut"] == 0
    assert long["premature_cutoffs"] == 0 and long["merged_requests"] == 0
    assert 500 <= long["endpoint_delay_ms"]["median"] < 500 + 1000 * FRAME_S
    assert points[0]["per_set"]["pause"] == short
    # two requests 0.4 s apart under a 0.5 s silence: one found turn covers both
    two = Recording(Path("x.wav"), turns=(TruthTurn(0.5, 1.5, "hello"), TruthTurn(1.9, 2.5, "thanks")))
    merged = sweep(lambda s: FixedSilenceRule(s), [0.5], [("two", [two], [frames])])[0]["all"]
    assert merged["merged_requests"] == 1 and merged["turns_found"] == 1


def test_sweep_values_parse_and_bad_ones_are_refused():
    assert parse_sweep("0.3:0.6:0.1") == [0.3, 0.4, 0.5, 0.6]
    assert parse_sweep("0.5,0.7") == [0.5, 0.7]
    for bad in ("a,b", "0.5:0.3:0.1", "0.3:0.5:0"):
        with pytest.raises(ForesayError, match="--sweep"):
            parse_sweep(bad)
    with pytest.raises(ValueError):
        SmartTurnRule(lambda a: 0.5, threshold=1.0)


@pytest.fixture(scope="module")
def pause_set(tmp_path_factory):
    from foresay.engine.demo.turn_sets import build_set
    return build_set(tmp_path_factory.mktemp("turns") / "p", 2, pause=(0.6, 0.6))


def test_bench_turn_rules_sweeps_fixed_silence_on_real_recordings(pause_set, tmp_path):
    out = tmp_path / "fixed.json"
    assert main(["bench", "turn-rules", str(pause_set), "--rule", "fixed", "--sweep", "0.3,1.0",
                 "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["rule"] == "fixed" and report["parameter"] == "silence_s"
    short, long = (p["all"] for p in report["points"])
    assert short["premature_cutoffs"] == 2 and long["premature_cutoffs"] == 0   # a 0.6 s pause in each
    assert long["turns_found"] == long["turns_expected"] == 2
    assert 900 <= long["endpoint_delay_ms"]["median"] <= 1300


def test_bench_turn_rules_runs_smart_turn_behind_silero(pause_set, tmp_path, registry_model):
    registry_model("smart-turn-v3.2")
    out = tmp_path / "smart.json"
    assert main(["bench", "turn-rules", str(pause_set), "--rule", "smart-turn", "--sweep", "0.5",
                 "--calls", "3", "--latency-ms", "40", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["smart_turn"]["calls"] == 3 and report["smart_turn"]["call_ms"]["median"] > 0
    assert report["latency_ms"] == 40 and report["fallback_s"] == 3.0
    point = report["points"][0]["all"]
    assert point["turns_expected"] == 2 and point["turns_found"] >= 2
    assert report["smart_turn"]["distinct_turn_audio_scored"] >= 2   # at the pause and at the end, at least
    assert point["ended_by_model"] + point["ended_by_fallback"] == point["turns_found"]
    assert point["model_calls"] >= report["smart_turn"]["distinct_turn_audio_scored"]

"""`foresay bench turns`: truth sets from espeak-ng, and the scoring of what the live path did."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from foresay.app.bench.turns import Observed, Recording, TruthTurn, read_set, score
from foresay.app.cli import main
from foresay.engine.demo.speech import write_wav
from foresay.engine.demo.turn_sets import build_set, pause_point
from foresay.engine.errors import ForesayError


def test_scoring_counts_cutoffs_resumed_turns_and_delays_from_the_truth(tmp_path):
    truth = (TruthTurn(0.5, 2.0, "set a timer for ten minutes"), TruthTurn(4.0, 5.0, "thank you"))
    rec = Recording(tmp_path / "x.wav", truth)
    obs = Observed(started={1: 0.52, 2: 4.01},
                   # turn 1 is declared ended in its pause at 1.4 s, resumed, then ends 0.2 s late
                   ends=[(1, 1.4, 1.2), (1, 2.2, 1.98), (2, 5.3, 4.97)],
                   resumed=[(1, 1.5)],
                   finals=[(1, "set a timer"), (1, "set a timer for 10 minutes"), (2, "thank")],
                   metrics={1: {"asr_final_ms": 20.0, "voice_to_voice_ms": 300.0},
                            2: {"asr_final_ms": 40.0, "voice_to_voice_ms": 400.0}})
    report = score([rec], [obs])
    assert report["turns_expected"] == 2 and report["turns_found"] == 2
    assert report["premature_cutoffs"] == 1 and report["premature_recovered"] == 1 and report["resumed"] == 1
    assert report["requests_cut"] == 1 and report["merged_requests"] == 0
    assert report["endpoint_delay_ms"]["median"] == pytest.approx(250.0)   # 200 and 300 ms
    # voice-to-voice from the truth end: 300 - 20 and 400 - 30
    assert report["voice_to_voice_ms"]["median"] == pytest.approx(325.0)
    assert report["asr_final_ms"]["median"] == pytest.approx(30.0)
    # "10" reads as "ten" (scored as the digits 1 0): one word missed of nine
    assert report["wer"] == pytest.approx(1 / 9, abs=1e-4)
    # the rest of a cut-off request as a turn of its own: a cut-off, not recovered
    obs = Observed(started={1: 0.52, 2: 1.6}, ends=[(1, 1.4, 1.2), (2, 2.3, 1.98)], finals=[(1, "set a timer for"),
                   (2, "ten minutes")])
    report = score([Recording(rec.audio, truth[:1])], [obs])
    assert (report["premature_cutoffs"], report["premature_recovered"], report["resumed"]) == (1, 0, 0)
    assert report["endpoint_delay_ms"]["median"] == pytest.approx(300.0) and report["wer"] == 0


def test_a_kept_reply_counts_from_the_end_it_answered(tmp_path):
    """A breath 0.3 s after the request reopened the turn; the reply played on (`ReplyKept`): the
    endpoint is the first end, not the one after the breath."""
    truth = (TruthTurn(0.5, 2.0, "what is the capital of France"),)
    obs = Observed(started={1: 0.52}, ends=[(1, 2.25, 2.0), (1, 3.1, 2.5)], resumed=[(1, 2.3)],
                   finals=[(1, "what is the capital of France"), (1, "what is the capital of France")],
                   metrics={1: {"asr_final_ms": 10.0, "voice_to_voice_ms": 300.0}}, kept={1: 2.25})
    report = score([Recording(tmp_path / "x.wav", truth)], [obs])
    assert report["endpoint_delay_ms"]["median"] == pytest.approx(250.0)
    assert report["voice_to_voice_ms"]["median"] == pytest.approx(300.0)
    assert report["premature_cutoffs"] == 0 and report["wer"] == 0
    obs.kept.clear()  # the reply stopped at the breath: the turn counts from its last end
    assert score([Recording(tmp_path / "x.wav", truth)], [obs])["endpoint_delay_ms"]["median"] == pytest.approx(1100.0)


def test_truth_sets_are_checked(tmp_path):
    bad = tmp_path / "set.jsonl"
    bad.write_text('{"audio": "missing.wav", "turns": []}\n')
    with pytest.raises(ForesayError, match="does not exist"):
        read_set(bad)
    (tmp_path / "a.wav").write_bytes(b"")
    bad.write_text('{"audio": "a.wav", "turns": [{"start_s": 2, "end_s": 1}]}\n')
    with pytest.raises(ForesayError, match="ends before it starts"):
        read_set(bad)
    bad.write_text('{"audio": "a.wav"}\n')
    with pytest.raises(ForesayError, match="expected"):
        read_set(bad)


def test_pauses_go_where_the_words_so_far_are_not_a_whole_request():
    import random
    rng = random.Random(0)
    for _ in range(20):
        k = pause_point("Set a timer for 5 minutes for the pasta.", rng)
        assert k is not None and "Set a timer for 5 minutes".split() != "Set a timer for 5 minutes for the pasta.".split()[:k]


@pytest.fixture(scope="module")
def two_recordings(tmp_path_factory):
    """A complete request, and one with a 0.7 s pause inside it, as one set."""
    tmp = tmp_path_factory.mktemp("turns")
    build_set(tmp / "c", 1)
    build_set(tmp / "p", 1, pause=(0.7, 0.7))
    lines = [json.loads((tmp / d / "set.jsonl").read_text()) for d in ("c", "p")]
    lines[0]["audio"], lines[1]["audio"] = "c/" + lines[0]["audio"], "p/" + lines[1]["audio"]
    both = tmp / "both.jsonl"
    both.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return both


def test_bench_turns_replays_a_set_through_the_live_path(two_recordings, tmp_path):
    """With a fixed 0.35 s hangover the pause is cut off, the user goes on within the recovery
    window, and the same turn resumes."""
    truth = read_set(two_recordings)[0].turns[0]
    assert 0.5 <= truth.end_s - truth.start_s <= 5
    out = tmp_path / "report.json"
    assert main(["bench", "turns", str(two_recordings), "--profile", "demo-own-ear", "--fast", "--json", str(out),
                 "--set", "tts.engine=espeak",
                 "--set", "app.adaptive_endpointing=false", "--set", "audio.fixed_hangover_s=0.35"]) == 0
    report = json.loads(out.read_text())
    assert set(report) >= {"turns_expected", "turns_found", "premature_cutoffs", "resumed", "endpoint_delay_ms",
                           "asr_final_ms", "voice_to_voice_ms", "wer"}
    assert report["turns_expected"] == 2 and report["turns_found"] == 2
    assert report["premature_cutoffs"] == 1 and report["premature_recovered"] == 1 and report["resumed"] == 1
    # the end comes one hangover after the last voiced frame, which the VAD finds at most ~0.2 s
    # before the truth end (its quiet tail); unpaced, the wall-clock figures are not reported
    assert 150 <= report["endpoint_delay_ms"]["median"] <= 400
    assert report["asr_final_ms"]["median"] is None and report["voice_to_voice_ms"]["median"] is None


def test_the_decision_alone_recovers_every_cutoff_and_loses_no_word(two_recordings, tmp_path):
    """The endpointer and the decision fed as the pipeline is to feed them: the transcript at the
    pause through its last word, its P(end of turn) from PredGen's verification. Whatever the
    model estimates, a cut-off request resumes as the same turn, and its last end comes after
    all of its speech. (Which words the demo Whisper hears in audio with a long pause inside is
    its own matter: it was trained on unbroken requests.)"""
    out = tmp_path / "decision.json"
    assert main(["bench", "turns", str(two_recordings), "--profile", "demo-own-ear", "--decision-only",
                 "--estimate-ms", "60", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["turns_found"] == 2 and report["premature_cutoffs"] == report["premature_recovered"]
    for rec in report["recordings"]:
        assert len({turn for turn, _, _ in rec["ends"]}) == 1    # one turn, however often resumed
        assert rec["ends"][-1][1] > rec["truth_end_s"][0]         # its end after all of its speech
        [delay] = rec["endpoint_delay_ms"]                        # one per truth turn: its last end's delay
        assert abs(delay - 1000 * (rec["ends"][-1][1] - rec["truth_end_s"][0])) < 1.0
    delays = [d for rec in report["recordings"] for d in rec["endpoint_delay_ms"]]
    assert abs(report["endpoint_delay_ms"]["median"] - float(np.median(delays))) < 1.0
    truth = read_set(two_recordings)[0].turns[0].text
    assert report["recordings"][0]["heard"] == [truth]            # the complete request, word for word
    assert report["speculative_ms"]["median"] is not None and report["asr_final_ms"]["median"] is not None


def test_merged_requests_and_unanswered_turns_are_counted():
    truth = (TruthTurn(0.5, 2.0, "set a timer"), TruthTurn(4.5, 5.5, "thank you"))
    rec = Recording(Path("x.wav"), truth)
    # one found turn runs over both requests (its end was never declared between them)
    merged = Observed(started={1: 0.5}, ends=[(1, 5.8, 5.5)], finals=[(1, "set a timer thank you")])
    # two turns, the first closed unanswered because the second began first
    separate = Observed(started={1: 0.5, 2: 4.5}, ends=[(1, 2.3, 2.0), (2, 5.8, 5.5)],
                        finals=[(1, "set a timer"), (2, "thank you")], outcomes={1: "unanswered", 2: "accepted"})
    assert (score([rec], [merged])["merged_requests"], score([rec], [merged])["unanswered"]) == (1, 0)
    assert (score([rec], [separate])["merged_requests"], score([rec], [separate])["unanswered"]) == (0, 1)
    assert score([rec], [separate])["wer"] == 0
    # per recording, one figure per truth turn: the merged found turn belongs to the first request
    [merged_rec] = score([rec], [merged])["recordings"]
    assert merged_rec["endpoint_delay_ms"] == [3800.0, None] and merged_rec["voice_to_voice_ms"] == [None, None]
    separate.metrics[2] = {"voice_to_voice_ms": 400.0}
    [separate_rec] = score([rec], [separate])["recordings"]
    assert separate_rec["endpoint_delay_ms"] == [300.0, 300.0] and separate_rec["voice_to_voice_ms"] == [None, 400.0]


def test_a_turn_that_heard_nothing_is_counted_and_adds_no_words():
    rec = Recording(Path("x.wav"), (TruthTurn(0.5, 2.0, "set a timer"),))
    # a breath 1 s after the request opened a turn of its own, closed without a reply
    breath = Observed(started={1: 0.5, 2: 3.0}, ends=[(1, 2.3, 2.0), (2, 4.1, 3.3)],
                      finals=[(1, "set a timer"), (2, "")], outcomes={1: "accepted", 2: "empty"})
    report = score([rec], [breath])
    assert (report["turns_found"], report["heard_nothing"], report["wer"], report["merged_requests"]) == (2, 1, 0, 0)
    assert report["endpoint_delay_ms"]["median"] == 300


def test_several_sets_are_reported_each_and_together(two_recordings, tmp_path):
    out = tmp_path / "sets.json"
    sets = [str(two_recordings.parent / d / "set.jsonl") for d in ("c", "p")]
    assert main(["bench", "turns", *sets, "--profile", "demo", "--decision-only", "--estimate-ms", "60",
                 "--whole-wer", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert list(report["sets"]) == sets and report["turns_expected"] == 2
    for one in report["sets"].values():
        assert one["turns_expected"] == 1 and one["wer_whole_request"] is not None and "recordings" not in one
    assert report["wer_whole_request"] is not None and len(report["recordings"]) == 2
    by_tail = report["wer_whole_request_by_tail"]
    assert list(by_tail) == ["0.05", "0.1", "0.2", "0.3"] and by_tail["0.3"] == report["wer_whole_request"]


def test_the_whole_request_reference_decodes_each_request_alone_with_each_tail(tmp_path, monkeypatch):
    """Each truth request is cut from 0.3 s before its start to each tail after its end, and
    the errors of each tail's decodes are counted over the set."""
    from foresay.app.bench import turns
    from foresay.app.config import load_settings
    from foresay.engine.asr.backends import Hypothesis

    rate = 16_000
    audio = np.zeros(4 * rate, np.float32)
    path = tmp_path / "a.wav"
    write_wav(path, audio)
    rec = turns.Recording(path, (turns.TruthTurn(1.0, 2.0, "one two three four"),))
    cuts = []

    class Backend:
        class text:
            decode = staticmethod(lambda tokens: " ".join(["one", "two", "three", "four"][:len(tokens)]))

        def transcribe(self, samples):
            cuts.append(len(samples) / rate)
            return Hypothesis(tuple(range(4 if len(samples) / rate > 1.45 else 2)))  # short tails lose two words

    monkeypatch.setattr("foresay.engine.asr.build_backend", lambda config: Backend())
    by_tail = turns.whole_request_wer(load_settings(None, "demo", []), [rec], tails_s=(0.1, 0.2, 0.3))
    assert [round(c, 3) for c in cuts] == [1.4, 1.5, 1.6]
    assert by_tail == {0.1: 0.5, 0.2: 0.0, 0.3: 0.0}


def test_the_decision_alone_decodes_a_pause_as_far_as_the_live_pause_decode_hears():
    """The live pause decode begins `pause_decode_after_ms` into the silence, at the end of the
    audio block then arriving; Whisper's P(sentence end) moves with the silence it hears, so the
    decision-only driver decodes that much audio, not all there is when the pause is confirmed."""
    from foresay.app.bench.turn_decision import PausedTurnDriver
    from foresay.app.config import load_settings
    from foresay.engine.events import VoicePaused

    def until(overrides, t0=0.0):
        driver = PausedTurnDriver.__new__(PausedTurnDriver)
        driver.settings = load_settings(None, "demo", overrides)
        return driver._pause_decode_until(VoicePaused(1, 1.13, last_voiced_t=1.005), t0)

    # 10 ms blocks from t0: the one that holds 1.055 s ends at 1.06 s, or at 1.055 s when they begin 5 ms later
    assert until(["streaming.pause_decode_after_ms=50", "audio.endpointer.pause_ms=100"]) == pytest.approx(1.06)
    assert until(["streaming.pause_decode_after_ms=50", "audio.endpointer.pause_ms=100"], t0=0.005) == pytest.approx(1.055)
    # begun at the confirmed pause (no head start): all the audio so far
    assert until(["streaming.pause_decode_after_ms=0"]) is None
    assert until(["streaming.pause_decode_after_ms=150", "audio.endpointer.pause_ms=100"]) is None

"""`foresay bench soak`: one long conversation through the whole pipeline, scored."""
import json

from foresay.app.bench.demo import DemoRequest
from foresay.app.bench.soak import score
from foresay.app.cli import main
from foresay.engine.demo.speech import VoiceSetting


def test_the_score_counts_lost_words_and_compares_the_first_and_last_turns():
    voice = VoiceSetting("en-us", 170, 50, 0.0)
    requests = [DemoRequest(f"what is {i} plus 1?", f"{i} plus 1 is {i + 1}.", voice) for i in range(12)]
    metrics = [{"user_text": r.text, "reply_text": r.reply if i < 10 else "no idea."}
               for i, r in enumerate(requests)]
    report = score(requests, metrics, [100.0, 101.0])
    assert report["words_said"] == report["words_heard"] == report["words_said_and_heard"] == 60
    assert report["answered_right_first_10"] == 1.0 and report["answered_right_last_10"] == 0.8
    joined = score(requests, [{"user_text": " ".join(r.text for r in requests[:6]), "reply_text": ""}], [1.0])
    assert joined["turns_found"] == 1 and joined["words_heard"] == 30 and "answered_right_last_10" not in joined
    # a turn resumed after an early end is recorded at both ends: its words count once
    resumed = [{"turn": 1, "user_text": requests[0].text, "reply_text": ""},
               {"turn": 1, "user_text": f"{requests[0].text} {requests[1].text}", "reply_text": ""}]
    report = score(requests[:2], resumed, [1.0])
    assert report["turns_found"] == 1 and report["ends_declared"] == 2
    assert report["words_heard"] == report["words_said_and_heard"] == 10
    garbled = [{"user_text": r.text.replace("plus", "minus"), "reply_text": r.reply} for r in requests]
    report = score(requests, garbled, [1.0])
    assert report["words_heard"] == 60 and report["words_said_and_heard"] == 48


def test_a_short_soak_runs_through_the_pipeline(tmp_path, capsys):
    out = tmp_path / "soak.json"
    assert main(["bench", "soak", "--requests", "2", "--gap", "1.5", "--profile", "demo-own-ear",
                 "--set", "tts.engine=espeak", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["requests"] == 2 and report["turns_found"] >= 1 and report["words_heard"] > 0
    assert report["memory_mb"]["after_last_turn"] > 0

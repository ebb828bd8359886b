"""Truth sets read by the Piper voice: the turn_sets format, the pause where the phrase breaks,
two requests 2.5 s apart, room noise or digital silence, the same audio for the same seed."""
import json

import numpy as np
import pytest

from foresay.app.bench.turns import read_set
from foresay.audio.files import load_audio
from foresay.engine.demo.assistant_requests import REQUESTS, break_index, spoken_text
from foresay.engine.demo.piper_sets import build_piper_set
from foresay.engine.demo.turn_sets import main
from foresay.engine.errors import ForesayError


@pytest.fixture(autouse=True)
def piper(registry_model):
    registry_model("piper-en_US-joe-medium")


@pytest.mark.parametrize("style", ["splice", "comma"])
def test_a_paused_set_holds_the_drawn_pause_at_the_phrase_break(tmp_path, style):
    path = build_piper_set(tmp_path / "paused", 2, pause=(0.45, 0.75), room="silence", seed=1, pause_style=style)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    recordings = read_set(path)  # `foresay bench turns` replays it unchanged
    for line, recording in zip(lines, recordings):
        (turn,) = recording.turns
        assert 0.45 <= line["pause_s"] <= 0.75 and line["room"] == "silence" and line["pause_style"] == style
        request = next(r for r in REQUESTS if spoken_text(r) == turn.text)
        head = spoken_text(request.partition("|")[0]).rstrip(",")
        mark = " [pause] " if style == "splice" else ", "
        assert line["spoken"].startswith(head + mark)
        assert "length" in line["voice"] and "|" not in turn.text
        audio = load_audio(recording.audio)[0]
        speech = audio[round(turn.start_s * 16_000): round(turn.end_s * 16_000)]
        zero = np.concatenate([[False], speech == 0, [False]])
        edges = np.flatnonzero(np.diff(zero.astype(np.int8)))
        longest = max(b - a for a, b in zip(edges[::2], edges[1::2]))
        assert abs(longest / 16_000 - line["pause_s"]) < 0.002  # inside the speech, at the break


def test_a_spliced_pause_lies_where_the_words_before_the_break_end():
    """Piper's alignment gives a boundary between every two words; the splice takes the one after
    the head's last word, and the speech before it is the head's share of the reading."""
    from foresay.engine.demo.piper_sets import Reading, load_voice, read_aligned

    voice, reading = load_voice(alignments=True), Reading(1.0, 0.667, 0.8)
    text = "Remind me to call the dentist tomorrow at nine."
    samples, boundaries = read_aligned(voice, text, reading)
    assert len(boundaries) == len(text.split()) - 1 and boundaries == sorted(boundaries)
    head, _ = read_aligned(voice, "Remind me to call the dentist", reading)
    assert abs(boundaries[5] - len(head)) < 0.25 * len(head)  # the same words, read as a whole
    assert boundaries[5] < len(samples) * 0.75

def test_a_break_on_a_comma_is_silent_for_the_drawn_pause_only():
    """The voice pauses at a comma of its own; the spliced pause replaces that silence rather than
    adding to it."""
    from foresay.engine.demo.piper_sets import Reading, load_voice, read_with_pause

    voice = load_voice(alignments=True)
    request = next(r for r in REQUESTS if "cliff, |" in r)
    samples, spoken = read_with_pause(voice, request, Reading(1.1, 0.6, 0.7), 0.5)
    assert spoken.startswith("The old lighthouse stood on the edge of the cliff [pause] its lamp")
    frames = samples[: len(samples) // 160 * 160].reshape(-1, 160).astype(np.float64)
    rms = np.sqrt(np.mean(frames ** 2, axis=1))
    quiet = np.concatenate([[False], rms < rms.max() * 10 ** (-45 / 20), [False]])
    edges = np.flatnonzero(np.diff(quiet.astype(np.int8)))
    longest = max(b - a for a, b in zip(edges[::2], edges[1::2])) / 100
    assert 0.5 <= longest <= 0.53  # the drawn pause, and at most the fades' frames


def test_two_requests_in_digital_silence_are_two_turns_2_5_s_apart(tmp_path):
    path = build_piper_set(tmp_path / "two", 1, room="silence", gap_s=2.5, seed=2)
    (recording,) = read_set(path)
    first, second = recording.turns
    assert second.start_s - first.end_s == pytest.approx(2.5, abs=0.002)
    audio = load_audio(recording.audio)[0]
    gap = audio[round(first.end_s * 16_000) + 160: round(second.start_s * 16_000) - 160]
    assert np.abs(gap).max() == 0 and np.abs(audio[:7000]).max() == 0


def test_one_users_conversation_holds_its_requests_in_order_each_with_its_pause(tmp_path):
    path = build_piper_set(tmp_path / "talk", 1, pause=(0.5, 0.6), room="silence", gap_s=2.5, seed=2,
                           per_recording=3)
    (recording,) = read_set(path)
    assert len(recording.turns) == 3
    for before, after in zip(recording.turns, recording.turns[1:]):
        assert after.start_s - before.end_s == pytest.approx(2.5, abs=0.002)
    line = json.loads(path.read_text())
    assert len(line["pause_s"]) == 3 and all(0.5 <= p <= 0.6 for p in line["pause_s"])
    assert line["spoken"].count("[pause]") == 3


def test_the_same_seed_renders_the_same_set_in_room_noise(tmp_path):
    for name in ("a", "b"):
        assert main(["--voice", "piper", "--out", str(tmp_path / name), "--requests", "1", "--seed", "3"]) == 0
    assert (tmp_path / "a" / "0000.wav").read_bytes() == (tmp_path / "b" / "0000.wav").read_bytes()
    (recording,) = read_set(tmp_path / "a" / "set.jsonl")
    audio = load_audio(recording.audio)[0]
    assert np.abs(audio[:4000]).max() > 0  # room noise before the speech


def test_bad_requests_are_refused(tmp_path, capsys):
    with pytest.raises(ForesayError, match="requests with a phrase break"):
        build_piper_set(tmp_path, 1000, pause=(0.5, 0.6))
    with pytest.raises(ForesayError, match="room"):
        build_piper_set(tmp_path, 1, room="hall")
    with pytest.raises(ForesayError, match="pause style"):
        build_piper_set(tmp_path, 1, pause=(0.5, 0.6), pause_style="cut")
    assert main(["--out", str(tmp_path), "--gap-s", "2.5"]) == 2
    with pytest.raises(ForesayError, match="a gap between them"):
        build_piper_set(tmp_path, 1, per_recording=3)
    assert main(["--out", str(tmp_path), "--per-recording", "3"]) == 2
    assert "--voice piper" in capsys.readouterr().err


def test_the_phrase_break_marks():
    assert break_index("Call my brother | on his mobile.") == 3
    assert break_index("Stop the music.") is None
    assert spoken_text("Dial 5 5 5 | 0 1 9 9.") == "Dial 5 5 5 0 1 9 9."
    assert sum(break_index(r) is not None for r in REQUESTS) >= 40

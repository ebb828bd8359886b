"""The read sample's builder on synthetic recordings: speech found where it is, room tone only
from quiet stretches, the pause where the speaker paused, and truth ends that match the audio."""
import io
import json
import tarfile
import wave

import numpy as np
import pytest

from foresay.engine.demo import read_sample as rs
from foresay.engine.errors import ForesayError

SR = rs.SAMPLE_RATE


def recording(words: list[tuple[float, float]], seconds: float, seed: int = 0) -> np.ndarray:
    """Room noise at about -60 dB with 300 Hz 'words' at about -20 dB over the given spans."""
    rng = np.random.default_rng(seed)
    audio = (0.001 * rng.standard_normal(int(seconds * SR))).astype(np.float32)
    t = np.arange(len(audio)) / SR
    for start, end in words:
        inside = (t >= start) & (t < end)
        audio[inside] += 0.1 * np.sin(2 * np.pi * 300 * t[inside]).astype(np.float32)
    return audio


def floor_of(db):
    return float(np.percentile(db, 10))


def test_the_speech_span_is_the_loud_frames_and_a_margin():
    audio = recording([(0.5, 1.0), (1.3, 1.8)], 3.0)
    db = rs.frames_db(audio)
    start, end = rs.speech_span(db, floor_of(db), len(audio))
    assert abs(start / SR - 0.45) <= 0.011 and abs(end / SR - 1.85) <= 0.011
    with pytest.raises(ForesayError, match="no speech"):
        silent = recording([], 1.0)
        rs.speech_span(rs.frames_db(silent), floor_of(rs.frames_db(silent)), len(silent))


def test_a_click_after_the_last_word_is_not_speech():
    audio = recording([(0.5, 1.0), (1.3, 1.8), (2.1, 2.2)], 3.0)  # the last "word": 0.1 s after 0.3 s of quiet
    db = rs.frames_db(audio)
    assert abs(rs.speech_span(db, floor_of(db), len(audio))[1] / SR - 1.85) <= 0.011
    spoken = recording([(0.5, 1.0), (1.3, 1.8), (2.1, 2.4)], 3.0)  # 0.3 s after the quiet: a word
    db = rs.frames_db(spoken)
    assert abs(rs.speech_span(db, floor_of(db), len(spoken))[1] / SR - 2.45) <= 0.011


def test_room_tone_is_quiet_continuous_and_as_long_as_asked():
    audio = recording([(0.5, 1.0), (1.3, 1.8)], 3.0)
    db = rs.frames_db(audio)
    floor = floor_of(db)
    tone = rs.room_tone(audio, db, floor, 2.5)
    assert len(tone) == int(2.5 * SR)
    assert rs.frames_db(tone).max() < floor + 3
    assert np.abs(np.diff(tone)).max() < 10 * np.abs(np.diff(audio[:SR // 4])).max()  # no clicks at the joins
    with pytest.raises(ForesayError, match="no room tone"):
        loud = recording([(0.0, 1.0)], 1.0)
        rs.room_tone(loud, rs.frames_db(loud), floor_of(rs.frames_db(loud)) - 20, 1.0)


def test_room_tone_leaves_out_a_fade_in_from_digital_silence():
    audio = recording([(0.5, 1.0), (1.3, 1.8)], 3.0)
    audio[:1600] = 0.0  # the recording opens with 0.1 s of digital silence ...
    audio[1600:2400] *= np.linspace(0.0, 1.0, 800, dtype=np.float32)  # ... and fades in
    db = rs.frames_db(audio)
    floor = floor_of(db)
    tone = rs.frames_db(rs.room_tone(audio, db, floor, 2.5))
    assert tone.min() > np.median(tone) - 12  # no dip to silence anywhere in the tone


def test_the_pause_goes_in_the_longest_quiet_run_or_between_two_aligned_words():
    audio = recording([(0.5, 1.0), (1.3, 1.6), (1.7, 2.3)], 3.0)
    db = rs.frames_db(audio)
    floor = floor_of(db)
    span = rs.speech_span(db, floor, len(audio))
    assert abs(rs.pause_point(db, floor, span) / SR - 1.15) <= 0.02
    # the aligned words put their only gap at 1.6-1.7 s: the pause goes there
    assert abs(rs.pause_point(db, floor, span, [(1.6, 1.7)]) / SR - 1.65) <= 0.02


def _archive(path, members: dict[str, bytes]):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _wav(audio: np.ndarray) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes((audio * 32767).astype("<i2").tobytes())
    return out.getvalue()


def test_a_build_writes_both_sets_with_truth_ends_that_match_the_audio(tmp_path):
    words = [(0.4, 0.9), (1.2, 1.6), (1.7, 2.2)]
    audio = recording(words, 2.8)
    alignment = {"w": [{"b": 0.4, "d": 0.5, "t": "one"}, {"b": 1.2, "d": 0.4, "t": "two"},
                       {"b": 1.7, "d": 0.5, "t": "three"}]}
    members = {source: {} for source in (rs.POCKETSPHINX, rs.PYSPTK)}
    for r in rs.RECORDINGS:
        data = (audio * 32767).astype("<i2").tobytes() if r.member.endswith(".raw") else _wav(audio)
        members[r.source][r.member] = data
        if r.name.startswith("librivox"):
            members[r.source][r.member[:-4] + ".json"] = json.dumps(alignment).encode()
    archives = {source: _archive(tmp_path / f"{source.requirement}.tar.gz", files) for source, files in members.items()}
    counts = rs.build(tmp_path / "read", archives)
    assert counts == {"complete": 16, "paused": 11, "gated": 16}
    complete = {json.loads(line)["audio"]: json.loads(line)
                for line in (tmp_path / "read/complete/set.jsonl").read_text().splitlines()}
    paused = [json.loads(line) for line in (tmp_path / "read/paused/set.jsonl").read_text().splitlines()]
    speech_s = (2.2 + 0.05) - (0.4 - 0.05)
    for line in complete.values():
        turn = line["turns"][0]
        assert 0.5 <= turn["start_s"] <= 1.0 and line["pause_s"] is None
        assert abs(turn["end_s"] - turn["start_s"] - speech_s) <= 0.03  # 10 ms frames, the high-pass's spread
        with wave.open(str(tmp_path / "read/complete" / line["audio"])) as w:
            assert abs(w.getnframes() / SR - (turn["end_s"] + 2.5)) <= 0.011
    for line in (tmp_path / "read/gated/set.jsonl").read_text().splitlines():
        line = json.loads(line)
        turn, whole = line["turns"][0], complete[line["audio"]]["turns"][0]
        assert turn["start_s"] == rs.GATE_CLOSED_S + rs.GATE_OPENS_S
        assert abs((turn["end_s"] - turn["start_s"]) - (whole["end_s"] - whole["start_s"])) <= 0.002
        with wave.open(str(tmp_path / "read/gated" / line["audio"])) as w:
            samples = np.frombuffer(w.readframes(w.getnframes()), np.int16)
        closed = round(rs.GATE_CLOSED_S * SR)
        assert not samples[:closed].any() and samples[closed:closed + 160].any()  # zeros, then the room
    for line in paused:
        turn, pause = line["turns"][0], line["pause_s"]
        assert 0.45 <= pause <= 0.75
        assert abs(turn["end_s"] - complete[line["audio"]]["turns"][0]["end_s"] - pause) <= 0.002  # each rounded to 1 ms
        with wave.open(str(tmp_path / "read/paused" / line["audio"])) as w:
            samples = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
        db = rs.frames_db(samples)
        start = int(turn["start_s"] * 100)
        quiet = db[start:int(turn["end_s"] * 100)] < db.min() + 20
        longest, run = 0, 0
        for q in quiet:
            run = run + 1 if q else 0
            longest = max(longest, run)
        assert longest >= int(pause * 100) - 1  # the pause sits inside the speech, whole


def test_a_cached_source_archive_is_used_only_with_its_pinned_sha256(monkeypatch, tmp_path):
    import hashlib

    from foresay.engine import registry_models

    def no_download(*args, **kwargs):
        raise AssertionError("a cached archive must not be downloaded again")
    monkeypatch.setattr(registry_models.subprocess, "run", no_download)
    (tmp_path / "toy-1.0.tar.gz").write_bytes(b"sources")
    assert rs.fetch(rs.Source("toy==1.0", hashlib.sha256(b"sources").hexdigest()), tmp_path).name == "toy-1.0.tar.gz"
    with pytest.raises(ForesayError, match="pinned sha256"):
        rs.fetch(rs.Source("toy==1.0", hashlib.sha256(b"other").hexdigest()), tmp_path)

"""`foresay bench asr --windows 10,20,30 --target tiny.en --audio SET.jsonl`: a CTranslate2
Whisper's per-decode time and WER by encoder window.

Each whole recording of a truth set (`foresay bench turns`' format; the reference is its turns'
texts in order) is decoded once per window that holds it (`FasterWhisperBackend.decode_in_window`,
the fastest of `--repeats` timed), and once as `transcribe` does it (`auto`: the shortest window
the clip fills at most half of, the next one when the decode loops). Transcripts are compared in
words without punctuation, number words up to twelve as digits and digit runs one digit a word
("94110" and "9 4 1 1 0" read the same; Whisper writes either).
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from foresay.app.bench.wer import scored_words
from foresay.engine.asr.errors import AsrError

SAMPLE_RATE = 16_000


def parse_windows(text: str) -> tuple[float, ...]:
    """`10,20,30` -> (10.0, 20.0, 30.0); a clear error for anything else."""
    try:
        windows = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds separated by commas, e.g. 10,20,30, got {text!r}") from None
    if not windows or any(w <= 0 for w in windows):
        raise argparse.ArgumentTypeError(f"windows must be positive seconds, got {text!r}")
    return windows


def truth_clips(path: Path) -> list[tuple[str, np.ndarray, str]]:
    """(name, 16 kHz audio, reference text) of every recording of a truth set (its set.jsonl or
    the folder holding one)."""
    from foresay.app.bench.turns import read_set
    from foresay.audio.errors import AudioFileError
    from foresay.audio.files import load_audio

    if path.is_dir():
        path = path / "set.jsonl"
    clips = []
    for rec in read_set(path):
        try:
            clips.append((rec.audio.name, load_audio(rec.audio)[0], " ".join(t.text for t in rec.turns)))
        except AudioFileError as exc:
            raise AsrError(str(exc)) from None
    return clips


def _timed(decode, repeats: int):
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        hypothesis = decode()
        runs.append(time.perf_counter() - started)
    return hypothesis, min(runs)


def compare_windows(backend, clips, windows: tuple[float, ...], repeats: int = 1) -> dict:
    """Per window and for `auto`: clips decoded, per-decode ms (median, p90), WER, looped decodes."""
    from foresay.engine.asr.whisper.encoder_window import looks_looped
    from foresay.engine.demo.evaluate_whisper import edit_distance

    backend.transcribe(clips[0][1])  # warm-up
    rows = {}
    for window in (*windows, "auto"):
        ms, errors, words, looped, used = [], 0, 0, 0, {}
        for _, audio, reference in clips:
            if window != "auto" and len(audio) > window * SAMPLE_RATE:
                continue
            if window == "auto":
                hypothesis, seconds = _timed(lambda: backend.transcribe(audio), repeats)
            else:
                hypothesis, seconds = _timed(lambda: backend.decode_in_window(audio, window), repeats)
            text = backend.text.decode(hypothesis.tokens)
            ms.append(seconds * 1000)
            ref = scored_words(reference)
            errors += edit_distance(ref, scored_words(text))
            words += len(ref)
            looped += looks_looped(text, len(hypothesis.tokens), len(audio) / SAMPLE_RATE)
            for w in hypothesis.stats.windows:
                used[f"{w:g}"] = used.get(f"{w:g}", 0) + 1
        name = "auto" if window == "auto" else f"{window:g}"
        rows[name] = {"clips": len(ms), "median_ms": round(float(np.median(ms)), 1) if ms else None,
                      "p90_ms": round(float(np.percentile(ms, 90)), 1) if ms else None,
                      "wer": round(errors / words, 4) if words else None, "looped": looped}
        if window == "auto":
            rows[name]["windows_decoded"] = used
    return rows


def run(args: argparse.Namespace) -> int:
    from foresay.app.paths import check_outputs
    from foresay.engine.asr.whisper.faster import FasterWhisperBackend, FasterWhisperConfig

    if args.audio is None:
        raise AsrError("--windows needs --audio: a truth set (set.jsonl or its folder), "
                       "e.g. one `python -m foresay.engine.demo.turn_sets --voice piper` renders")
    if args.repeats < 1 or args.threads < 0:
        raise AsrError("--repeats must be at least 1, --threads >= 0")
    clips = truth_clips(args.audio)
    check_outputs({"--json": args.json}, {"--audio": args.audio}, force=args.force)
    backend = FasterWhisperBackend(FasterWhisperConfig(args.target, device=args.device.split(":")[0],
                                                       cpu_threads=args.threads,
                                                       max_new_tokens=args.max_new_tokens))
    too_long = [w for w in args.windows if w > backend.window_seconds]
    if too_long:
        raise AsrError(f"{args.target} hears at most {backend.window_seconds:g} s; windows {too_long} are longer")
    rows = compare_windows(backend, clips, args.windows, args.repeats)
    lengths = [len(c[1]) / SAMPLE_RATE for c in clips]
    report = {"windows": rows, "setup": {
        "target": args.target, "device": args.device, "threads": args.threads, "repeats": args.repeats,
        "set": str(args.audio), "clips": len(clips), "clip_s_median": round(float(np.median(lengths)), 2),
        "clip_s_max": round(max(lengths), 2), "machine": f"{platform.machine()} {platform.system()}"}}
    print(f"{'window':<8}{'clips':>7}{'median ms':>11}{'p90 ms':>9}{'WER':>8}{'looped':>8}")
    for name, row in rows.items():
        wer = "-" if row["wer"] is None else f"{row['wer'] * 100:.1f}%"
        print(f"{name:<8}{row['clips']:>7}{str(row['median_ms']):>11}{str(row['p90_ms']):>9}{wer:>8}{row['looped']:>8}")
    print(f"auto decoded windows (s: decodes): {rows['auto']['windows_decoded']}; "
          f"{len(clips)} clips, median {report['setup']['clip_s_median']} s, longest {report['setup']['clip_s_max']} s")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0

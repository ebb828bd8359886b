"""`foresay bench soak`: one long conversation, to see that nothing degrades or is lost.

Held-out demo requests (as `foresay bench demo` speaks them) are rendered into ONE recording,
each followed by `--gap` seconds of silence, and replayed through the whole pipeline once, so
the conversation's history grows turn by turn. Reported:

- turns found and the words said vs the words heard (all final transcripts together; a short
  gap may join requests into one turn, but no word may go missing), and how many of the words
  said were heard in order (a word-level alignment: garbled words do not count);
- with one turn per request: the share answered right in the first ten turns and in the last
  ten (a model fed more history than it handles answers worse and worse);
- the process's resident memory after the first turn and after the last.
"""
from __future__ import annotations

import asyncio
import difflib
import json
import random
import tempfile
from pathlib import Path

import numpy as np

from foresay.app.saving import write_report
from foresay.app.bench.demo import held_out_requests
from foresay.app.arguments import add_settings_arguments, settings_from
from foresay.app.commands import replay
from foresay.app.paths import add_force_argument, check_outputs
from foresay.engine.demo.evaluate_whisper import words
from foresay.engine.demo.speech import SAMPLE_RATE, speak, write_wav
from foresay.engine.errors import ForesayError
from foresay.engine.events import TurnMetrics


def resident_mb() -> float:
    """This process's resident memory (Linux; 0 where /proc is missing)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    import os
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def render_soak(requests, gap_s: float, path: Path, seed: int = 0) -> Path:
    rng = random.Random(seed)
    parts = [np.zeros(int(0.5 * SAMPLE_RATE), np.float32)]
    for request in requests:
        parts += [speak(request.text, request.voice, rng.getrandbits(32)),
                  np.zeros(int(gap_s * SAMPLE_RATE), np.float32)]
    return write_wav(path, np.concatenate(parts))


def turn_finals(metrics: list[dict]) -> list[dict]:
    """One record per turn: a turn resumed after an early end (the user went on within the resume
    window) is recorded at each end, the last record holding all its words."""
    last: dict = {}
    for i, m in enumerate(metrics):
        last[m.get("turn", f"record {i}")] = m
    return list(last.values())


def score(requests, metrics: list[dict], memory: list[float]) -> dict:
    ends = len(metrics)
    metrics = turn_finals(metrics)
    said = [w for r in requests for w in words(r.text)]
    heard = [w for m in metrics for w in words(m["user_text"])]
    aligned = difflib.SequenceMatcher(a=said, b=heard, autojunk=False).get_matching_blocks()
    report = {"requests": len(requests), "turns_found": len(metrics), "ends_declared": ends, "words_said": len(said),
              "words_heard": len(heard), "words_said_and_heard": sum(block.size for block in aligned),
              "memory_mb": {"after_first_turn": round(memory[0], 1) if memory else None,
                            "after_last_turn": round(memory[-1], 1) if memory else None}}
    if len(metrics) == len(requests):
        right = [m["reply_text"].strip() == r.reply for m, r in zip(metrics, requests)]
        report["answered_right_first_10"] = sum(right[:10]) / min(10, len(right))
        report["answered_right_last_10"] = sum(right[-10:]) / min(10, len(right))
    return report


def run_bench_soak(args) -> int:
    if args.requests < 2 or args.gap < 0:
        raise ForesayError("--requests must be at least 2 and --gap at least 0")
    settings = settings_from(args)
    check_outputs({"--json": Path(args.json) if args.json else None}, {}, force=args.force)
    requests = held_out_requests(args.requests, args.data_seed)
    memory: list[float] = []

    def watch(event) -> None:
        if isinstance(event, TurnMetrics):
            memory.append(resident_mb())

    with tempfile.TemporaryDirectory() as tmp:
        audio = render_soak(requests, args.gap, Path(tmp) / "soak.wav", args.data_seed)
        metrics = asyncio.run(replay(settings, audio, None, [watch], realtime=args.realtime))
    report = score(requests, metrics, memory)
    report["gap_s"] = args.gap
    print(json.dumps(report, indent=2))
    if args.json:
        write_report(Path(args.json), {**report, "turns": metrics})
    return 0


def register(benches) -> None:
    p = benches.add_parser("soak", help="one long spoken conversation: lost words, degrading answers, memory")
    p.add_argument("--requests", type=int, default=45, help="held-out requests, spoken one after another")
    p.add_argument("--gap", type=float, default=1.5, help="seconds of silence after each request")
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--realtime", action="store_true", help="pace the recording on the audio clock")
    p.add_argument("--json", metavar="OUT")
    add_force_argument(p)
    add_settings_arguments(p)
    p.set_defaults(func=run_bench_soak)

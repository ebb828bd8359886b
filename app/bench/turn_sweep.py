"""`foresay bench turn-rules SET.jsonl ...`: reference end-of-turn rules on truth sets, swept.

    foresay bench turn-rules turns/complete1/set.jsonl --rule fixed --sweep 0.3:1.2:0.1
    foresay bench turn-rules turns/pause37_1/set.jsonl --rule smart-turn --sweep 0.3:0.9:0.1

Each recording is labelled once by the Silero VAD (faster-whisper's model, 32 ms frames, voiced
at probability >= `--vad-threshold`, pipecat's confidence 0.7), then replayed through the rule
(`turn_rules`) at each value of its parameter: the silence in seconds for `fixed`, Smart Turn's
threshold for `smart-turn`. Every point is scored by `turns.score`, the code that scores
`foresay bench turns`: endpoint delay from the truth end (median, p90), premature cut-offs
(none resumed: neither rule reopens a turn), merged requests, over all sets given and per set.
The table is the trade-off curve: delay against cut-offs. With `smart-turn`, the model's time
per call (features + model, one thread, median of `--calls` calls on a real turn) is measured
first and, unless `--latency-ms` says otherwise, added to every end the model declares.
"""
from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

from foresay.app.bench.turn_rules import FixedSilenceRule, SmartTurnRule, TurnRule, replay, vad_frames
from foresay.app.bench.turns import read_set, score
from foresay.app.paths import add_force_argument, check_outputs
from foresay.app.saving import write_report
from foresay.engine.errors import ForesayError

KEYS = ("turns_expected", "turns_found", "premature_cutoffs", "premature_recovered", "requests_cut",
        "merged_requests", "endpoint_delay_ms")
DEFAULT_SWEEP = {"fixed": "0.3:1.2:0.1", "smart-turn": "0.3:0.9:0.1"}


def parse_sweep(text: str) -> list[float]:
    """"0.3,0.5,0.7" or "START:STOP:STEP" (STOP included)."""
    try:
        if ":" in text:
            start, stop, step = (float(v) for v in text.split(":"))
            if step <= 0 or stop < start:
                raise ValueError
            return [round(v, 6) for v in np.arange(start, stop + step / 2, step)]
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ForesayError(f"--sweep {text!r}: expected values like 0.3,0.5,0.7 or START:STOP:STEP") from None


class CachedSmartTurn:
    """Smart Turn's `predict`, remembered per audio (a sweep asks about the same turn again)."""

    def __init__(self, model):
        self.model = model
        self._seen: dict[bytes, float] = {}
        self.calls = 0

    def __call__(self, audio: np.ndarray) -> float:
        key = hashlib.blake2b(np.ascontiguousarray(audio, np.float32).tobytes(), digest_size=16).digest()
        if key not in self._seen:
            self._seen[key] = self.model.predict(audio)
            self.calls += 1
        return self._seen[key]


def time_calls(model, audio: np.ndarray, calls: int) -> dict:
    """Median and p90 ms of `calls` Smart Turn calls on `audio`: features, model, both."""
    from foresay.audio.smart_turn import smart_turn_features

    features_ms, model_ms = [], []
    for _ in range(calls):
        started = time.perf_counter()
        features = smart_turn_features(audio, model.config.window_s)
        computed = time.perf_counter()
        model.predict_features(features)
        features_ms.append(1000 * (computed - started))
        model_ms.append(1000 * (time.perf_counter() - computed))
    total = np.add(features_ms, model_ms)

    def stats(v):
        return {"median": round(float(np.median(v)), 1), "p90": round(float(np.percentile(v, 90)), 1)}
    return {"calls": calls, "threads": model.config.threads, "features_ms": stats(features_ms),
            "model_ms": stats(model_ms), "call_ms": stats(total)}


def sweep(make_rule: Callable[[float], TurnRule], values: list[float], sets: list[tuple[str, list, list]]) -> list[dict]:
    """Each value's figures over all sets and per set; `sets`: (name, recordings, frames of each),
    the frames running on past each recording's speech for the rules' `longest_wait_s`."""
    points = []
    for value in values:
        rule = make_rule(value)
        per_set, all_recordings, all_observed, all_counts = {}, [], [], {}
        for name, recordings, frames in sets:
            observed, counts = [], {}
            for f in frames:
                observed.append(replay(rule, f))
                for key, n in rule.counts.items():
                    counts[key] = counts.get(key, 0) + n
                    all_counts[key] = all_counts.get(key, 0) + n
            report = score(recordings, observed)
            per_set[name] = {**{k: report[k] for k in KEYS}, **counts}
            all_recordings += recordings
            all_observed += observed
        report = score(all_recordings, all_observed)
        points.append({"value": value, "all": {**{k: report[k] for k in KEYS}, **all_counts}, "per_set": per_set})
    return points


def table(points: list[dict], parameter: str) -> str:
    """The curve as a markdown table; the rule's own counts (e.g. why turns ended) close each row."""
    extra = [k for k in points[0]["all"] if k not in KEYS] if points else []
    lines = ["| " + " | ".join([parameter, "turns found / expected", "premature cut-offs (resumed)", "requests cut", "merged",
                                "endpoint delay median / p90 ms", *(k.replace("_", " ") for k in extra)]) + " |",
             "|---" * (6 + len(extra)) + "|"]
    for point in points:
        r = point["all"]
        delay = r["endpoint_delay_ms"]
        cells = [f"{point['value']:g}", f"{r['turns_found']} / {r['turns_expected']}",
                 f"{r['premature_cutoffs']} ({r['premature_recovered']})", str(r["requests_cut"]), str(r["merged_requests"]),
                 f"{delay['median']} / {delay['p90']}", *(str(r[k]) for k in extra)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def labelled_sets(paths: list[str], vad_threshold: float, pad_s: float) -> list[tuple[str, list, list]]:
    """Each truth set's recordings and their Silero-labelled frames, `pad_s` of silence after each."""
    from foresay.audio.files import load_audio
    from foresay.audio.vad import SileroVad

    vad = SileroVad(threshold=vad_threshold)
    sets = []
    for path in paths:
        recordings = read_set(Path(path))
        frames = []
        for rec in recordings:
            vad.reset()
            samples, _ = load_audio(rec.audio)
            frames.append(vad_frames(samples, vad.probability, vad.frame_samples, vad_threshold, pad_s))
        sets.append((path, recordings, frames))
    return sets


def run_turn_rules(args) -> int:
    values = parse_sweep(args.sweep or DEFAULT_SWEEP[args.rule])
    if not 0.0 < args.vad_threshold < 1.0:
        raise ForesayError("--vad-threshold must be between 0 and 1")
    if args.calls < 1 or args.threads < 1:
        raise ForesayError("--calls and --threads must be at least 1")
    check_outputs({"--json": Path(args.json) if args.json else None}, {}, force=args.force)
    report = {"rule": args.rule, "sets": args.truth_sets, "vad": {"kind": "silero", "threshold": args.vad_threshold,
                                                                  "start_s": args.start_s}}
    for path in args.truth_sets:
        read_set(Path(path))   # a bad set fails before the model loads
    if args.rule == "fixed":
        parameter = "silence_s"
        make_rule = lambda v: FixedSilenceRule(v, start_s=args.start_s)  # noqa: E731
    else:
        from foresay.audio.smart_turn import SmartTurnConfig, SmartTurnModel

        parameter = "threshold"
        model = SmartTurnModel(SmartTurnConfig(threads=args.threads))
        predict = CachedSmartTurn(model)
        latency_s = [0.0 if args.latency_ms is None else args.latency_ms / 1000]  # measured below unless given
        make_rule = lambda v: SmartTurnRule(predict, threshold=v, stop_s=args.stop_s,  # noqa: E731
                                            fallback_s=args.fallback_s, latency_s=latency_s[0], start_s=args.start_s)
    pad_s = max(make_rule(v).longest_wait_s for v in values) + 0.5
    sets = labelled_sets(args.truth_sets, args.vad_threshold, pad_s)
    if args.rule == "smart-turn":
        first = sets[0][1][0]
        speech = np.concatenate([f for f, _, t in sets[0][2][0] if t < first.turns[-1].end_s + 0.2])
        timing = time_calls(model, speech, args.calls)
        if args.latency_ms is None:
            latency_s[0] = timing["call_ms"]["median"] / 1000
        report.update(smart_turn=timing, stop_s=args.stop_s, fallback_s=args.fallback_s,
                      latency_ms=round(1000 * latency_s[0], 1))
        print(f"Smart Turn, one call (features + model, {args.threads} thread(s)): median "
              f"{timing['call_ms']['median']} ms, p90 {timing['call_ms']['p90']} ms", file=sys.stderr)
    report["parameter"] = parameter
    report["points"] = sweep(make_rule, values, sets)
    if args.rule == "smart-turn":
        report["smart_turn"]["distinct_turn_audio_scored"] = predict.calls
    print(table(report["points"], parameter))
    if args.json:
        write_report(Path(args.json), report)
    return 0


def register(benches) -> None:
    p = benches.add_parser("turn-rules", help="reference end-of-turn rules (fixed silence, Smart Turn behind "
                           "Silero VAD) on truth sets: delay against cut-offs as a parameter varies")
    p.add_argument("truth_sets", nargs="+", metavar="SET.jsonl", help="truth sets, as `bench turns` reads them")
    p.add_argument("--rule", choices=("fixed", "smart-turn"), default="fixed",
                   help="fixed: the turn ends after a fixed VAD silence; smart-turn: pipecat's Smart Turn v3.2 "
                        "at each short VAD stop, a fallback silence otherwise")
    p.add_argument("--sweep", help="the values of the rule's parameter (fixed: silence in s, default 0.3:1.2:0.1; "
                   "smart-turn: threshold, default 0.3:0.9:0.1): 0.3,0.5 or START:STOP:STEP")
    p.add_argument("--vad-threshold", type=float, default=0.7, help="Silero probability of a voiced frame "
                   "(pipecat's confidence: 0.7)")
    p.add_argument("--start-s", type=float, default=0.2, help="voiced run that starts a turn (pipecat: 0.2 s)")
    p.add_argument("--stop-s", type=float, default=0.2, help="smart-turn: the VAD stop that asks the model "
                   "(pipecat: 0.2 s)")
    p.add_argument("--fallback-s", type=float, default=3.0, help="smart-turn: silence after the stop that ends a "
                   "turn the model found unfinished (pipecat: 3 s)")
    p.add_argument("--latency-ms", type=float, help="smart-turn: added to each end the model declares "
                   "(default: the median call time measured here)")
    p.add_argument("--threads", type=int, default=1, help="smart-turn: onnxruntime threads")
    p.add_argument("--calls", type=int, default=30, help="smart-turn: calls timed for the time per call")
    p.add_argument("--json", metavar="OUT")
    add_force_argument(p)
    p.set_defaults(func=run_turn_rules)

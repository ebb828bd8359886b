"""`foresay bench e2e`: recordings replayed through the whole pipeline, PredGen and adaptive
endpointing each on and off; per-stage latency."""
from __future__ import annotations

import asyncio
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from foresay.app.saving import write_report
from foresay.app.arguments import add_settings_arguments, settings_from
from foresay.app.commands import LATENCY_KEYS, replay
from foresay.app.paths import add_force_argument, check_outputs
from foresay.engine.errors import ForesayError


def summarize_metrics(metrics: list[dict]) -> dict:
    out = {}
    for key in LATENCY_KEYS:
        values = sorted(m[key] for m in metrics if isinstance(m.get(key), (int, float)))
        if values:
            p90 = values[min(len(values) - 1, int(round(0.9 * (len(values) - 1))))]
            out[key] = {"mean": statistics.fmean(values), "median": statistics.median(values), "p90": p90}
    return out


def run_bench_e2e(args) -> int:
    settings = settings_from(args)
    folder = Path(args.audio)
    files = sorted(folder.glob("*.wav")) if folder.is_dir() else [folder]
    if not files or not files[0].exists():
        raise ForesayError(f"no .wav recordings in {folder}")
    from foresay.audio.files import audio_file_info
    for path in files:
        audio_file_info(path)
    check_outputs({"--json": Path(args.json) if args.json else None}, {str(p): p for p in files}, force=args.force)
    configs = {
        "predgen+adaptive": (True, True), "predgen+fixed": (True, False),
        "baseline+adaptive": (False, True), "baseline+fixed": (False, False),
    }
    results = {}
    for name, (speculate, adaptive) in configs.items():
        s = replace(settings, predgen=replace(settings.predgen, enabled=speculate),
                    app=replace(settings.app, adaptive_endpointing=adaptive))
        metrics = []
        for path in files:
            metrics += asyncio.run(replay(s, path, None))
        results[name] = summarize_metrics(metrics)
        print(f"{name}: {len(metrics)} turns", file=sys.stderr)
    head = f"{'ms: mean/median/p90':<22}" + "".join(f"{n:>22}" for n in configs)
    print(head + "\n" + "-" * len(head))
    for key in LATENCY_KEYS:
        cells = []
        for name in configs:
            m = results[name].get(key)
            cells.append(f"{m['mean']:.0f}/{m['median']:.0f}/{m['p90']:.0f}" if m else "-")
        print(f"{key:<22}" + "".join(f"{c:>22}" for c in cells))
    if args.json:
        write_report(Path(args.json), {"configs": results})
    return 0


def register(benches) -> None:
    p = benches.add_parser("e2e", help="replay recordings: per-stage latency, PredGen and endpointing on/off")
    p.add_argument("--audio", required=True, help="a folder of .wav recordings (or one file)")
    p.add_argument("--json", metavar="OUT")
    add_force_argument(p)
    add_settings_arguments(p)
    p.set_defaults(func=run_bench_e2e)

"""`foresay bench ...`: the benchmark commands and their drivers. `register` adds every one of
them to the CLI, in one place."""
from __future__ import annotations


def register(commands) -> None:
    from foresay.app.bench import asr, demo, e2e, gpu, predgen, soak, tts, turn_sweep, turns

    bench = commands.add_parser("bench", help="benchmarks: predgen, asr, tts, e2e, demo, turns, turn-rules, soak, gpu")
    benches = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for module in (predgen, tts, asr, demo, soak, gpu, turns, turn_sweep, e2e):
        module.register(benches)

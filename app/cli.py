"""The `foresay` command line: one parser, subcommands registered by the modules that own them."""
from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version

from foresay.app import bench_asr, bench_predgen, bench_tts
from foresay.engine.errors import ForesayError


def _version() -> str:
    try:
        return version("foresay")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="foresay", description="A local voice assistant that answers while you speak.")
    parser.add_argument("--version", action="version", version=f"foresay {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    bench = commands.add_parser("bench", help="benchmarks (predgen; asr, tts, e2e as they land)")
    benches = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    # Each command's module registers its parser here: module.register(subparsers).
    bench_predgen.register(benches)
    bench_tts.register(benches)
    bench_asr.register(benches)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except ForesayError as exc:
        print(f"foresay: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

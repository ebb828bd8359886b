"""What the demo models' `python -m` commands share: option checks and user-facing errors."""
from __future__ import annotations

import argparse
import sys

from foresay.engine.errors import ForesayError


def run(parser: argparse.ArgumentParser, argv: list[str] | None, positive: tuple[str, ...]) -> int:
    """Parse `argv`, refuse non-positive values of the `positive` options, run `args.func`."""
    args = parser.parse_args(argv)
    for name in positive:
        if getattr(args, name, 1) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    try:
        return args.func(args)
    except ForesayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def check_schedule(what: str, steps: int, batch_size: int, warmup: int, lr: float) -> None:
    """A training schedule's numbers, checked with a message naming the trainer."""
    if steps < 1 or batch_size < 1 or warmup < 0:
        raise ForesayError(f"{what}: steps and batch_size must be >= 1, warmup >= 0")
    if not 0 < lr < 1:
        raise ForesayError(f"{what}: lr must lie in (0, 1)")

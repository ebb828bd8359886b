"""What the demo models' `python -m` commands share: option checks and user-facing errors."""
from __future__ import annotations

import argparse
import math
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


def check_schedule(what: str, config) -> None:
    """A training config's schedule (steps, batch_size, warmup, lr, stop_at, checkpoint_every),
    checked with messages naming the trainer."""
    if config.steps < 1 or config.batch_size < 1 or config.warmup < 0:
        raise ForesayError(f"{what}: steps and batch_size must be >= 1, warmup >= 0")
    if not 0 < config.lr < 1:
        raise ForesayError(f"{what}: lr must lie in (0, 1)")
    if config.stop_at is not None and not 1 <= config.stop_at <= config.steps:
        raise ForesayError(f"{what}: stop_at must lie in 1..steps")
    if config.checkpoint_every < 0:
        raise ForesayError(f"{what}: checkpoint_every must be >= 0")


def warmup_cosine_lr(step: int, config, floor: float) -> float:
    """The trainers' learning rate at `step`: linear warm-up over `config.warmup` steps, then a
    cosine decay from `config.lr` down to `floor` times it at `config.steps`."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    return config.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def add_pair_eval_arguments(ev: argparse.ArgumentParser, target: str, draft: str) -> None:
    """The options of a recognizer pair's `eval` command (the Whisper pair, the LLM-ASR pair)."""
    ev.add_argument("--target", default=target)
    ev.add_argument("--draft", default=draft)
    ev.add_argument("--clips", type=int, default=200)
    ev.add_argument("--gate-target", type=float, default=0.05)
    ev.add_argument("--gate-draft", type=float, default=0.15)
    ev.add_argument("--show-misses", type=int, default=5)
    ev.add_argument("--json", metavar="OUT")
    ev.add_argument("--lead-s", type=float, default=0.0,
                    help="give every clip this much of its own noise before it, as the endpointer's "
                         "pre-roll does (0.3 s in the live path)")
    ev.add_argument("--tail-s", type=float, default=0.0, help="and this much after it")
    ev.add_argument("--silent-room", action="store_true",
                    help="the lead and the tail are digital silence, not the clip's noise (a noise-"
                         "suppressed microphone, a rendered file)")


def check_room(args) -> None:
    """Refuse an eval's `--lead-s` / `--tail-s` / `--silent-room` that frame nothing (before any clip is rendered)."""
    if args.lead_s < 0 or args.tail_s < 0:
        raise ForesayError("--lead-s and --tail-s must not be negative")
    if args.silent_room and not args.lead_s and not args.tail_s:
        raise ForesayError("--silent-room frames the clips in silence: give --lead-s or --tail-s")


def in_room(speech, args):
    """The eval's clips with `--lead-s` / `--tail-s` of their own noise (or, `--silent-room`, of
    digital silence) around them (as they are without either). The caller has run `check_room`."""
    if not args.lead_s and not args.tail_s:
        return speech
    return speech.in_room((args.lead_s, args.lead_s), (args.tail_s, args.tail_s), args.data_seed,
                          silent_share=1.0 if args.silent_room else 0.0)


def room_words(args) -> str:
    """How an eval's clips were framed, for its report line ('' when as rendered)."""
    if not args.lead_s and not args.tail_s:
        return ""
    room = "digital silence" if args.silent_room else "room noise"
    return f", with {args.lead_s:g} s of {room} before and {args.tail_s:g} s after"

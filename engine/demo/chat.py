"""The demo chat model's command line: write dialogues, train, evaluate.

    python -m foresay.engine.demo.chat data  --split test --dialogues 200 --out test.jsonl
    python -m foresay.engine.demo.chat train --out assets/models/demo-chat          (CPU, ~15 min)
    python -m foresay.engine.demo.chat eval  --model demo --split test --dialogues 200

`eval` prints the exact-match accuracy on held-out requests with the full prompt (the gate is
90%) and exits 1 below `--gate`, and how well P(end of turn) tells whole requests from requests
cut mid-sentence (AUC, `evaluate_turn_end`).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from foresay.engine.demo.dialogues import SPLITS, DialogueGenerator, DomainConfig, write_jsonl
from foresay.engine.demo.cli import run


def _domain(args) -> DomainConfig:
    return DomainConfig(seed=args.data_seed)


def cmd_data(args) -> int:
    write_jsonl(DialogueGenerator(_domain(args), args.split).dialogues(args.dialogues), args.out)
    print(f"wrote {args.dialogues} {args.split} dialogues to {args.out}")
    return 0


def cmd_train(args) -> int:
    from foresay.engine.demo.train_chat import ChatTrainConfig, train_chat
    from foresay.engine.predgen.conversation import default_system_prompt

    config = ChatTrainConfig(seed=args.seed, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                             warmup=args.warmup,
                             truncate_prob=args.truncate_prob, end_of_message=not args.no_end_of_message,
                             unpunctuated_prob=args.unpunctuated_prob, threads=args.threads, stop_at=args.stop_at,
                             checkpoint_every=args.checkpoint_every)
    stats = train_chat(config, Path(args.out), default_system_prompt(), _domain(args),
                       progress=lambda line: print(line, file=sys.stderr, flush=True),
                       resume=Path(args.resume) if args.resume else None)
    print(json.dumps(stats, indent=2))
    return 0


def cmd_eval(args) -> int:
    from foresay.engine.demo.evaluate_chat import evaluate_chat
    from foresay.engine.demo.evaluate_turn_end import evaluate_turn_end
    from foresay.engine.llm.config import LLMConfig
    from foresay.engine.llm.backend import load_llm

    lm = load_llm(LLMConfig(model=args.model, device=args.device, threads=args.threads))
    dialogues = DialogueGenerator(_domain(args), args.split).dialogues(args.dialogues)
    score = evaluate_chat(lm, dialogues)
    turn_end = None if args.no_turn_end else evaluate_turn_end(lm, dialogues).summary()
    kinds = ", ".join(f"{k} {e}/{n}" for k, (e, n) in sorted(score.by_held_out.items()))
    print(f"{args.model}: {score.exact}/{score.turns} {args.split} requests answered exactly "
          f"({100 * score.accuracy:.1f}%; held out by {kinds})")
    for miss in score.misses[:args.show_misses]:
        print(f"  {miss.user!r}\n    expected {miss.expected!r}\n    got      {miss.got!r}")
    if turn_end:
        print(f"P(end of turn), whole vs cut requests: AUC {turn_end['auc']:.3f} as written, "
              f"{turn_end['auc_unpunctuated']:.3f} without final punctuation (medians: whole "
              f"{turn_end['median_p_complete']}, unpunctuated {turn_end['median_p_unpunctuated']}, "
              f"cut {turn_end['median_p_cut']})")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "model": args.model, "split": args.split, "turns": score.turns, "exact": score.exact,
            "accuracy": score.accuracy, "by_held_out": score.by_held_out, "end_of_turn": turn_end}, indent=2))
    return 0 if score.accuracy >= args.gate else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m foresay.engine.demo.chat", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    data = commands.add_parser("data", help="write dialogues of a split as JSONL (turns + replies)")
    data.add_argument("--split", choices=SPLITS, default="test")
    data.add_argument("--dialogues", type=int, default=200)
    data.add_argument("--out", required=True)
    data.set_defaults(func=cmd_data)

    train = commands.add_parser("train", help="train the tokenizer and the chat model")
    train.add_argument("--out", required=True, help="folder for the model (e.g. assets/models/demo-chat)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--steps", type=int, default=600)
    train.add_argument("--batch-size", type=int, default=32)
    train.add_argument("--lr", type=float, default=3e-3)
    train.add_argument("--warmup", type=int, default=40, help="linear warmup steps")
    train.add_argument("--resume", metavar="FOLDER", help="continue training this model (and keep its "
                       "tokenizer); pass another --data-seed so it sees new dialogues")
    train.add_argument("--truncate-prob", type=float, default=0.3,
                       help="share of dialogues whose last user turn is cut off")
    train.add_argument("--no-end-of-message", action="store_true",
                       help="do not learn where a user message ends (the recipe before P(end of turn))")
    train.add_argument("--unpunctuated-prob", type=float, default=0.25,
                       help="share of whole last requests trained without their final punctuation")
    train.add_argument("--threads", type=int, default=2)
    train.add_argument("--stop-at", type=int, help="stop after N steps of the --steps schedule")
    train.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                       help="also save the model (and training.json) every N steps")
    train.set_defaults(func=cmd_train)

    ev = commands.add_parser("eval", help="exact-match accuracy on held-out requests")
    ev.add_argument("--model", default="demo", help="demo, a folder or a hub id")
    ev.add_argument("--split", choices=SPLITS, default="test")
    ev.add_argument("--dialogues", type=int, default=200)
    ev.add_argument("--gate", type=float, default=0.9, help="exit 1 below this accuracy")
    ev.add_argument("--show-misses", type=int, default=10)
    ev.add_argument("--no-turn-end", action="store_true", help="skip the P(end of turn) separation")
    ev.add_argument("--json", metavar="OUT")
    ev.add_argument("--device", default="auto")
    ev.add_argument("--threads", type=int, default=2)
    ev.set_defaults(func=cmd_eval)
    for sub in (data, train, ev):
        sub.add_argument("--data-seed", type=int, default=0, help="seed of the dialogue generator")
    return parser


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv, positive=("dialogues", "steps", "batch_size"))


if __name__ == "__main__":
    sys.exit(main())

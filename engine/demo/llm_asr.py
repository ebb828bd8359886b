"""The demo LLM-based recognizer pair's command line (Qwen3-ASR architecture): train, evaluate.

    nice -n 10 python -m foresay.engine.demo.llm_asr train --which target --out-dir assets/models \
        --teacher-dir assets/models
    nice -n 10 python -m foresay.engine.demo.llm_asr train --which draft --prefix-clips 0 \
        --out-dir assets/models --teacher-dir assets/models
    python -m foresay.engine.demo.llm_asr eval --split test --clips 200

Speech comes from the demo Whisper pair's renderer and splits (`speech.py`, cached in the user
cache). `eval` prints each model's word error rate on held-out requests in held-out voice
settings (exit 1 above `--gate-target` 5% or `--gate-draft` 15%), then decodes the clips with
SpecASR and reports the target passes it cut and whether every transcript equals the target's
greedy one.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from foresay.engine.demo.cli import add_pair_eval_arguments, check_room, in_room, room_words, run
from foresay.engine.demo.dialogues import SPLITS
from foresay.engine.errors import ForesayError

NAMES = {"target": "demo-llm-asr", "draft": "demo-llm-asr-draft"}


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def checkpoint_scorer(clips: int, data_seed: int):
    """What `train --eval-clips N` runs after each save: a copy of the checkpoint in
    `checkpoints/NAME-STEP` beside the model and its greedy WER on the first `clips` validation
    requests (never the test split, which scores the chosen model once), appended to
    `checkpoints/scores.jsonl`."""
    import shutil

    from foresay.engine.asr.factory import AsrConfig, build_backend
    from foresay.engine.demo.evaluate_whisper import evaluate_wer
    from foresay.engine.demo.speech import speech_set

    speech = speech_set("val", clips, data_seed, progress=_progress)

    def score(out: Path, stats: dict) -> None:
        kept = out.parent / "checkpoints" / f"{out.name}-{stats['steps_done']}"
        shutil.copytree(out, kept, dirs_exist_ok=True)
        result = evaluate_wer(build_backend(AsrConfig(target=str(kept), backend="llm-greedy")), speech)
        line = {"model": out.name, "step": stats["steps_done"], "val_wer": round(result.wer, 4),
                "exact": result.exact, "clips": result.clips, "seconds": stats["seconds"]}
        with open(kept.parent / "scores.jsonl", "a") as log:
            log.write(json.dumps(line) + "\n")
        _progress(f"{out.name} checkpoint {stats['steps_done']}: validation WER {100 * result.wer:.2f}% "
                  f"({result.exact}/{result.clips} exact), kept in {kept}")

    return score


def cmd_train(args) -> int:
    import torch

    from foresay.engine.demo.llm_asr_teacher import TEACHERS, teacher_states
    from foresay.engine.demo.speech import speech_set
    from foresay.engine.demo.train_llm_asr import (AUGMENT, LlmAsrTrainConfig, build_tokenizer, train_llm_asr,
                                                   training_data)

    if args.threads:
        torch.set_num_threads(args.threads)
    if not 0 <= args.prefix_clips <= args.clips:
        raise ForesayError(f"--prefix-clips must lie in 0..--clips ({args.clips})")
    requests = speech_set("train", args.clips, args.data_seed, progress=_progress)
    tok = build_tokenizer(requests.texts)
    speech = requests
    if args.prefix_clips:
        speech = requests + speech_set("train", args.prefix_clips, args.data_seed, progress=_progress, kind="prefixes")
    _progress(f"{len(speech.texts)} training clips ({args.prefix_clips} of them request prefixes); computing features")
    data = training_data(tok, speech, prefix_clips=args.prefix_clips)
    scorer = checkpoint_scorer(args.eval_clips, args.data_seed) if args.eval_clips else None
    results = {}
    for role in ("target", "draft"):
        if args.which not in ("both", role):
            continue
        teacher = None
        if args.teacher_dir:
            folder = Path(args.teacher_dir) / TEACHERS[NAMES[role]]
            if not (folder / "config.json").exists():
                raise ForesayError(f"no demo Whisper to learn from in {folder}")
            teacher = teacher_states(folder, speech.audio, progress=_progress)
        config = LlmAsrTrainConfig(seed=args.seed, steps=getattr(args, f"{role}_steps"), batch_size=args.batch_size,
                                   lr=args.lr, threads=args.threads, checkpoint_every=args.checkpoint_every,
                                   ctc_warmup=args.ctc_warmup, distill_weight=args.distill if teacher else 0.0,
                                   stop_at=getattr(args, f"{role}_stop_at"), precision=args.precision,
                                   augmentation=None if args.no_augment else AUGMENT,
                                   decoder_layers=getattr(args, f"{role}_decoder_layers"))
        results[role] = train_llm_asr(NAMES[role], config, tok, data, Path(args.out_dir) / NAMES[role], _progress,
                                      teacher, scorer)
    print(json.dumps(results, indent=2))
    return 0


def cmd_eval(args) -> int:
    import torch

    from foresay.engine.asr.factory import AsrConfig, build_backend
    from foresay.engine.asr.pairs import load_pair
    from foresay.engine.asr.specasr import SpecConfig
    from foresay.engine.demo.evaluate_whisper import evaluate_wer
    from foresay.engine.demo.speech import speech_set

    check_room(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    speech = in_room(speech_set(args.split, args.clips, args.data_seed, progress=_progress), args)
    report, ok = {}, True
    for role, name, gate in (("target", args.target, args.gate_target), ("draft", args.draft, args.gate_draft)):
        score = evaluate_wer(build_backend(AsrConfig(target=name, backend="llm-greedy")), speech)
        ok &= score.wer <= gate
        report[role] = {"model": name, "wer": score.wer, "words": score.words, "clips": score.clips,
                        "exact_clips": score.exact, "lead_s": args.lead_s, "tail_s": args.tail_s,
                        "silent_room": args.silent_room}
        print(f"{role} {name}: WER {100 * score.wer:.2f}% ({score.errors}/{score.words} words, "
              f"{score.exact}/{score.clips} clips exact) on {args.split}{room_words(args)}; gate {100 * gate:.0f}%")
        for ref, hyp in score.worst[:args.show_misses]:
            print(f"    ref {ref!r}\n    got {hyp!r}")
    pair = load_pair(args.target, args.draft)
    for label, spec in (("specasr_adaptive", SpecConfig()), ("specasr_tree", SpecConfig(tree_budget=4))):
        greedy_passes = spec_passes = 0
        identical = True
        for clip in speech.audio:
            reference, result = pair.decode(clip, None, 96), pair.decode(clip, spec, 96)
            identical &= reference.tokens == result.tokens
            greedy_passes += reference.stats.target_passes
            spec_passes += result.stats.target_passes
        report[label] = {"target_passes_greedy": greedy_passes, "target_passes": spec_passes,
                         "cut": round(greedy_passes / spec_passes, 2), "identical": identical}
        print(f"{label}: target passes {greedy_passes} -> {spec_passes} ({greedy_passes / spec_passes:.2f}x fewer, "
              f"prefill included), identical to greedy: {identical}")
        ok &= identical
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m foresay.engine.demo.llm_asr", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train the tokenizer, the target and the draft")
    train.add_argument("--out-dir", required=True, help="writes demo-llm-asr/ and demo-llm-asr-draft/ here")
    train.add_argument("--clips", type=int, default=10000,
                       help="distinct training requests rendered (the vocabulary is learned from them: a draft "
                            "and its target need the same --clips and --data-seed)")
    train.add_argument("--prefix-clips", type=int, default=5000,
                       help="also train on this many requests' first words spoken alone (0: none)")
    train.add_argument("--target-steps", type=int, default=3000)
    train.add_argument("--draft-steps", type=int, default=3000)
    train.add_argument("--target-stop-at", type=int, help="stop the target after N steps of its schedule")
    train.add_argument("--draft-stop-at", type=int, help="stop the draft after N steps of its schedule")
    for role in ("target", "draft"):
        train.add_argument(f"--{role}-decoder-layers", type=int, metavar="N",
                           help=f"the {role} decoder's depth (default: its shape's)")
    train.add_argument("--eval-clips", type=int, default=0, metavar="N",
                       help="score each checkpoint on N validation requests and keep a copy of it (0: no)")
    train.add_argument("--batch-size", type=int, default=32)
    train.add_argument("--lr", type=float, default=2e-3)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--which", choices=("both", "target", "draft"), default="both")
    train.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto")
    train.add_argument("--no-augment", action="store_true")
    train.add_argument("--checkpoint-every", type=int, default=0, metavar="N")
    train.add_argument("--teacher-dir", metavar="DIR",
                       help="start each encoder from the demo Whisper of its size in DIR (demo-whisper/, "
                            "demo-whisper-draft/) and pull it towards that encoder's states")
    train.add_argument("--distill", type=float, default=3.0, help="weight of the teacher's loss")
    train.add_argument("--ctc-warmup", type=int, default=300, metavar="N",
                       help="train the encoders alone (CTC, teacher) for the first N steps")
    train.set_defaults(func=cmd_train)

    ev = commands.add_parser("eval", help="word error rates and SpecASR's passes on held-out requests")
    ev.add_argument("--split", choices=SPLITS, default="test")
    add_pair_eval_arguments(ev, "demo-llm", "demo-llm-draft")
    ev.set_defaults(func=cmd_eval)
    for sub in (train, ev):
        sub.add_argument("--data-seed", type=int, default=0, help="seed of the dialogue generator")
        sub.add_argument("--threads", type=int, default=2, help="torch CPU threads (0: torch's default)")
    return parser


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv, positive=("clips", "target_steps", "draft_steps", "batch_size"))


if __name__ == "__main__":
    sys.exit(main())

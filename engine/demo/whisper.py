"""The demo Whisper pair's command line: render speech, train, evaluate, export WAVs.

    python -m foresay.engine.demo.whisper train --out-dir assets/models      (CPU, ~20 min)
    python -m foresay.engine.demo.whisper eval  --split test --clips 200
    python -m foresay.engine.demo.whisper wavs  --split test --clips 40 --out /tmp/demo-wavs

Speech is rendered by espeak-ng into the user cache (`FORESAY_DEMO_SPEECH_DIR` overrides it),
never into the repository. `eval` prints each model's word error rate on held-out requests in
held-out voice settings and exits 1 when the target is above `--gate-target` (5%) or the draft
above `--gate-draft` (15%).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from foresay.engine.demo.dialogues import SPLITS
from foresay.engine.demo.speech import KINDS
from foresay.engine.demo.cli import add_pair_eval_arguments, check_room, in_room, room_words, run
from foresay.engine.errors import ForesayError


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _threads(n: int) -> None:
    if n:
        import torch
        torch.set_num_threads(n)


def cmd_train(args) -> int:
    from foresay.engine.demo.augment import AugmentConfig
    from foresay.engine.demo.speech import speech_set
    from foresay.engine.demo.train_whisper import (WINDOW_SECONDS, WhisperTrainConfig, build_whisper_tokenizer,
                                                   train_whisper, training_data)

    _threads(args.threads)
    if args.init_from and args.which == "both":
        raise ForesayError("--init-from fine-tunes one model: add --which target or --which draft")
    for option in ("target_prefix_clips", "draft_prefix_clips", "target_fragment_clips", "target_paused_clips"):
        if not 0 <= getattr(args, option) <= args.clips:
            raise ForesayError(f"--{option.replace('_', '-')} must lie in 0..--clips ({args.clips})")
    if not 0.0 <= args.room_silent_share <= 1.0:
        raise ForesayError("--room-silent-share must lie in 0..1")
    if args.room_silent_share and not (args.room_lead_s or args.room_tail_s):
        raise ForesayError("--room-silent-share frames the clips' room in silence: it needs --room-lead-s or --room-tail-s")
    requests = speech_set("train", args.clips, args.data_seed, progress=_progress)
    tok = build_whisper_tokenizer(requests.texts)  # the requests themselves, as `utterances` lists them
    results = {}
    chosen = {"both": ("demo-whisper", "demo-whisper-draft"), "target": ("demo-whisper",),
              "draft": ("demo-whisper-draft",)}[args.which]
    plans = (("demo-whisper", args.target_steps, args.target_stop_at, args.target_prefix_clips,
              args.target_fragment_clips, args.target_paused_clips),
             ("demo-whisper-draft", args.draft_steps, args.draft_stop_at, args.draft_prefix_clips, 0, 0))
    for name, steps, stop_at, prefix_clips, fragment_clips, paused_clips in plans:
        if name not in chosen:
            continue
        speech, paused_kept = requests, 0
        if prefix_clips:
            speech = speech + speech_set("train", prefix_clips, args.data_seed, progress=_progress, kind="prefixes")
        if fragment_clips:
            speech = speech + speech_set("train", fragment_clips, args.data_seed, progress=_progress, kind="fragments")
        if paused_clips:
            paused = speech_set("train", paused_clips, args.data_seed, progress=_progress,
                                kind="paused").at_most(WINDOW_SECONDS)
            speech, paused_kept = speech + paused, len(paused.texts)
        _progress(f"{name}: {len(speech.texts)} training clips ({prefix_clips} of them request prefixes, "
                  f"{fragment_clips} requests cut at a pause, {paused_kept} with a pause inside); computing features")
        data = training_data(tok, speech, prefix_clips=prefix_clips, fragment_clips=fragment_clips,
                             paused_clips=paused_kept, paused_requested=paused_clips, room_lead_s=args.room_lead_s,
                             room_tail_s=args.room_tail_s, room_seed=args.data_seed,
                             room_silent_share=args.room_silent_share)
        config = WhisperTrainConfig(seed=args.seed, steps=steps, batch_size=args.batch_size, lr=args.lr,
                                    threads=args.threads, checkpoint_every=args.checkpoint_every,
                                    stop_at=stop_at, precision=args.precision, init_from=args.init_from,
                                    warmup=args.warmup, ctc_weight=args.ctc_weight,
                                    augmentation=None if args.no_augment else AugmentConfig())
        results[name] = train_whisper(name, config, tok, data, Path(args.out_dir) / name, _progress)
    print(json.dumps(results, indent=2))
    return 0


def cmd_eval(args) -> int:
    from foresay.engine.asr.factory import AsrConfig, build_backend
    from foresay.engine.demo.evaluate_whisper import evaluate_wer
    from foresay.engine.demo.speech import speech_set

    check_room(args)
    _threads(args.threads)
    speech = in_room(speech_set(args.split, args.clips, args.data_seed, progress=_progress, kind=args.kind), args)
    report, ok = {}, True
    for role, name, gate in (("target", args.target, args.gate_target), ("draft", args.draft, args.gate_draft)):
        backend = build_backend(AsrConfig(target=name, backend="greedy"))
        score = evaluate_wer(backend, speech)
        ok &= score.wer <= gate
        report[role] = {"model": name, "wer": score.wer, "words": score.words, "clips": score.clips,
                        "exact_clips": score.exact, "completed_clips": score.completed,
                        "lead_s": args.lead_s, "tail_s": args.tail_s, "silent_room": args.silent_room}
        completed = f", {score.completed} cut clips heard as whole sentences" if args.kind == "fragments" else ""
        print(f"{role} {name}: WER {100 * score.wer:.2f}% ({score.errors}/{score.words} words, "
              f"{score.exact}/{score.clips} clips exact{completed}) on {args.split}"
              f"{'' if args.kind == 'whole' else ' ' + args.kind}{room_words(args)}; gate {100 * gate:.0f}%")
        for ref, hyp in score.worst[:args.show_misses]:
            print(f"    ref {ref!r}\n    got {hyp!r}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0 if ok else 1


def cmd_wavs(args) -> int:
    from foresay.engine.demo.speech import speech_set, write_wavs

    speech = speech_set(args.split, args.clips, args.data_seed, progress=_progress)
    paths = write_wavs(speech, Path(args.out))
    print(f"wrote {len(paths)} {args.split} clips and transcripts.json to {args.out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m foresay.engine.demo.whisper", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="render speech, train the tokenizer, the target and the draft")
    train.add_argument("--out-dir", required=True, help="writes demo-whisper/ and demo-whisper-draft/ here")
    train.add_argument("--clips", type=int, default=10000, help="distinct training requests rendered")
    train.add_argument("--target-prefix-clips", type=int, default=5000,
                       help="also train the target on this many requests' first words spoken alone (0: "
                            "none), so that it does not complete a cut-off request with words of its own")
    train.add_argument("--target-fragment-clips", type=int, default=0,
                       help="also train the target on this many requests cut at a pause mid-sentence (0: "
                            "none), so that it does not hear a user who stops to think as finished")
    train.add_argument("--target-paused-clips", type=int, default=0,
                       help="also train the target on this many whole requests with a pause inside (0: none)")
    train.add_argument("--draft-prefix-clips", type=int, default=0,
                       help="the same for the draft (its 0.55M parameters do better on whole requests "
                            "only, and the target corrects it anyway)")
    train.add_argument("--target-steps", type=int, default=4200)
    train.add_argument("--draft-steps", type=int, default=3000)
    train.add_argument("--target-stop-at", type=int, help="stop the target after N steps of its schedule")
    train.add_argument("--draft-stop-at", type=int, help="stop the draft after N steps of its schedule")
    train.add_argument("--batch-size", type=int, default=32)
    train.add_argument("--lr", type=float, default=2e-3)
    train.add_argument("--warmup", type=int, default=50, help="warmup steps of the learning rate")
    train.add_argument("--ctc-weight", type=float, default=0.5,
                       help="weight of the auxiliary CTC loss on the encoder (0 when fine-tuning: its head "
                            "starts random and would pull a trained encoder off)")
    train.add_argument("--init-from", metavar="DIR",
                       help="fine-tune this saved model (e.g. the shipped assets/models/demo-whisper) instead "
                            "of training from scratch; use with --which target or draft")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--which", choices=("both", "target", "draft"), default="both",
                       help="train one of the pair only (the tokenizer is rebuilt identically either way)")
    train.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto",
                       help="bf16 autocast or fp32 (auto: bf16 where the CPU has native bfloat16)")
    train.add_argument("--room-lead-s", type=float, default=0.6,
                       help="each clip gains up to this much of its own noise before it (0: none), as the "
                            "endpointer's pre-roll holds the room's noise before the first word")
    train.add_argument("--room-tail-s", type=float, default=0.4,
                       help="and up to this much after it (0: none), as a final decode hears the silence")
    train.add_argument("--room-silent-share", type=float, default=0.0,
                       help="frame this share of the clips (0..1) in digital silence instead of noise, as a "
                            "noise-suppressed microphone or a rendered file hands them")
    train.add_argument("--no-augment", action="store_true", help="train on the features as rendered")
    train.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                       help="also save each model every N steps")
    train.set_defaults(func=cmd_train)

    ev = commands.add_parser("eval", help="word error rates on held-out requests and voices")
    ev.add_argument("--split", choices=SPLITS, default="test")
    add_pair_eval_arguments(ev, "demo", "demo-draft")
    ev.add_argument("--kind", choices=KINDS, default="whole",
                    help="what the clips are (`speech_set`): whole requests, prefixes spoken alone, requests "
                         "cut at a pause mid-sentence, or whole requests with a pause inside")
    ev.set_defaults(func=cmd_eval)

    wavs = commands.add_parser("wavs", help="write rendered requests as WAV files (for bench asr --audio)")
    wavs.add_argument("--split", choices=SPLITS, default="test")
    wavs.add_argument("--clips", type=int, default=40)
    wavs.add_argument("--out", required=True)
    wavs.set_defaults(func=cmd_wavs)
    for sub in (train, ev, wavs):
        sub.add_argument("--data-seed", type=int, default=0, help="seed of the dialogue generator")
        sub.add_argument("--threads", type=int, default=2, help="torch CPU threads (0: torch's default)")
    return parser


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv, positive=("clips", "target_steps", "draft_steps", "batch_size"))


if __name__ == "__main__":
    sys.exit(main())

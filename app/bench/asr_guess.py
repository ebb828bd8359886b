"""`foresay bench asr --guess --target tiny.en --audio SET.jsonl`: a CTranslate2 Whisper's
decode of each whole request through CTranslate2's own decoder and through the guess decoder
(`engine/asr/whisper/guess_decoder.py`), without a guess and with the last streaming hop's.

The hop's guess is what the pipeline hands the pause decode: the transcript of the same request
without its last `--hop-ms` of audio. Each decode runs as `transcribe` runs it (its encoder
window, the next one when it loops), the fastest of `--repeats` timed. Reported per method:
per-decode ms (median, p90), WER (scored as `bench asr --windows` scores it), and for the guess
decoder how much of the guess held, its decoder passes, and whether the guess left every
transcript as it was without one.
"""
from __future__ import annotations

import argparse
import json
import platform

import numpy as np

from foresay.app.bench.asr_windows import SAMPLE_RATE, _timed, truth_clips
from foresay.app.bench.wer import scored_words
from foresay.engine.asr.errors import AsrError


def compare_decoders(ctranslate2, guessing, clips, hop_ms: int, repeats: int = 1) -> dict:
    """Rows for "ctranslate2", "guess decoder" and "guess decoder, hop's guess"."""
    from foresay.engine.demo.evaluate_whisper import edit_distance

    hop = int(hop_ms * SAMPLE_RATE / 1000)
    for backend in (ctranslate2, guessing):
        backend.transcribe(clips[0][1])  # warm-up
    rows: dict[str, dict] = {}
    plain: list[tuple[int, ...]] = []
    stats = {"guessed": 0, "accepted": 0, "passes": [], "changed": 0}
    for name in ("ctranslate2", "guess decoder", "guess decoder, hop's guess"):
        ms, errors, words = [], 0, 0
        for i, (_, audio, reference) in enumerate(clips):
            if name == "ctranslate2":
                hypothesis, seconds = _timed(lambda: ctranslate2.transcribe(audio), repeats)
            elif name == "guess decoder":
                hypothesis, seconds = _timed(lambda: guessing.transcribe(audio), repeats)
                plain.append(hypothesis.tokens)
            else:
                guess = guessing.transcribe(audio[:-hop] if len(audio) > 2 * hop else audio).tokens
                hypothesis, seconds = _timed(lambda: guessing.transcribe(audio, guess=guess), repeats)
                stats["guessed"] += len(guess)
                stats["accepted"] += sum(hypothesis.stats.accepted_per_round)
                stats["passes"].append(hypothesis.stats.target_passes)
                stats["changed"] += hypothesis.tokens != plain[i]
            ms.append(seconds * 1000)
            ref = scored_words(reference)
            errors += edit_distance(ref, scored_words(ctranslate2.text.decode(hypothesis.tokens)))
            words += len(ref)
        rows[name] = {"clips": len(ms), "median_ms": round(float(np.median(ms)), 1),
                      "p90_ms": round(float(np.percentile(ms, 90)), 1), "wer": round(errors / words, 4)}
    rows["guess decoder, hop's guess"].update(
        guess_tokens=stats["guessed"], accepted=stats["accepted"],
        passes_median=float(np.median(stats["passes"])), changed_by_the_guess=stats["changed"])
    return rows


def run(args: argparse.Namespace) -> int:
    import torch

    from foresay.app.paths import check_outputs
    from foresay.engine.asr.whisper.faster import FasterWhisperBackend, FasterWhisperConfig

    if args.audio is None:
        raise AsrError("--guess needs --audio: a truth set (set.jsonl or its folder)")
    if args.repeats < 1 or args.threads < 1 or args.hop_ms < 1:
        raise AsrError("--guess needs --repeats, --threads and --hop-ms of at least 1")
    clips = truth_clips(args.audio)
    check_outputs({"--json": args.json}, {"--audio": args.audio}, force=args.force)
    torch.set_num_threads(args.threads)

    def backend(decoder: str):
        return FasterWhisperBackend(FasterWhisperConfig(args.target, cpu_threads=args.threads, decoder=decoder,
                                                        max_new_tokens=args.max_new_tokens))

    guessing = backend("guess")
    if guessing.guess_decoder is None:
        raise AsrError(f"{args.target}: its model file holds no float weights (quantized at conversion), "
                       "so it decodes through CTranslate2 alone")
    rows = compare_decoders(backend("ctranslate2"), guessing, clips, args.hop_ms, args.repeats)
    report = {"decoders": rows, "setup": {
        "target": args.target, "threads": args.threads, "repeats": args.repeats, "hop_ms": args.hop_ms,
        "set": str(args.audio), "clips": len(clips), "machine": f"{platform.machine()} {platform.system()}"}}
    print(f"{'decoder':<28}{'clips':>6}{'median ms':>11}{'p90 ms':>9}{'WER':>8}")
    for name, row in rows.items():
        print(f"{name:<28}{row['clips']:>6}{row['median_ms']:>11}{row['p90_ms']:>9}{row['wer'] * 100:>7.1f}%")
    guessed = rows["guess decoder, hop's guess"]
    print(f"hop's guess: {guessed['accepted']} of {guessed['guess_tokens']} tokens held, median "
          f"{guessed['passes_median']:g} decoder passes a decode; transcripts the guess changed: "
          f"{guessed['changed_by_the_guess']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0

"""`foresay bench asr`: target greedy vs chain speculative vs SpecASR (adaptive, + tree), and
streaming delays. Every speculative method must reproduce the greedy tokens exactly. With
`--windows`, a CTranslate2 Whisper's time and WER by encoder window instead (asr_windows.py); with
`--guess`, its decoders with and without the streaming hop's guess (asr_guess.py)."""
from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass
from pathlib import Path

# Models and torch are imported where used, so `foresay --help` stays fast.
from foresay.app.saving import write_report
from foresay.app.paths import add_force_argument, check_outputs
from foresay.engine.asr.errors import AsrError

SAMPLE_RATE = 16_000
STREAM_SENTENCE = ("please book a table for two at the italian place near the station "
                   "around eight tonight and tell my sister").split()


def register(subparsers) -> None:
    parser = subparsers.add_parser("asr", help="ASR: greedy vs speculative vs SpecASR, streaming delays")
    parser.add_argument("--target", default="tiny-random",
                        help="target Whisper or Qwen3-ASR: hub id, folder, fixture (tiny-random, "
                             "tiny-random-qwen3-asr) or demo model")
    parser.add_argument("--draft", default="tiny-random-draft", help="draft of the same family and vocabulary")
    parser.add_argument("--audio", type=Path, help="a WAV file or a folder of them (default: a built-in clip); files longer than the "
                        "model's window are cut into windows")
    parser.add_argument("--hop-ms", type=int, default=250, help="streaming hop")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the results as JSON")
    add_force_argument(parser)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--attention", default="sdpa", choices=["eager", "sdpa"])
    parser.add_argument("--max-new-tokens", type=int, default=96, help="decode budget per window")
    parser.add_argument("--chain-length", type=int, default=5, help="draft length of the fixed chain method")
    parser.add_argument("--tree-budget", type=int, default=4, help="second-best branches per round")
    parser.add_argument("--stream-tail-tokens", type=int, default=16,
                        help="decode budget per streaming hop (a real hypothesis' uncommitted tail)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="decode each clip this many times per method and keep the fastest (shared machines)")
    parser.add_argument("--windows", type=_windows, metavar="S,S,...",
                        help="instead: time and WER of the CTranslate2 Whisper --target (e.g. tiny.en) by "
                             "encoder window (seconds, e.g. 10,20,30) on the truth set --audio SET.jsonl")
    parser.add_argument("--guess", action="store_true",
                        help="instead: the CTranslate2 Whisper --target (e.g. tiny.en) through CTranslate2's decoder and "
                             "the guess decoder, without and with the last hop's guess, on the truth set --audio SET.jsonl")
    parser.add_argument("--pass-timing", choices=["auto", "skip"], default="auto",
                        help="time medium.en- and tiny.en-shaped passes (auto: only on a CUDA device)")
    parser.set_defaults(func=run)


def _windows(text: str):
    from foresay.app.bench.asr_windows import parse_windows
    return parse_windows(text)


@dataclass(frozen=True)
class Method:
    name: str
    spec: object  # a SpecConfig; None: target greedy


def methods(chain_length: int, tree_budget: int) -> list[Method]:
    from foresay.engine.asr.specasr import SpecConfig

    return [Method("target_greedy", None),
            Method("chain_speculative", SpecConfig(threshold=0.0, max_draft=chain_length, recycle=False)),
            Method("specasr_adaptive", SpecConfig()),
            Method("specasr_tree", SpecConfig(tree_budget=tree_budget))]


def read_wav(path: Path):
    """A WAV or FLAC file as 16 kHz mono float32; a clear error for a bad, empty or unreadable one."""
    from foresay.audio.errors import AudioFileError
    from foresay.audio.files import load_audio

    try:
        return load_audio(path)[0]
    except AudioFileError as exc:
        raise AsrError(str(exc)) from None


def load_clips(audio: Path | None) -> list:
    """Clips of at most 30 s (longer files are cut into windows; `cut_to_window` cuts them again
    to a model whose window is shorter)."""
    from foresay.engine.asr.whisper.models import WINDOW_SECONDS
    from foresay.engine.asr.scripted import SyntheticUtterance

    if audio is None:
        return [SyntheticUtterance(tuple(STREAM_SENTENCE)).audio()]
    files = sorted(audio.glob("*.wav")) if audio.is_dir() else [audio]
    if not files or not all(f.exists() for f in files):
        raise AsrError(f"no WAV audio at {audio}")
    return cut_to_window([read_wav(f) for f in files], WINDOW_SECONDS)


def cut_to_window(clips: list, window_s: float) -> list:
    """Each clip cut into pieces of at most `window_s` (the recognizers' encoder window)."""
    window = int(window_s * SAMPLE_RATE)
    return [clip[at: at + window] for clip in clips for at in range(0, len(clip), window)]


def decode_clip(method: Method, pair, clip, max_new_tokens: int):
    """(tokens, DecodeStats, wall seconds including the encoder passes) of one method on one clip."""
    started = time.perf_counter()
    result = pair.decode(clip, method.spec, max_new_tokens)
    return result.tokens, result.stats, time.perf_counter() - started


def compare_methods(pair, clips, max_new_tokens, chain_length, tree_budget, repeats=1) -> dict:
    from foresay.engine.asr.specasr import SpecConfig

    seconds = sum(len(c) for c in clips) / SAMPLE_RATE
    decode_clip(Method("warmup", None), pair, clips[0], 4)
    decode_clip(Method("warmup", SpecConfig()), pair, clips[0], 4)
    reference, rows = None, {}
    for method in methods(chain_length, tree_budget):
        outputs, target_passes, draft_passes, accepted, rounds, wall = [], 0, 0, 0, 0, 0.0
        for clip in clips:
            runs = [decode_clip(method, pair, clip, max_new_tokens) for _ in range(repeats)]
            tokens, stats, _ = runs[-1]
            elapsed = min(run[2] for run in runs)
            outputs.append(tokens)
            target_passes += stats.target_passes
            draft_passes += stats.draft_passes
            accepted += sum(stats.accepted_per_round)
            rounds += stats.rounds
            wall += elapsed
        reference = reference or outputs
        rows[method.name] = {"target_passes_per_s": round(target_passes / seconds, 2),
                             "draft_passes_per_s": round(draft_passes / seconds, 2),
                             "accepted_per_round": round(accepted / rounds, 3) if rounds else 0.0,
                             "wall_s": round(wall, 4), "identical": outputs == reference}
    for row in rows.values():
        row["speedup_vs_greedy"] = round(rows["target_greedy"]["wall_s"] / row["wall_s"], 3)
        row["speedup_vs_chain"] = round(rows["chain_speculative"]["wall_s"] / row["wall_s"], 3)
    return rows


def run(args: argparse.Namespace) -> int:
    import torch

    from foresay.app.bench.asr_latency import clip_finals, simulate
    from foresay.engine.asr.backends import DecodeLimits
    from foresay.engine.asr.pairs import load_pair
    from foresay.engine.asr.scripted import SyntheticUtterance
    from foresay.engine.asr.specasr import SpecConfig
    from foresay.engine.asr.streaming import StreamingConfig

    if args.windows and args.guess:
        raise AsrError("--windows and --guess are two different benchmarks: give one")
    if args.windows:
        from foresay.app.bench.asr_windows import run as run_windows
        return run_windows(args)
    if args.guess:
        from foresay.app.bench.asr_guess import run as run_guess
        return run_guess(args)
    if min(args.max_new_tokens, args.stream_tail_tokens, args.repeats, args.hop_ms) < 1 or args.threads < 0:
        raise AsrError("--max-new-tokens, --stream-tail-tokens, --repeats and --hop-ms must be at least 1, "
                       "--threads 0 or more")
    if args.threads:
        torch.set_num_threads(args.threads)
    stream_config = StreamingConfig(hop_ms=args.hop_ms)
    clips = load_clips(args.audio)   # inputs first, then outputs, then minutes of model loading
    check_outputs({"--json": args.json}, {"--audio": args.audio}, force=args.force)
    pair = load_pair(args.target, args.draft, args.device, args.attention)
    clips = cut_to_window(clips, min(pair.target.window_seconds, pair.draft.window_seconds))  # e.g. demo: 6 s
    rows = compare_methods(pair, clips, args.max_new_tokens, args.chain_length, args.tree_budget, args.repeats)
    backend = pair.backend(SpecConfig(tree_budget=args.tree_budget), DecodeLimits(args.stream_tail_tokens))
    delays = simulate(backend, SyntheticUtterance(tuple(STREAM_SENTENCE), pause_after=frozenset({5, 13})),
                      stream_config)
    streaming = delays.summary()
    if args.audio is not None:  # real speech: the final transcript of every clip, streamed
        streaming["clips"] = clip_finals(backend, clips, stream_config).summary()
    report = {"methods": rows, "streaming": streaming, "pass_timing": pass_timing(args, pair.family),
              "setup": {"target": args.target, "draft": args.draft, "family": pair.family, "device": args.device,
                        "audio_s": round(sum(len(c) for c in clips) / SAMPLE_RATE, 2), "clips": len(clips),
                        "hop_ms": args.hop_ms, "threads": torch.get_num_threads(), "repeats": args.repeats,
                        "machine": f"{platform.machine()} {platform.system()}",
                        "hops": delays.hops, "hops_skipped": delays.skipped}}
    print_report(report)
    if args.json:
        write_report(args.json, report)
    if not all(row["identical"] for row in rows.values()):
        raise AsrError("a speculative method did not reproduce the target's greedy tokens")
    return 0


def pass_timing(args: argparse.Namespace, family: str = "whisper"):
    import torch

    if args.pass_timing == "skip":
        return "skipped (--pass-timing skip)"
    shapes = "medium.en/tiny.en" if family == "whisper" else "Qwen3-ASR 1.7B/0.6B"
    if not torch.cuda.is_available():
        return f"skipped: no GPU here ({shapes}-shaped passes are timed on a CUDA device only)"
    if not args.device.startswith("cuda"):
        return f"skipped: run with --device cuda to time {shapes}-shaped passes"
    if family != "whisper":
        from foresay.app.bench.llm_asr_pass_timing import time_llm_passes
        return time_llm_passes(args.device)
    from foresay.app.bench.asr_pass_timing import time_passes
    return time_passes(args.device)


def print_report(report: dict) -> None:
    columns = ["target_passes_per_s", "draft_passes_per_s", "accepted_per_round", "wall_s",
               "speedup_vs_greedy", "speedup_vs_chain", "identical"]
    print(f"{'method':<20}" + "".join(f"{c:>21}" for c in columns))
    for name, row in report["methods"].items():
        print(f"{name:<20}" + "".join(f"{str(row[c]):>21}" for c in columns))
    streaming = report["streaming"]
    print(f"streaming (hop {report['setup']['hop_ms']} ms): word delay mean {streaming['word_delay_ms_mean']} ms, "
          f"p90 {streaming['word_delay_ms_p90']} ms; final {streaming['final_delay_ms']} ms after the turn")
    if "clips" in streaming:
        real = streaming["clips"]
        print(f"streaming the {real['clips']} clips: final transcript median {real['final_delay_ms_median']} ms, "
              f"p90 {real['final_delay_ms_p90']} ms, mean {real['final_delay_ms_mean']} ms after the end of each")
    print(f"single passes: {report['pass_timing']}")

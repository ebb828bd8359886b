"""`foresay bench gpu`: every figure of the GPU fast path on this machine, in one JSON file.

Memory bandwidth and the LLM's floor (its weights read once per pass), the decode step and a
verification pass (16-token tail + 32-token draft) after each `--context` of cached tokens
(512 and 4096 by default), the warm-up (capture) time, PredGen-greedy against baseline greedy
(reply identical, speedup), and single Whisper passes of the SpecASR pair, the target's at each
encoder window of `--windows` (10 s and 30 s). Real models are used when they are given and
present; otherwise full-size shapes with random weights (`qwen2.5-7b-random`, Whisper
medium.en/tiny.en).

Runs without the audio stack: it imports engine code, torch, transformers and numpy only (also
as `python -m foresay.app.bench.gpu`). `--device cpu --small` runs small shapes on a CPU.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

SMALL_WHISPER = {"tiny-shape": dict(d_model=64, layers=2, heads=4, ffn=128)}
FRAMES_PER_S = 100  # Whisper's mel frames per second of audio; --small runs a tenth of each window


def measure_bandwidth(device, gib: float, repeats: int = 5) -> float:
    """Device memory bandwidth in TB/s from large copies (bytes read plus bytes written)."""
    import torch

    n = int(gib * 2**30) // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    dst.copy_(src)
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        dst.copy_(src)
    sync()
    seconds = (time.perf_counter() - start) / repeats
    return 2 * n * 4 / seconds / 1e12


def llm_figures(args, bandwidth_tbps: float) -> tuple[dict, dict]:
    """The "llm" and "predgen" sections."""
    from foresay.app.bench.pass_timing import measure_pass_timing
    from foresay.app.bench.predgen import load_prompts, run_methods, summarize
    from foresay.engine.llm.config import LLMConfig
    from foresay.engine.llm.backend import load_llm
    from foresay.engine.predgen.turn import PredGenConfig

    lm = load_llm(LLMConfig(model=args.llm, device=args.device, dtype=args.dtype, cache=args.cache,
                            exact=not args.fast, max_context=args.max_context, threads=args.threads))
    warmup_s = lm.warmup()
    weight_gb = sum(p.numel() * p.element_size() for p in lm.model.parameters()) / 1e9
    floor_ms = weight_gb / bandwidth_tbps  # GB / (TB/s) = ms
    by_context = {}
    for context in args.context:
        timing = measure_pass_timing(lm, context=context, tail=16, draft=32, repeats=args.repeats)
        by_context[str(context)] = {"decode_step_ms": round(timing["decode_step_ms"], 3),
                                    "verify_ms": round(timing["verify_pass_ms_tail16_draft32"], 3),
                                    "ratio_to_floor": round(timing["decode_step_ms"] / floor_ms, 2)}
    first = by_context[str(args.context[0])]  # the top-level figures: the first --context
    llm = {"model": args.llm, "weight_gb": round(weight_gb, 3), "floor_ms": round(floor_ms, 3), **first,
           "context": args.context[0], "by_context": by_context, "warmup_s": round(warmup_s, 2),
           "exact": bool(lm.cache_kind == "static" and lm.exact and lm.static_engine().exact_verified),
           "key_spans": list(lm.static_engine().spans) if lm.cache_kind == "static" else None,
           "fused": lm.fusion is not None}
    conversations = load_prompts(None, args.prompts, multi_turn=False)
    config = PredGenConfig(max_new_tokens=args.max_new_tokens)
    results = run_methods(lm, ["baseline", "greedy"], conversations, config, args.speed / 60)
    greedy = summarize("greedy", results["greedy"], results["baseline"])
    predgen = {"reply_identical": greedy["reply_identical"], "speedup": round(greedy["speedup"], 3)}
    print(f"llm {args.llm} on {lm.device}: {lm.cache_kind} cache{', fused' if lm.fusion else ''}, "
          f"warm-up {warmup_s:.2f} s", file=sys.stderr)
    del lm
    return llm, predgen


def asr_figures(args) -> dict:
    """Single passes of the SpecASR pair after 32 cached tokens: the target's verification (25
    tokens) and the draft's one-token step, through the captured decoder on CUDA, with a 30 s
    window; the target's encoder and verification at each window of `args.windows` (a shorter
    window is a smaller encoder pass and less cross-attention)."""
    from foresay.app.bench.asr_pass_timing import WHISPER_SHAPES

    shapes = (SMALL_WHISPER["tiny-shape"],) * 2 if args.small else (WHISPER_SHAPES["medium.en"],
                                                                     WHISPER_SHAPES["tiny.en"])
    names = ("tiny-shape-random",) * 2 if args.small else ("medium.en-random", "tiny.en-random")
    per_s = FRAMES_PER_S // 10 if args.small else FRAMES_PER_S
    target = time_whisper({**shapes[0], "frames": 30 * per_s}, args.device_obj, args.repeats, verify=25)
    draft = time_whisper({**shapes[1], "frames": 30 * per_s}, args.device_obj, args.repeats, verify=1)
    windows = {}
    for seconds in args.windows:
        timed = target if seconds == 30 else time_whisper({**shapes[0], "frames": seconds * per_s},
                                                          args.device_obj, args.repeats, verify=25)
        windows[str(seconds)] = {"encoder_ms": timed["encoder_ms"], "target_pass_ms": timed["pass_ms"]}
    return {"target": names[0], "draft": names[1], "target_pass_ms": target["pass_ms"],
            "draft_pass_ms": draft["pass_ms"], "encoder_ms": target["encoder_ms"], "by_window_s": windows}


def random_whisper(shape: dict, device):
    """A Whisper of `shape` (d_model, layers, heads, ffn; frames: mel frames of its window, 3000
    unless given) with random weights, on `device` (float16 on CUDA)."""
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    config = WhisperConfig(vocab_size=51864, num_mel_bins=80, d_model=shape["d_model"],
                           encoder_layers=shape["layers"], decoder_layers=shape["layers"],
                           encoder_attention_heads=shape["heads"], decoder_attention_heads=shape["heads"],
                           encoder_ffn_dim=shape["ffn"], decoder_ffn_dim=shape["ffn"],
                           max_source_positions=shape.get("frames", 3000) // 2)
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    with torch.device(device):  # initialized where it runs: a full-size model in seconds
        return WhisperForConditionalGeneration(config).to(dtype).eval()


def time_whisper(shape: dict, device, repeats: int, verify: int, context: int = 32) -> dict:
    """Median ms of the encoder and of one decoder pass of `verify` tokens after `context`."""
    import statistics

    import torch

    from foresay.engine.asr.captured import attach, encode, make_cursor

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    model = random_whisper(shape, device)
    config = model.config
    if device.type == "cuda":
        attach(model)
    features = torch.randn(1, 80, 2 * config.max_source_positions, device=device, dtype=model.dtype)
    encoder, passes = [], []
    with torch.inference_mode():
        for run in range(repeats + 1):  # run 0 warms up
            sync()
            start = time.perf_counter()
            encoder_out = encode(model, features)
            sync()
            encoder.append(time.perf_counter() - start)
            cursor = make_cursor(model, encoder_out)
            cursor.extend(list(range(1000, 1000 + context)))
            sync()
            start = time.perf_counter()
            cursor.extend(list(range(2000, 2000 + verify)))
            sync()
            passes.append(time.perf_counter() - start)
    return {"encoder_ms": round(1000 * statistics.median(encoder[1:]), 3),
            "pass_ms": round(1000 * statistics.median(passes[1:]), 3)}


def tts_figures() -> dict:
    """Zonos is measured by `foresay bench tts --engine zonos` where it is installed; its
    backbone's CUDA graphs are not part of this command yet (null figures)."""
    return {"engine": "zonos", "step_ms": None, "ttfc_ms": None, "rtf": None}


def collect(args: argparse.Namespace) -> dict:
    """Every figure, as the JSON report (`args` as `run` completed them)."""
    import torch

    bandwidth = measure_bandwidth(args.device_obj, 0.0625 if args.small else 1.0)
    device_name = (torch.cuda.get_device_name(args.device_obj) if args.device_obj.type == "cuda"
                   else f"cpu ({torch.get_num_threads()} threads)")
    llm, predgen = llm_figures(args, bandwidth)
    return {"device": device_name, "bandwidth_tbps": round(bandwidth, 4), "llm": llm,
            "asr": asr_figures(args), "tts": tts_figures(), "predgen": predgen}


def complete(args: argparse.Namespace) -> argparse.Namespace:
    """`args` with the defaults that depend on --small filled in and checked, the device picked."""
    import torch

    from foresay.engine.errors import ForesayError
    from foresay.engine.llm.model import pick_device

    if args.speed <= 0:
        raise ForesayError("--speed must be a positive number of characters per minute")
    if args.windows and max(args.windows) > 30:
        raise ForesayError(f"--windows: a Whisper window is at most 30 s, got {max(args.windows)}")
    args.device_obj = pick_device(args.device)
    if args.small:
        args.llm = args.llm or "tiny-random"
        args.context = args.context or [32, 64]
        args.prompts = args.prompts or 2
        args.max_new_tokens = min(args.max_new_tokens, 24)
    args.llm = args.llm or "qwen2.5-7b-random"
    args.context = args.context or [512, 4096]
    args.prompts = args.prompts or 6
    if max(args.context) + 64 > args.max_context:
        raise ForesayError(f"--context {max(args.context)} leaves no room for the timed passes in "
                           f"--max-context {args.max_context}")
    if args.threads:
        torch.set_num_threads(args.threads)
    return args


def run(args: argparse.Namespace) -> int:
    from foresay.app.paths import check_outputs
    from foresay.app.saving import write_report

    check_outputs({"--json": Path(args.json) if args.json else None}, {}, force=args.force)
    report = collect(complete(args))
    print(json.dumps(report, indent=2))
    if args.json:
        write_report(Path(args.json), report)
    return 0


def positive_list(text: str) -> list[int]:
    """"512,4096" -> [512, 4096]; anything else is a one-line argparse error."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive whole numbers separated by commas, got {text!r}")
    return values


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="OUT", help="write the figures as JSON")
    p.add_argument("--force", action="store_true", help="write over an --json file that exists")
    p.add_argument("--device", default="auto", help="auto, cuda, cuda:N or cpu")
    p.add_argument("--small", action="store_true",
                   help="small shapes (tiny-random LLM, tiny Whisper shapes): a quick run, e.g. on a CPU")
    p.add_argument("--llm", help="chat model: hub id, folder or built-in (default qwen2.5-7b-random; "
                   "tiny-random with --small)")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--cache", choices=("auto", "static", "dynamic"), default="auto")
    p.add_argument("--fast", action="store_true", help="static cache without exact mode")
    p.add_argument("--max-context", type=int, default=8192, help="the LLM's context (static cache size)")
    p.add_argument("--context", type=positive_list, help="cached tokens before the timed passes, comma-separated "
                   "(default 512,4096; 32,64 with --small)")
    p.add_argument("--windows", type=positive_list, default=[10, 30],
                   help="Whisper encoder windows in seconds, at most 30, comma-separated (default 10,30)")
    p.add_argument("--prompts", type=int, help="PredGen prompts (default 6; 2 with --small)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--speed", type=float, default=600, help="PredGen's speaking rate, characters per minute")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: default)")
    p.set_defaults(func=run)


def register(benches) -> None:
    p = benches.add_parser("gpu", help="GPU fast path figures: LLM passes vs the bandwidth floor, "
                           "PredGen exactness, Whisper passes", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)


def main(argv: list[str] | None = None) -> int:
    from foresay.engine.errors import ForesayError

    parser = argparse.ArgumentParser(prog="python -m foresay.app.bench.gpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ForesayError as exc:
        print(f"bench gpu: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""`foresay bench predgen`: the PredGen paper's protocol on Foresay's engine.

Each prompt is revealed word by word at a speaking rate on a simulated clock; the model's work
takes real wall time on that same clock (so a slow model falls behind the speaker, as it would
live). `baseline` waits for the full prompt and decodes greedily (plain decoding: the model's
likeliest token, one forward pass per token); the other methods draft the reply while the words
arrive and check the draft against the final prompt. Times are measured from the prompt's last word.

A method is how the draft is checked (its verifier), optionally followed by `+` and how the reply
goes on after that final check (its continuation):
- verifiers: greedy (keeps the draft tokens plain decoding would choose: lossless, the reply is
  baseline's), topk:K (keeps a token among the model's K likeliest: lossy), reflection (the model
  itself judges whether the draft's first sentence still fits: lossy);
- continuations, all lossless: plain steps (one token per pass, the default); jacobi, jacobi:W,
  jacobi:W:fill (Jacobi iteration: up to W tokens guessed from the stale draft, checked and
  corrected in one pass; fill also guesses past the draft's end); specbound, specbound:W:L (small heads after the first L layers draft up to W
  tokens, the rest of the model checks them in one pass); streams, streams:K (the model drafts
  K tokens per pass with stream embeddings; only demo-streams has them).
`jacobi` alone means greedy checking with Jacobi continuation. `--continuation ar|jacobi|specbound|streams`
gives every verifier without its own that continuation.

The table's row for a lossy method says how often its reply differed from baseline's.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from foresay.app.saving import write_report
from foresay.app.bench.continuation import (BEST_CASE, apply_continuation, best_case_methods,
                                            measure_continuation_cost, missed_summary, paired_ttfs_ratio,
                                            specbound_best_case)
from foresay.app.bench.predgen_table import print_table
from foresay.app.bench.pass_timing import measure_pass_timing, measure_turn_cost
from foresay.app.paths import add_force_argument, check_outputs, read_text
from foresay.engine.errors import ForesayError
from foresay.engine.model_registry import SHIPPED_CHAT

DEFAULT_METHODS = "baseline,greedy,topk:3,reflection"


class SimClock:
    """Simulated time: advances with real time while the model works, jumps while it idles."""

    def __init__(self):
        self._offset = -time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() + self._offset

    def restart(self) -> None:
        self._offset = -time.perf_counter()

    def wait_until(self, t: float) -> None:
        now = self()
        if t > now:
            self._offset += t - now


@dataclass
class TurnResult:
    method: str
    ttfs: float
    nfetfs: int
    latency: float
    outcome: str
    first_sentence: str
    reply: list[int]
    overhead_share: float
    accepted_per_update: list[int] = field(default_factory=list)
    continuation: object = None  # the continuation's ContinuationStats up to the first sentence
    drafting: object = None      # SpecBound's SpecBoundStats over the whole reply (else None)


def split_method(method: str) -> tuple[str, str]:
    """(verifier spec, continuation spec) of a method name such as "greedy+jacobi:8" (a best-case
    twin, "greedy+specbound@best", runs the same spec)."""
    verifier, _, continuation = method.removesuffix(BEST_CASE).partition("+")
    if verifier.startswith("jacobi") and not continuation:
        return "greedy", verifier
    return verifier, continuation or "plain"


DEMO_DIALOGUES = 16  # held-out demo dialogues a demo model gets when --limit names no other number


def prompt_source(path: str | None, model: str | None) -> str:
    """Where the prompts come from, in words: the file, the demo domain's held-out dialogues (a
    demo chat model knows nothing else), or the shipped spoken-style prompts."""
    if path is not None:
        return path
    if model in SHIPPED_CHAT:
        return "held-out dialogues of the demo domain (python -m foresay.engine.demo.chat data --split test)"
    return "built-in spoken-style prompts (assets/prompts/bench_prompts.jsonl)"


def demo_conversations(count: int) -> list[list[str]]:
    """The user turns of the first `count` held-out (test split) dialogues of the demo domain."""
    from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig

    return [[t.user for t in d.turns] for d in DialogueGenerator(DomainConfig(), "test").dialogues(count)]


def load_prompts(path: str | None, limit: int | None, multi_turn: bool,
                 model: str | None = None) -> list[list[str]]:
    """Conversations (lists of user turns) from a JSONL file with `turns` or `prompt`; without a
    file, those `prompt_source` names for `model`."""
    if path is None and model in SHIPPED_CHAT:
        return [turns if multi_turn else turns[:1] for turns in demo_conversations(limit or DEMO_DIALOGUES)]
    if path is None:
        text = resources.files("foresay.assets").joinpath("prompts/bench_prompts.jsonl").read_text("utf-8")
        source = "built-in prompts"
    else:
        text = read_text(Path(path), "prompts file")
        source = path
    conversations = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ForesayError(f"{source}:{n}: not valid JSON ({exc.msg})") from None
        turns = item.get("turns") if isinstance(item, dict) else None
        if turns is None and isinstance(item, dict) and "prompt" in item:
            turns = [item["prompt"]]
        if not turns or not all(isinstance(t, str) and t.strip() for t in turns):
            raise ForesayError(f"{source}:{n}: needs \"turns\" (a list of strings) or \"prompt\"")
        conversations.append(turns if multi_turn else turns[:1])
    if not conversations:
        raise ForesayError(f"{source} holds no prompts")
    return conversations[:limit] if limit is not None else conversations


def run_turn(turn, text: str, method: str, chars_per_s: float, clock: SimClock) -> TurnResult:
    """Reveal `text` word by word (the last word only with the final prompt); run `turn`."""
    words = text.split()
    reveal = [len(" ".join(words[:i + 1])) / chars_per_s for i in range(len(words))]
    end = reveal[-1]
    clock.restart()
    if method != "baseline":
        shown = revision = 0
        while clock() < end:
            heard = sum(1 for t in reveal[:-1] if t <= clock())
            if heard > shown:
                shown, revision = heard, revision + 1
                next_word = reveal[heard]
                turn.update(" ".join(words[:heard]), revision, should_stop=lambda: clock() >= next_word)
            else:
                clock.wait_until(reveal[shown])
    clock.wait_until(end)
    record = turn.finalize(text, arrived_at=end, baseline=method == "baseline")
    turn.finish()
    return TurnResult(method, record.ttfs, record.nfetfs, record.audio_latency, record.outcome,
                      record.first_sentence, turn.reply_ids(), record.overhead_share,
                      [u.accepted for u in record.updates if u.verified], record.continuation,
                      getattr(turn.continuation, "bound", None))


def run_methods(lm, methods: list[str], conversations, config, chars_per_s: float
                ) -> dict[str, list[list[TurnResult]]]:
    """Every method on every conversation; the methods take turns prompt by prompt, so a slow
    spell of a shared machine hits them alike."""
    from foresay.engine.predgen.continuation import ContinuationConfig
    from foresay.engine.predgen.strategies import make_continuation
    from foresay.engine.predgen.conversation import Conversation
    from foresay.engine.predgen.turn import PredGenTurn
    from foresay.engine.predgen.verifiers import make_verifier

    specs = {m: ("greedy", "plain") if m == "baseline" else split_method(m) for m in methods}
    verifiers = {m: make_verifier(specs[m][0], lm) for m in methods}
    configs = {m: replace(config, continuation=ContinuationConfig.parse(specs[m][1])) for m in methods}
    convs = {m: Conversation(lm, reserve_tokens=config.max_new_tokens) for m in methods}
    clock = SimClock()
    results: dict[str, list[list[TurnResult]]] = {m: [] for m in methods}
    for turns in conversations:
        for method in methods:
            conv = convs[method]
            conv.reset()
            per_conversation = []
            for index, text in enumerate(turns):
                factory = make_continuation
                if method.endswith(BEST_CASE):  # the baseline's greedy reply to this turn, drafted perfectly
                    factory = specbound_best_case(results["baseline"][-1][index].reply, conv.cache,
                                                  len(conv.prompt(text).ids))
                turn = PredGenTurn(conv, configs[method], verifier=verifiers[method], clock=clock,
                                   continuation_factory=factory)
                per_conversation.append(run_turn(turn, text, method, chars_per_s, clock))
                turn.commit()
            results[method].append(per_conversation)
    return results


def is_lossless(method: str) -> bool:
    """Whether a method's reply is by design the one plain greedy decoding gives: greedy
    verification is, whatever the continuation; topk:K and reflection keep tokens greedy decoding
    would not have chosen."""
    from foresay.engine.predgen.verifiers import parse_verifier

    return method == "baseline" or parse_verifier(split_method(method)[0])[0] == "greedy"


def summarize(method: str, results, baseline) -> dict:
    flat = [r for conv in results for r in conv]
    base = [r for conv in baseline for r in conv]
    latency = statistics.fmean(r.latency for r in flat)
    outcomes: dict[str, int] = {}
    for r in flat:
        outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
    missed = [r for r in flat if r.outcome in ("partial", "rejected")]
    cont = [r.continuation for r in missed if r.continuation is not None]
    return {
        "ttfs_ms": 1000 * statistics.fmean(r.ttfs for r in flat),
        "nfetfs": statistics.fmean(r.nfetfs for r in flat),
        "latency_ms": 1000 * latency,
        "speedup": statistics.fmean(r.latency for r in base) / latency if latency > 0 else float("inf"),
        "first_sentence_identical": statistics.fmean(
            r.first_sentence == b.first_sentence for r, b in zip(flat, base)),
        "reply_identical": statistics.fmean(r.reply == b.reply for r, b in zip(flat, base)),
        "turns": len(flat),
        "replies_differing": sum(r.reply != b.reply for r, b in zip(flat, base)),
        "lossless": is_lossless(method),
        "outcomes": outcomes,
        "overhead_share": statistics.fmean(r.overhead_share for r in flat),
        "accepted_per_update": statistics.fmean(
            [a for r in flat for a in r.accepted_per_update] or [0]),
        # turns whose first sentence the final verification did not confirm: the continuation's work
        "missed_turns": len(missed),
        "nfetfs_missed": statistics.fmean(r.nfetfs for r in missed) if missed else None,
        "continuation_passes_missed": sum(c.passes for c in cont),
        "continuation_tokens_missed": sum(c.tokens for c in cont),
        "continuation_positions_missed": sum(c.computed for c in cont),
        **missed_summary(missed),
    }


def round_trip_summary(trips: list[tuple[int, float]]) -> dict:
    """Median round trips to the server: all requests, and verifications (more than one new token)."""
    verify = [t for n, t in trips if n > 1] or [0.0]
    everything = [t for _, t in trips] or [0.0]
    return {"requests": len(trips), "median_ms": 1000 * statistics.median(everything),
            "verification_median_ms": 1000 * statistics.median(verify),
            "verification_p90_ms": 1000 * sorted(verify)[int(0.9 * (len(verify) - 1))]}


def run(args: argparse.Namespace) -> int:
    from foresay.engine.llm.config import LLMConfig
    from foresay.engine.llm.backend import load_llm
    from foresay.engine.predgen.turn import PredGenConfig

    if args.speed <= 0:
        raise ForesayError("--speed must be a positive number of characters per minute")
    if args.limit is not None and args.limit < 1:
        raise ForesayError(f"--limit must be at least 1 (the number of prompts to use), got {args.limit}")
    if args.turn_cost < 0:
        raise ForesayError(f"--turn-cost must be 0 (off) or a number of turns, got {args.turn_cost}")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods:
        raise ForesayError("--methods names no method")
    if "baseline" not in methods:
        methods.insert(0, "baseline")  # every comparison is against it
    methods = apply_continuation(methods, args.continuation)
    if args.best_case:
        methods += best_case_methods(methods)
    from foresay.engine.predgen.continuation import ContinuationConfig
    for method in methods:  # a bad continuation is named before the model loads
        ContinuationConfig.parse(split_method(method)[1])
    conversations = load_prompts(args.prompts, args.limit, args.multi_turn, args.model)
    check_outputs({"--json": Path(args.json) if args.json else None},
                  {"--prompts": Path(args.prompts) if args.prompts else None}, force=args.force)
    lm = load_llm(LLMConfig(model=args.model, device=args.device, dtype=args.dtype, seed=args.seed,
                            threads=args.threads, cache=args.cache, exact=not args.fast,
                            backend=args.backend, base_url=args.base_url,
                            api_key_env=args.api_key_env, tokenizer=args.tokenizer,
                            chat_template=args.chat_template, gguf_file=args.gguf_file,
                            timeout_s=args.timeout))
    from foresay.engine.predgen.strategies import prepare_continuation
    for method in methods:  # e.g. streams on a model without stream embeddings: said before any turn
        prepare_continuation(ContinuationConfig.parse(split_method(method)[1]), lm)
    served = args.backend == "openai"
    warmup_s = lm.warmup() or 0.0
    config = PredGenConfig(max_new_tokens=args.max_new_tokens, tts_latency_s=args.tts_latency_ms / 1000)
    n_prompts = sum(len(c) for c in conversations)
    cache = "" if served else \
        f", {lm.cache_kind} cache{' (exact)' if lm.cache_kind == 'static' and lm.exact else ''}"
    source = prompt_source(args.prompts, args.model)
    print(f"model {lm.description}{cache}, warm-up {warmup_s:.2f} s; {n_prompts} prompts from {source}, "
          f"spoken at {args.speed:g} characters per minute", file=sys.stderr)
    if served:
        lm.round_trips.clear()
    results = run_methods(lm, methods, conversations, config, args.speed / 60)
    summary = {m: summarize(m, results[m], results["baseline"]) for m in methods}
    plain = next((m for m in methods if split_method(m) == ("greedy", "plain")), None)
    for m in methods:  # paired with plain continuation on the same missed turns
        if plain and m not in (plain, "baseline"):
            summary[m]["ttfs_missed_vs_plain"] = paired_ttfs_ratio(results, plain, m)
    report = {"model": args.model, "device": str(lm.device), "warmup_s": warmup_s, "prompts": n_prompts,
              "prompt_source": source, "tts_latency_ms": args.tts_latency_ms,
              "methods": summary,
              # [outcome, NFETFS] of every turn, by conversation: lets two models be compared on the same turns
              "per_turn": {m: [[[r.outcome, r.nfetfs] for r in conv] for conv in results[m]] for m in methods}}
    if served:
        report["round_trip"] = round_trip_summary(lm.round_trips)
    else:
        report.update(cache=lm.cache_kind, exact=lm.cache_kind == "static" and lm.exact)
        report["pass_timing"] = measure_pass_timing(lm)
    bound = [m for m in methods if split_method(m)[1].startswith("specbound")]
    if args.worst_case and bound:
        report["continuation_cost"] = measure_continuation_cost(lm, [c[0] for c in conversations[:8]],
                                                                split_method(bound[0])[1])
    if args.turn_cost:
        report["turn_cost"] = measure_turn_cost(lm, args.turn_cost, conversations[0][0], 32)
    print_table(report)
    if args.json:
        write_report(Path(args.json), report)
    return 0


def register(benches) -> None:
    p = benches.add_parser("predgen", help="PredGen latency benchmark (the paper's protocol)",
                           description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="small-random",
                   help="hub id, folder, .gguf file or built-in model (tiny-random, small-random, "
                   "tiny-sliding, demo, demo-cllm, demo-streams); with --backend openai, the served model's name")
    p.add_argument("--backend", default="transformers", choices=("transformers", "openai"),
                   help="run the model in this process, or on an OpenAI-compatible server")
    p.add_argument("--base-url", help="the server's URL for --backend openai, e.g. http://host:8000/v1")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the server's API key")
    p.add_argument("--tokenizer", help="the served model's tokenizer (hub id, folder, .gguf, built-in "
                   "name; default: --model)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds one server request may take")
    p.add_argument("--chat-template", metavar="FILE", help="a Jinja chat template (file or string) for "
                   "a model without one")
    p.add_argument("--gguf-file", help="the .gguf file inside the --model folder or hub repository")
    p.add_argument("--prompts", help="JSONL with `turns` (MT-Bench style) or `prompt` per line "
                   "(default: for the demo models demo, demo-cllm and demo-streams, held-out dialogues of "
                   "the demo domain they were trained on; for any other model, built-in spoken-style prompts)")
    p.add_argument("--limit", type=int, help=f"use the first N prompts (a demo model gets {DEMO_DIALOGUES} "
                   "held-out dialogues unless N says otherwise)")
    p.add_argument("--speed", type=float, default=600, help="speaking rate, characters per minute")
    p.add_argument("--methods", default=DEFAULT_METHODS, help="comma-separated: baseline (wait, then plain "
                   "decoding), greedy (lossless), topk:K and reflection (both lossy: the reply can differ from "
                   "baseline's), jacobi (greedy with Jacobi continuation); VERIFIER+CONTINUATION for others, "
                   "e.g. greedy+jacobi:8, topk:3+jacobi:16:fill (see the description above)")
    p.add_argument("--continuation", metavar="KIND", help="how the reply goes on after the final check of the "
                   "draft, for methods that name none: ar (plain steps: one token per forward pass), jacobi "
                   "(guessed tokens checked and corrected together in one pass), specbound (small heads after "
                   "early layers draft tokens, the rest of the model checks them), streams (the model drafts "
                   "several tokens per pass; demo-streams only); options after a colon, e.g. specbound:6:2")
    p.add_argument("--worst-case", action="store_true", help="also time the specbound continuation against "
                   "plain steps (one token per pass) on the same prompts: as configured, without drafting, "
                   "with every draft right and with every draft wrong")
    p.add_argument("--best-case", action="store_true", help="also run each greedy method with the specbound "
                   "continuation a second time, as METHOD@best, with draft heads that know baseline's reply in "
                   "advance: every draft right at the earliest layer, the most drafting could save")
    p.add_argument("--json", metavar="OUT", help="write the results as JSON")
    add_force_argument(p)
    p.add_argument("--tts-latency-ms", type=float, default=150,
                   help="milliseconds of TTS assumed between the first sentence and its first audio (no TTS "
                   "is attached)")
    p.add_argument("--multi-turn", action="store_true",
                   help="run every turn of each prompt, earlier replies kept as history")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--turn-cost", type=int, default=0, metavar="N",
                   help="also measure the cost of turn N against turn 1 of one conversation")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--seed", type=int, default=0, help="seed of a built-in model")
    p.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: default)")
    p.add_argument("--cache", choices=("auto", "static", "dynamic"), default="auto",
                   help="KV cache: static (preallocated, captured passes on CUDA), dynamic, or auto "
                        "(static on CUDA, dynamic on CPU)")
    p.add_argument("--fast", action="store_true",
                   help="static cache without exact mode (one-row decode steps, bucketed verification)")
    p.set_defaults(func=run)

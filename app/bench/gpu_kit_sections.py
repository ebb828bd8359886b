"""The GPU kit's sections: each measures one thing and returns its figures as a dict (or raises
`Skipped` with the reason). `foresay.app.bench.gpu_kit` runs them, each in its own process with
its own time limit. With `Kit.small` every section runs small shapes on a CPU (the kit's dry run).

Full-size shapes have random weights (`qwen2.5-7b-random`, Whisper `medium.en-random` /
`tiny.en-random`, `qwen3-asr-1.7b-random` / `qwen3-asr-0.6b-random`): they give costs, and a
random draft agrees with its random target almost never, so their SpecASR rows are the worst case
of acceptance; the demo models (trained in-house) give real acceptance at small sizes.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# A request of about 5 s (espeak-ng at its default rate), in the demo models' toy domain.
REQUEST_TEXT = "Could you remind me to water the plants in the garden at two thirty this afternoon, please?"
ZONOS_REASON = ("Zonos is not importable: it is not on PyPI, and `packaging/gpu_kit.sh prepare` carries it only "
                "when FORESAY_ZONOS_SOURCE names a checkout (or git directory) of its repository; "
                "`foresay bench tts --engine zonos` measures it where Zonos is installed")


# Characters per second of the simulated speaker in the dry run: PredGen works while the user
# speaks, so a real rate (10/s) makes every prompt last seconds of wall time.
FAST_SPEECH = 200.0


class Skipped(Exception):
    """A section that cannot run here; its message says why (recorded in place of figures)."""


@dataclass(frozen=True)
class Kit:
    """What every section is given."""
    device: str  # cuda or cpu
    small: bool  # small shapes (the CPU dry run)
    work: Path  # scratch folder: fixtures, the request recording, replies
    request: Path  # the spoken request (a WAV), made with espeak-ng when missing
    part: Path | None = None  # where a section run in its own process saves what it has measured so far

    def progress(self, figures: dict) -> None:
        """Save the figures measured so far: a section stopped at its time limit keeps them."""
        print(f"[gpu kit]   so far: {', '.join(figures)}", file=sys.stderr, flush=True)
        if self.part is not None:
            progress_file(self.part).write_text(json.dumps(figures) + "\n")

    def llm(self) -> str:
        return "tiny-random" if self.small else "qwen2.5-7b-random"


def progress_file(part: Path) -> Path:
    """Where a section whose report goes to `part` saves its figures so far (`Kit.progress`)."""
    return part.with_suffix(".progress.json")


def ensure_request(path: Path) -> Path:
    """The request recording at `path`, rendered with espeak-ng if it is not there yet."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(["espeak-ng", "-w", str(path), REQUEST_TEXT], check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise Skipped(f"no request recording at {path} and espeak-ng could not make one ({exc}); "
                      "`packaging/gpu_kit.sh prepare` makes it") from None
    return path


def bench_gpu(kit: Kit) -> dict:
    """`foresay bench gpu`: bandwidth, the LLM's passes vs its floor at 512 and 4096 tokens of
    context, PredGen-greedy (reply identity, speedup), Whisper passes at a 10 s and a 30 s window."""
    import argparse

    from foresay.app.bench import gpu

    parser = argparse.ArgumentParser()
    gpu.add_arguments(parser)
    argv = ["--device", kit.device]
    if kit.small:
        argv += ["--small", "--cache", "static", "--repeats", "1", "--prompts", "1", "--max-new-tokens", "12",
                 "--speed", str(60 * FAST_SPEECH)]
    return gpu.collect(gpu.complete(parser.parse_args(argv)))


def exactness(kit: Kit) -> dict:
    """PredGen-greedy's reply against greedy decoding's, in exact mode, in bfloat16, on the demo
    chat model (the 7B shapes' figure is bench_gpu's `predgen.reply_identical`)."""
    from foresay.app.bench.predgen import load_prompts, run_methods, summarize
    from foresay.engine.llm.backend import load_llm
    from foresay.engine.llm.config import LLMConfig
    from foresay.engine.predgen.turn import PredGenConfig

    lm = load_llm(LLMConfig(model="demo", device=kit.device, dtype="bfloat16", cache="static", exact=True))
    lm.warmup()
    conversations = load_prompts(None, 1 if kit.small else 12, multi_turn=False)
    config = PredGenConfig(max_new_tokens=16 if kit.small else 48)
    # 5x a speaking rate: identity does not need real pacing, and 12 prompts stay within a minute
    results = run_methods(lm, ["baseline", "greedy"], conversations, config, FAST_SPEECH if kit.small else 50.0)
    greedy = summarize("greedy", results["greedy"], results["baseline"])
    return {"model": "demo", "dtype": "bfloat16", "cache": lm.cache_kind, "exact": lm.exact,
            "exact_verified": bool(lm.static_engine().exact_verified), "prompts": len(conversations),
            "reply_identical": greedy["reply_identical"],
            "first_sentence_identical": greedy["first_sentence_identical"]}


def profile(kit: Kit) -> dict:
    """The chat model's decode step kernel by kernel (eager, the kernels its graph replays) at two
    contexts, beside the captured step's wall time: what keeps the step above its floor; then the
    same for SpecASR's target verification pass (medium.en shapes) at a 30 s and a 10 s window."""
    import torch

    from foresay.app.bench.asr_pass_timing import WHISPER_SHAPES
    from foresay.app.bench.gpu import FRAMES_PER_S, SMALL_WHISPER
    from foresay.app.bench.pass_profile import profile_pass, profile_whisper_pass
    from foresay.app.bench.pass_timing import measure_pass_timing
    from foresay.engine.llm.backend import load_llm
    from foresay.engine.llm.config import LLMConfig

    lm = load_llm(LLMConfig(model=kit.llm(), device=kit.device, cache="static", exact=True))
    lm.warmup()
    engine = lm.static_engine()
    figures = {"llm": kit.llm(), "cache": lm.cache_kind, "exact": lm.exact, "key_spans": list(engine.spans),
               "split_kernel": engine.attention_kernel, "by_context": {}}
    for context in (32, 64) if kit.small else (512, 4096):
        graphed = measure_pass_timing(lm, context=context, repeats=3 if kit.small else 10)
        figures["by_context"][str(context)] = {"graphed_step_ms": round(graphed["decode_step_ms"], 3),
                                               **profile_pass(lm, context, repeats=2 if kit.small else 5)}
    del lm
    shape, per_s = (SMALL_WHISPER["tiny-shape"], FRAMES_PER_S // 10) if kit.small else \
        (WHISPER_SHAPES["medium.en"], FRAMES_PER_S)
    figures["whisper"] = {"model": "tiny-shape-random" if kit.small else "medium.en-random", "by_window_s": {
        str(seconds): profile_whisper_pass({**shape, "frames": seconds * per_s}, torch.device(kit.device),
                                           repeats=2 if kit.small else 5)
        for seconds in (30, 10)}}
    return figures


class LoadTimes:
    """Observer of the pipeline's load steps: seconds spent in each (the warm-up among them)."""

    def __init__(self):
        self.marks: list[tuple[float, str]] = []

    def __call__(self, event) -> None:
        from foresay.engine.events import LoadProgress

        if isinstance(event, LoadProgress) and event.component == "pipeline":
            self.marks.append((time.perf_counter(), event.label))

    def seconds(self) -> dict:
        return {label: round(later - at, 2) for (at, label), (later, _) in zip(self.marks, self.marks[1:])}


def replay(kit: Kit) -> dict:
    """`foresay replay` of the spoken request through the whole pipeline, paced in real time: the
    7B-shaped LLM with its static cache, the medium.en/tiny.en-shaped SpecASR pair, espeak-ng.
    Per turn the latencies of a live turn; the load and warm-up times."""
    import asyncio
    import shutil

    from foresay.app.commands import replay as run_replay
    from foresay.app.config import load_settings

    if shutil.which("espeak-ng") is None:
        raise Skipped("espeak-ng (the voice of the replay) is not on PATH: `packaging/gpu_kit.sh prepare` "
                      "carries one")
    request = ensure_request(kit.request)
    device = kit.device
    target, draft = ("tiny-random", "tiny-random-draft") if kit.small else ("medium.en-random", "tiny.en-random")
    overrides = [f"llm.model={kit.llm()}", f"llm.device={device}", "llm.cache=static", f"asr.target={target}",
                 f"asr.draft={draft}", f"asr.device={device}", "tts.engine=espeak", "audio.echo_canceller=none"]
    if kit.small:  # random fixtures never stop by themselves: short decodes keep the dry run short
        overrides += ["asr.limits.max_new_tokens=24", "predgen.max_new_tokens=16"]
    config = kit.work / "replay-config.toml"
    config.write_text("")
    settings = load_settings(config, "gpu-24gb", overrides)
    loads = LoadTimes()
    started = time.perf_counter()
    metrics = asyncio.run(run_replay(settings, request, kit.work / "reply.wav", [loads], realtime=not kit.small))
    keys = ("outcome", "endpoint_delay_ms", "asr_final_ms", "ttfs_ms", "nfetfs", "tts_first_chunk_ms",
            "audio_latency_ms", "voice_to_voice_ms")
    return {"llm": kit.llm(), "asr": f"{target} + {draft}", "cache": "static", "realtime": not kit.small,
            "load_s": loads.seconds(), "wall_s": round(time.perf_counter() - started, 2),
            "turns": [{k: m.get(k) for k in keys} for m in metrics]}


def _final_rows(kit: Kit, pairs: list[tuple[str, str]], greedy_backend: str, spec_backend: str) -> dict:
    """Per pair: the final transcript of the request by the target's greedy decoding and by SpecASR,
    through the app's backends (captured passes on CUDA); medians of `repeats` warm runs. A pair
    that fails gets its error as its row; the section fails only when every pair does."""
    from foresay.app.bench.asr import read_wav

    audio = read_wav(ensure_request(kit.request))
    rows = {}
    for target, draft in pairs:
        try:
            rows[f"{target}+{draft}"] = _final_row(kit, audio, target, draft, greedy_backend, spec_backend)
        except Exception as exc:  # one pair's failure is its row; the others keep theirs
            rows[f"{target}+{draft}"] = {"error": f"{type(exc).__name__}: {exc}"}
    if all("error" in row for row in rows.values()):
        raise RuntimeError("; ".join(f"{name}: {row['error']}" for name, row in rows.items()))
    return rows


def _final_row(kit: Kit, audio, target: str, draft: str, greedy_backend: str, spec_backend: str) -> dict:
    from foresay.engine.asr.backends import DecodeLimits
    from foresay.engine.asr.factory import AsrConfig, build_backend

    repeats = 1 if kit.small else 5
    timed = {}
    for backend in (greedy_backend, spec_backend):
        asr = build_backend(AsrConfig(target=target, draft=draft, backend=backend, device=kit.device,
                                      limits=DecodeLimits(max_new_tokens=48)))
        asr.warmup()
        asr.transcribe(audio)
        walls, hypothesis = [], None
        for _ in range(repeats):
            started = time.perf_counter()
            hypothesis = asr.transcribe(audio)
            walls.append(time.perf_counter() - started)
        timed[backend] = (1000 * statistics.median(walls), hypothesis)
        del asr
    (greedy_ms, greedy), (spec_ms, spec) = timed[greedy_backend], timed[spec_backend]
    accepted = spec.stats.accepted_per_round
    return {
        "audio_s": round(len(audio) / 16000, 2), "tokens": len(greedy.tokens),
        "greedy_ms": round(greedy_ms, 2), "specasr_ms": round(spec_ms, 2),
        "speedup": round(greedy_ms / spec_ms, 3), "identical": spec.tokens == greedy.tokens,
        "first_difference": first_difference(greedy.tokens, spec.tokens),
        "target_passes": spec.stats.target_passes, "draft_passes": spec.stats.draft_passes,
        "accepted_per_round": round(sum(accepted) / len(accepted), 3) if accepted else 0.0}


def first_difference(reference, tokens) -> int | None:
    """Where `tokens` first leave `reference` (a late one is a near-tie rounded the other way, an
    early one a fault); None: identical."""
    if list(tokens) == list(reference):
        return None
    return next((i for i, (a, b) in enumerate(zip(reference, tokens)) if a != b), min(len(reference), len(tokens)))


# (target, draft) pairs of the SpecASR finals: on a GPU, and in the dry run (small).
WHISPER_PAIRS = {"gpu": [("medium.en-random", "tiny.en-random"), ("demo", "demo-draft")],
                 "small": [("tiny-random", "tiny-random-draft")]}
LLM_ASR_PAIRS = {"gpu": [("qwen3-asr-1.7b-random", "qwen3-asr-0.6b-random"), ("demo-llm", "demo-llm-draft")],
                 "small": [("tiny-random-qwen3-asr", "tiny-random-qwen3-asr-draft")]}


def asr_final(kit: Kit) -> dict:
    """SpecASR's final transcript of a 5 s request against the target's greedy decoding: Whisper
    medium.en/tiny.en shapes (cost, no agreement) and the demo pair (real agreement)."""
    return _final_rows(kit, WHISPER_PAIRS["small" if kit.small else "gpu"], "greedy", "specasr")


def qwen3_asr(kit: Kit) -> dict:
    """The same for Qwen3-ASR, 0.6B drafting for 1.7B (shapes, random weights; bfloat16), and the
    demo LLM-ASR pair."""
    return _final_rows(kit, LLM_ASR_PAIRS["small" if kit.small else "gpu"], "llm-greedy", "llm-specasr")


def _missed_turns(kit: Kit, model: str, continuation: str) -> dict:
    """TTFS of `continuation` against plain steps on the held-out requests whose first sentence
    the final verification did not confirm (engine.demo.streams_eval)."""
    from foresay.engine.demo.streams_eval import held_out_requests, measure
    from foresay.engine.llm.backend import load_llm
    from foresay.engine.llm.config import LLMConfig

    # both continuations read and crop the transformers cache between steps: the dynamic one
    lm = load_llm(LLMConfig(model=model, device=kit.device, cache="dynamic"))
    lm.warmup()
    requests = held_out_requests(6 if kit.small else 40, seed=0)  # 40 x 2 fit the section's minute
    report = measure({model: lm}, {"plain": (model, "plain"), continuation: (model, continuation)}, requests,
                     repeats=1 if kit.small else 2, progress=lambda line: None)
    report.update(model=model, cache=lm.cache_kind)
    return report


def specbound(kit: Kit) -> dict:
    """SpecBound (early-exit self-drafting) on missed turns of the demo chat model."""
    return _missed_turns(kit, "demo", "specbound")


def streams(kit: Kit) -> dict:
    """Speculative Streaming on missed turns of demo-streams."""
    return _missed_turns(kit, "demo-streams", "streams")


def zonos(kit: Kit) -> dict:
    """Zonos v0.1 transformer with random weights at its real shapes, through Foresay's engine
    (`zonos_timing`): Zonos's own eager step, then Foresay's static step (captured on CUDA)."""
    return _zonos(kit, ("eager", "captured"))


def zonos_compiled(kit: Kit) -> dict:
    """The same with Zonos's own decode step compiled (`[tts.zonos] compile = true`): a section of its
    own, since the compile alone takes minutes. Skipped off CUDA."""
    if not kit.device.startswith("cuda"):
        raise Skipped("the kit times Zonos's compiled step on CUDA only")
    return _zonos(kit, ("compiled",))


def _zonos(kit: Kit, variants: tuple[str, ...]) -> dict:
    import importlib.util

    if importlib.util.find_spec("zonos") is None:
        raise Skipped(ZONOS_REASON)
    from foresay.app.bench.zonos_timing import time_random_zonos

    return time_random_zonos(kit.device, kit.small, kit.work, kit.progress, variants)

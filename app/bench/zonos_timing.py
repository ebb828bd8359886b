"""The GPU kit's Zonos timing: Zonos v0.1 transformer with random weights at its real shapes
(`zonos_random`), through Foresay's engine: load and warm-up time, first chunk cold and from a
prepared sentence, RTF, and the generation step against the one frame of audio (11.6 ms) it must
keep up with. Needs Zonos importable (the kit carries it: docs/gpu.md)."""
from __future__ import annotations

import asyncio
import gc
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

FRAME_MS = 1000 * 512 / 44100  # one codec frame of audio: the step real time allows
VARIANTS = ("eager", "captured", "compiled")


def time_random_zonos(device: str, small: bool, work: Path,
                      progress: Callable[[dict], None] = lambda figures: None,
                      variants: tuple[str, ...] = ("eager", "captured")) -> dict:
    """The figures of each of `variants` (`VARIANTS`: Zonos's own eager step, Foresay's static step
    captured as a CUDA graph, the default there, or Zonos's step compiled), with `progress(figures
    so far)` after each warm-up (its time, which holds any compile or capture) and after each
    variant: a compile that outlasts the caller's time limit still says how long it has taken. A
    variant that fails is recorded as text (`<variant>_error`). `compiled` is timed on CUDA only."""
    from foresay.app.bench.tts import DEFAULT_TEXT, measure
    from foresay.app.bench.zonos_random import offline_zonos, random_zonos_folder
    from foresay.engine.tts.zonos import ZonosConfig, ZonosEngine

    folder = random_zonos_folder(work / "zonos-random", small=small)

    report: dict = {}

    def figures(name: str) -> dict:
        # random weights rarely end a sentence: every synthesis runs to max_seconds (1.5 s: 129 steps)
        config = ZonosConfig(model="transformer", model_id=str(folder), device=device,
                             max_seconds=0.5 if small else 1.5, graphs=name == "captured",
                             compile=name == "compiled")
        engine = ZonosEngine(config)
        started = time.perf_counter()
        asyncio.run(engine.warmup())
        warmup_s = time.perf_counter() - started
        report[name] = {"load_and_warmup_s": round(warmup_s, 1)}
        progress(report)
        steps_ms = _steps(engine, DEFAULT_TEXT)
        result = asdict(asyncio.run(measure(engine, DEFAULT_TEXT, repeats=1 if small else 2)))
        step = statistics.median(steps_ms)
        result.update(model=f"Zonos-v0.1-transformer shapes, random weights{' (small)' if small else ''}",
                      variant=name, load_and_warmup_s=round(warmup_s, 1),
                      step_ms=round(step, 3), step_p90_ms=round(statistics.quantiles(steps_ms, n=10)[-1], 3),
                      frame_ms=round(FRAME_MS, 2), step_vs_frame=round(step / FRAME_MS, 3),
                      steps_timed=len(steps_ms))
        del engine
        gc.collect()
        return result

    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise ValueError(f"unknown Zonos variant(s) {sorted(unknown)}; the variants are {', '.join(VARIANTS)}")
    with offline_zonos(small):
        for name in variants:
            if name == "compiled" and not device.startswith("cuda"):
                continue  # the static step runs off CUDA too (eagerly): the dry run checks its path
            try:
                report[name] = figures(name)
            except Exception as exc:  # noqa: BLE001 - the other variants keep their figures
                report.pop(name, None)
                report[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:1000]
            progress(report)
    return report


def _steps(engine, text: str) -> list[float]:
    """Milliseconds between consecutive generation steps of one synthesis (the first ten left
    out: prefill and warm-up)."""
    import torch

    model = engine.backend.model
    stamps: list[float] = []

    def on_step(frame, step: int, max_steps: int) -> bool:
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        stamps.append(time.perf_counter())
        return True

    engine.generate(text, engine.config.voice, on_step)
    gaps = [1000 * (b - a) for a, b in zip(stamps, stamps[1:])][10:]
    if len(gaps) < 2:
        raise RuntimeError(f"Zonos generated {len(stamps)} steps; too few to time")
    return gaps

"""Where a chat-model pass of the static KV cache, or a Whisper decoder pass, spends its time,
kernel by kernel.

A captured pass replays as one graph launch, so a profiler sees no kernels in it; the same pass
run eagerly launches the very kernels the graph holds. `profile_pass` times those kernels (on a
CPU: the operators) over a few passes after `context` cached tokens and groups them into
attention, matrix products and the rest, so a decode step's distance from its bandwidth floor
can be assigned to a cause. The kernel total beside the graph's wall time says how much of that
wall time is launch overhead (none, when captured) and how much is the kernels themselves.
"""
from __future__ import annotations

import re

# kernel-name fragments of each group (cuBLAS/CUTLASS/cuDNN/PyTorch names; case-insensitive)
GROUPS = (("attention", r"fmha|flash|attention|efficient|sdpa|softmax"),
          ("matmul", r"gemm|gemv|nvjet|cutlass|sm90_|matmul|\bmm\b|addmm|linear"))


def group_of(name: str) -> str:
    for group, pattern in GROUPS:
        if re.search(pattern, name, re.IGNORECASE):
            return group
    return "other"


def kernel_times(prof, device: str) -> dict[str, tuple[float, int]]:
    """name -> (total microseconds, calls) of the device's kernels (a CPU: of the operators'
    own time, so nested operators are not counted twice)."""
    from torch.autograd import DeviceType

    totals: dict[str, list] = {}
    if device == "cuda":
        for event in prof.events():
            if event.device_type == DeviceType.CUDA:
                entry = totals.setdefault(event.name, [0.0, 0])
                entry[0] += event.time_range.elapsed_us()
                entry[1] += 1
        if not totals:  # a profiler that lists no kernel events: the operators' own device time
            for event in prof.key_averages():
                us = getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0)
                if us > 0:
                    totals[event.key] = [us, event.count]
    else:
        for event in prof.key_averages():
            if event.self_cpu_time_total > 0:
                totals[event.key] = [event.self_cpu_time_total, event.count]
    return {name: (us, calls) for name, (us, calls) in totals.items()}


def _profiled(run, device: str, repeats: int, top: int) -> dict:
    """Kernel time per call of `run` (warmed up twice first): total, kernels launched, by group,
    and the `top` kernels."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(2):  # warm-up: kernel selection, allocator
        run()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(repeats):
            run()
    times = kernel_times(prof, device)
    total = sum(us for us, _ in times.values()) / repeats
    groups: dict[str, float] = {}
    for name, (us, _) in times.items():
        groups[group_of(name)] = groups.get(group_of(name), 0.0) + us / repeats
    ranked = sorted(times.items(), key=lambda item: -item[1][0])[:top]
    return {"kernel_ms_per_pass": round(total / 1000, 3),
            "kernels_per_pass": round(sum(calls for _, calls in times.values()) / repeats, 1),
            "by_group_ms": {g: round(us / 1000, 3) for g, us in sorted(groups.items())},
            "top": [{"kernel": name[:120], "ms_per_pass": round(us / repeats / 1000, 4),
                     "calls_per_pass": round(calls / repeats, 1)} for name, (us, calls) in ranked]}


def profile_whisper_pass(shape: dict, device, verify: int = 25, context: int = 32, repeats: int = 5,
                         top: int = 12) -> dict:
    """Kernel time of one decoder pass of `verify` tokens after `context`, for a random Whisper of
    `shape` (`app.bench.gpu.random_whisper`; its window from shape["frames"]), through the static
    decoder the app captures on CUDA, run eagerly."""
    import torch

    from foresay.app.bench.gpu import random_whisper
    from foresay.engine.asr.captured import CapturedDecoder, StaticCursor, encode

    model = random_whisper(shape, device)
    with torch.inference_mode():
        features = torch.randn(1, 80, 2 * model.config.max_source_positions, device=device, dtype=model.dtype)
        cursor = StaticCursor(CapturedDecoder(model, capture=False), encode(model, features))
        prefix = list(range(1000, 1000 + context))
        cursor.extend(prefix)

        def run():
            cursor.extend(list(range(2000, 2000 + verify)))
            cursor.sync(prefix)  # back to the context (less its last token): the same pass again

        figures = _profiled(run, device.type, repeats, top)
    return {"frames": 2 * model.config.max_source_positions, "context": context, "tokens": verify,
            "rows": max(cursor.captured.rows), **figures}


def profile_pass(lm, context: int, tokens: int = 1, repeats: int = 5, top: int = 12) -> dict:
    """Kernel time per pass of `tokens` new tokens after `context` cached ones, run eagerly
    through the static cache: total, by group, and the `top` kernels."""
    from foresay.app.bench.pass_timing import probe_ids
    from foresay.engine.llm.static_cache import StaticKVCache

    engine = lm.static_engine()
    cache = StaticKVCache(engine, capture=False)
    ids = probe_ids(lm, context + tokens)
    cache.append(ids[:context], keep_logits=1)

    def run():
        cache.append(ids[context:], keep_logits=1)
        cache.crop(context)

    figures = _profiled(run, lm.device.type, repeats, top)
    return {"context": context, "tokens": tokens, "rows": max(engine.sizes or (tokens,)),
            "key_span": cache.span_for(context + tokens), **figures}

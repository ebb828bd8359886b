"""Captured passes: a fixed-shape computation recorded once as a CUDA graph and replayed.

A model pass launches hundreds of small kernels from Python; on a GPU that launch overhead, not
the arithmetic, decides a decode step's time. A CUDA graph records the kernels once (with the
addresses of their input, output and cache tensors) and replays them in one launch. The caller
owns static input tensors, writes each pass's values into them in place, calls the pass, and
reads the static output before the next call overwrites it.

Without CUDA (or when capture fails) the same callable runs eagerly: the code path and the
numbers are those of the graph, only the launches differ.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

import torch

log = logging.getLogger(__name__)


class EagerPass:
    """The pass run as plain PyTorch calls (CPU, MPS, or a CUDA device where capture failed)."""
    captured = False

    def __init__(self, fn: Callable[[], torch.Tensor]):
        self.fn = fn
        self.capture_seconds = 0.0

    def __call__(self) -> torch.Tensor:
        return self.fn()


class GraphPass:
    """The pass recorded as a CUDA graph; calling it replays the graph and returns the static
    output tensor (overwritten by the next replay: copy what you keep)."""
    captured = True

    def __init__(self, fn: Callable[[], torch.Tensor], pool=None, warmup_runs: int = 2):
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA graphs need a CUDA device")
        start = time.perf_counter()
        # Warm-up on a side stream, as PyTorch requires before capture (lazy init, autotuning,
        # the caching allocator's first blocks), then record.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup_runs):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        # thread_local: models load and warm up in worker threads; another thread's CUDA work
        # during this capture must neither fail nor be recorded
        with torch.cuda.graph(self.graph, pool=pool, capture_error_mode="thread_local"):
            self.output = fn()
        torch.cuda.synchronize()
        self.capture_seconds = time.perf_counter() - start

    def __call__(self) -> torch.Tensor:
        self.graph.replay()
        return self.output


def static_passes_supported() -> bool:
    """The static caches hand transformers' layers their own cache objects and 4-D masks, which
    transformers 5 takes as they are (4.x built its masks and caches differently)."""
    import transformers
    return int(transformers.__version__.split(".")[0]) >= 5


def graph_pool(device: torch.device):
    """A new memory pool for the graphs of one owner (they never run concurrently), or None.

    Give each owner whose graphs are dropped together (a KV cache, a decoder) a pool of its own:
    PyTorch keeps a pool's entry while its freed blocks stay cached, after its last graph is gone,
    and a capture into such a pool fails an internal assertion (`use_count > 0`) and leaves the
    CUDA generator in capture mode, which breaks every later random op on the device."""
    return torch.cuda.graph_pool_handle() if device.type == "cuda" and torch.cuda.is_available() else None


def make_pass(fn: Callable[[], torch.Tensor], device: torch.device, pool=None,
              capture: bool = True) -> EagerPass | GraphPass:
    """A graph on CUDA (when `capture`), else the eager pass.

    A capture that fails (an operation that synchronizes with the host, an unsupported kernel)
    falls back to the eager pass with a warning: slower, never wrong, since the eager pass runs
    the very same function.
    """
    if not (capture and device.type == "cuda" and torch.cuda.is_available()):
        return EagerPass(fn)
    try:
        return GraphPass(fn, pool)
    except Exception as exc:  # noqa: BLE001 - any capture failure leaves the eager pass correct
        log.warning("CUDA graph capture failed (%s: %s); this pass runs eagerly", type(exc).__name__, exc)
        torch.cuda.synchronize()
        return EagerPass(fn)

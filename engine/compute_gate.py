"""One processor (CPU cores or a GPU) that stages share, and who goes first on it.

Urgent work (an ASR decode: the user waits for its transcript) claims the gate from the moment
it is asked for, while it still waits for its worker thread, until it is done; it never waits
for anyone. Background work (PredGen extending its draft between partial transcripts) asks
`should_yield()` between its steps and stops while any urgent claim is open, so partials keep
their cadence. Work that must not be starved (the final verification) simply does not ask.

Background work does not hold the gate while it steps: on a CPU each stage has its own share of
the cores, and an urgent decode waiting for a step to end would only be later. Thread-safe; a
claim never blocks, so it may be taken on the event loop around an awaited decode.

    gate = ComputeGate()                    # the composition root makes one per processor
    with gate.claim():                      # the ASR stage, around a decode
        partial = await run_in_worker(decode)
    turn.update(prompt, should_stop=gate.should_yield)   # PredGen, between extension steps
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator


class ComputeGate:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claims = 0

    @contextlib.contextmanager
    def claim(self) -> Iterator[None]:
        """Urgent work runs inside: background work yields until every claim is released (also
        when the work raises)."""
        with self._lock:
            self._claims += 1
        try:
            yield
        finally:
            with self._lock:
                self._claims -= 1

    def should_yield(self) -> bool:
        """Whether background work should stop now: urgent work holds or waits for the processor."""
        return self._claims > 0

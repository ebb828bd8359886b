"""The one contract every pipeline stage follows, and the bus that routes events between them.

A stage declares the event types it `consumes`; the bus calls its `handle(event)` for each
(on the event loop: it must not block, model work goes to the stage's own worker thread) and
the stage emits what it produces through the `emit` it was given. `start()` loads and warms
up, `cancel()` drops work in flight, `close()` releases threads and devices. Stages never see
each other: only the bus knows who consumes what, by event type, so a new event type needs no
new branch anywhere.

    bus = EventBus(observers=[print])
    asr = StreamingAsr(backend, bus.emit)
    bus.connect(asr)          # now SpeechStarted / UserAudio / TurnEnded reach asr.handle

The base class does the plumbing, so a stage writes only its own logic: its worker thread
(`run_in_worker`, `emit_from_worker`), the tasks it spawns (`spawn`: kept until done, cancelled
by `cancel()` and `close()`, a failure reported once as a StatusMessage), and `settle()`, which
waits until the work the stage took on so far is done.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, ClassVar

from foresay.engine.events import Event, StatusMessage

log = logging.getLogger(__name__)

Emit = Callable[[Event], None]


def _drop(event: Event) -> None:
    pass


class Stage:
    """Base class: override `consumes` and `handle`; `start`, `cancel`, `close` as needed
    (calling the base's `cancel` and `close`)."""

    consumes: ClassVar[tuple[type[Event], ...]] = ()
    name: ClassVar[str] = "stage"
    worker: ClassVar[str] = ""  # names the stage's worker thread ("foresay-<worker>"); one thread, in order

    def __init__(self, emit: Emit | None = None):
        self.emit: Emit = emit or _drop
        self._tasks: set[asyncio.Task] = set()
        self._lasting: set[asyncio.Task] = set()   # run until cancelled: settle() does not wait for them
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def handle(self, event: Event) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        """Load and warm up, so the first real turn costs what every turn costs."""

    async def caught_up(self) -> None:
        """Wait while more input waits for this stage than it can take at once (a file replayed
        faster than real time; live input never gets this far ahead). At once by default."""

    async def settle(self) -> None:
        """Wait until every task spawned so far (and any it spawns) is done."""
        while pending := self._tasks - self._lasting:
            await asyncio.wait(pending)

    async def cancel(self) -> None:
        """Drop all work in flight (a new conversation, shutting down)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    def close(self) -> None:
        """Release the worker thread (waiting for the step it runs) and cancel the tasks left;
        called once, after the last event."""
        for task in self._tasks:
            task.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

    # --- plumbing for the stages ------------------------------------------------------------

    def spawn(self, coro, *, lasting: bool = False) -> asyncio.Task:
        """Run `coro` as a task of this stage. `lasting`: it runs until cancelled (e.g. a loop
        per turn), so `settle()` does not wait for it."""
        self._loop = asyncio.get_running_loop()
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        if lasting:
            self._lasting.add(task)
        task.add_done_callback(self._task_done)
        return task

    async def run_in_worker(self, fn, *args, **kwargs):
        """`fn(*args, **kwargs)` on the stage's worker thread (one thread: calls run in order)."""
        self._loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"foresay-{self.worker or 'stage'}")
        return await self._loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def emit_from_worker(self, event: Event) -> None:
        """Emit from the worker thread: the event goes out on the event loop."""
        self._loop.call_soon_threadsafe(self.emit, event)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        self._lasting.discard(task)
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        log.error("the %s failed", self.name, exc_info=exc)
        self.emit(StatusMessage(0, time.monotonic(), f"the {self.name} failed: {exc}", "error"))


class EventBus:
    """Routes each event, in emission order, to the observers and to the stages consuming its
    type (or a base type). An event emitted while another is being routed waits its turn, so
    every stage sees events in one global order. Event loop thread only."""

    def __init__(self, observers: list[Callable[[Event], None]] = ()):
        self.observers = list(observers)
        self._routes: dict[type, list[Callable[[Event], None]]] = collections.defaultdict(list)
        self._queue: collections.deque[Event] = collections.deque()
        self._routing = False

    def connect(self, stage: Stage) -> None:
        for kind in stage.consumes:
            self.subscribe(kind, stage.handle)

    def subscribe(self, kind: type, handler: Callable[[Event], None]) -> None:
        self._routes[kind].append(handler)

    def emit(self, event: Event) -> None:
        """Routes `event` (and what its handlers emit). A handler that raises does not keep the
        event from the handlers after it, nor the queued events from theirs (a stage must never
        see half a turn); the first error is raised here once everything was routed."""
        self._queue.append(event)
        if self._routing:
            return
        self._routing = True
        failure: Exception | None = None
        try:
            while self._queue:
                try:
                    self._route(self._queue.popleft())
                except Exception as exc:
                    failure = failure or exc
        finally:
            self._routing = False
        if failure is not None:
            raise failure

    def _route(self, event: Event) -> None:
        for observer in self.observers:
            try:
                observer(event)
            except Exception:  # an observer's bug (a view, a log) must not stop the conversation
                log.exception("observer %r failed on %s", observer, type(event).__name__)
        failure: Exception | None = None
        for kind in type(event).__mro__:
            for handler in self._routes.get(kind, ()):
                try:
                    handler(event)
                except Exception as exc:
                    failure = failure or exc
        if failure is not None:
            raise failure

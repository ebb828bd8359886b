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
"""
from __future__ import annotations

import collections
import logging
from typing import Callable, ClassVar

from foresay.engine.events import Event

log = logging.getLogger(__name__)

Emit = Callable[[Event], None]


class Stage:
    """Base class: override `consumes` and `handle`; `start`, `cancel`, `close` as needed."""

    consumes: ClassVar[tuple[type[Event], ...]] = ()
    name: ClassVar[str] = "stage"

    def handle(self, event: Event) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        """Load and warm up, so the first real turn costs what every turn costs."""

    async def cancel(self) -> None:
        """Drop all work in flight (a new conversation, shutting down)."""

    def close(self) -> None:
        """Release worker threads and devices; called once, after the last event."""


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

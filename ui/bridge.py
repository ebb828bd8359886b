"""The one way events get from the pipeline into the UI.

`EventBridge.post(event)` may be called from any thread (the asyncio loop, a worker, an audio
callback's hand-off). It only emits a private signal; Qt queues it to the bridge's thread (the GUI
thread), where the event updates the view models and the public signals fire. Widgets read the
view models on their refresh timer; nothing here calls a model or waits.
"""
from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal

from foresay.engine.errors import ForesayError
from foresay.engine.events import Event, LoadProgress, StatusMessage, TurnMetrics

from .conversation import ConversationModel
from .latency import LatencyModel
from .status import StatusModel


class EventBridge(QObject):
    event_received = Signal(object)     # every event, in the GUI thread, after the models took it
    conversation_changed = Signal()
    latency_changed = Signal()
    metrics_received = Signal(object)   # TurnMetrics
    status_changed = Signal(str, str)   # level, text
    progress_changed = Signal(object)   # LoadProgress
    error = Signal(str)                 # an error to show: from StatusMessage(level="error") or a bad event

    _posted = Signal(object)

    def __init__(self, conversation: ConversationModel | None = None, latency: LatencyModel | None = None,
                 status: StatusModel | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self.conversation = conversation or ConversationModel()
        self.latency = latency or LatencyModel()
        self.status = status or StatusModel()
        # Queued even when posted from the GUI thread: the caller never runs UI code inline.
        self._posted.connect(self._dispatch, Qt.ConnectionType.QueuedConnection)

    def post(self, event: Event) -> None:
        """Hands `event` to the UI; safe from any thread, never blocks."""
        if not isinstance(event, Event):
            raise TypeError(f"EventBridge.post takes an engine event, got {type(event).__name__}")
        self._posted.emit(event)

    def _dispatch(self, event: Event) -> None:
        try:
            if self.conversation.apply(event):
                self.conversation_changed.emit()
            if self.latency.apply(event):
                self.latency_changed.emit()
        except ForesayError as exc:  # a malformed event: show it, keep the window alive
            self.status.report_error(str(exc))
            self.error.emit(str(exc))
            return
        if isinstance(event, TurnMetrics):
            self.metrics_received.emit(event)
        if self.status.apply(event):
            if isinstance(event, StatusMessage):
                self.status_changed.emit(event.level, event.text)
                if event.level == "error":
                    self.error.emit(event.text)
            elif isinstance(event, LoadProgress):
                self.progress_changed.emit(event)
        self.event_received.emit(event)

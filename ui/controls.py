"""The control strip: push-to-talk (button, Space, a shortcut), the hands-free / push-to-talk
switch, mute, stop reply and the device pickers. It only emits signals; the app acts on them."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QWidget

NO_DEVICES = "(no devices)"


from foresay.engine.events import ListeningMode as Mode


class PushToTalk(QObject):
    """Push-to-talk state shared by every way of holding it (button, Space, shortcut): `pressed`
    fires when the first source goes down, `released` when the last one comes up."""
    pressed = Signal()
    released = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._held: set[str] = set()
        self.enabled = True

    @property
    def held(self) -> bool:
        return bool(self._held)

    def press(self, source: str) -> None:
        if not self.enabled or source in self._held:
            return
        self._held.add(source)
        if len(self._held) == 1:
            self.pressed.emit()

    def release(self, source: str) -> None:
        if source not in self._held:
            return
        self._held.discard(source)
        if not self._held:
            self.released.emit()

    def release_all(self) -> None:
        if self._held:
            self._held.clear()
            self.released.emit()


class PttKeyFilter(QObject):
    """Application-wide key filter: Space or the configured shortcut, pressed while a widget of
    `window` has the focus, holds push-to-talk until released (or until the window loses the
    focus). Auto-repeat is ignored; the keys are consumed so Space does not also click the
    focused button."""

    def __init__(self, window: QWidget, ptt: PushToTalk, shortcut: QKeySequence):
        super().__init__(window)
        self._window = window
        self._ptt = ptt
        self.shortcut = shortcut

    def _source(self, event: QKeyEvent) -> str | None:
        combo = self.shortcut[0] if self.shortcut.count() else None
        if combo is not None and event.key() == combo.key() and (
                event.type() == QEvent.Type.KeyRelease or event.modifiers() == combo.keyboardModifiers()):
            return "shortcut"  # released by its key, whatever modifier came up first
        if event.key() == Qt.Key.Key_Space and event.modifiers() == Qt.KeyboardModifier.NoModifier:
            return "space"
        return None

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.WindowDeactivate and obj is self._window:
            # the key's release will go to another window: let go now rather than stay stuck
            self._ptt.release("space")
            self._ptt.release("shortcut")
            return False
        if event.type() not in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease):
            return False
        if not isinstance(obj, QWidget) or not (obj is self._window or self._window.isAncestorOf(obj)):
            return False
        source = self._source(event)
        if source is None or not self._ptt.enabled:
            return False
        if not event.isAutoRepeat():
            if event.type() == QEvent.Type.KeyPress:
                self._ptt.press(source)
            else:
                self._ptt.release(source)
        return True


class ControlsPanel(QWidget):
    mode_changed = Signal(str)          # a Mode value
    mute_toggled = Signal(bool)
    stop_reply = Signal()
    input_device_changed = Signal(str)
    output_device_changed = Signal(str)

    def __init__(self, ptt: PushToTalk, mode: Mode = Mode.PUSH_TO_TALK, parent: QWidget | None = None):
        super().__init__(parent)
        self.ptt = ptt
        layout = QHBoxLayout(self)

        self.mode = QComboBox()
        self.mode.addItem("Push-to-talk", Mode.PUSH_TO_TALK.value)
        self.mode.addItem("Hands-free", Mode.HANDS_FREE.value)
        self.mode.setCurrentIndex(self.mode.findData(Mode(mode).value))
        self.mode.currentIndexChanged.connect(self._on_mode)
        layout.addWidget(self.mode)

        self.ptt_button = QPushButton()
        self.ptt_button.setMinimumWidth(170)
        self.ptt_button.pressed.connect(lambda: ptt.press("button"))
        self.ptt_button.released.connect(lambda: ptt.release("button"))
        ptt.pressed.connect(lambda: self.ptt_button.setDown(True))
        ptt.released.connect(lambda: self.ptt_button.setDown(False))
        layout.addWidget(self.ptt_button)

        self.mute = QPushButton("Mute")
        self.mute.setCheckable(True)
        self.mute.toggled.connect(self.mute_toggled)
        self.mute.toggled.connect(lambda on: self.mute.setText("Unmute" if on else "Mute"))
        layout.addWidget(self.mute)

        self.stop = QPushButton("Stop reply")
        self.stop.clicked.connect(self.stop_reply)
        layout.addWidget(self.stop)

        layout.addSpacing(12)
        layout.addWidget(QLabel("In:"))
        self.input_device = QComboBox()
        self.input_device.currentIndexChanged.connect(
            lambda i: self._on_device(self.input_device, self.input_device_changed))
        layout.addWidget(self.input_device, 1)
        layout.addWidget(QLabel("Out:"))
        self.output_device = QComboBox()
        self.output_device.currentIndexChanged.connect(
            lambda i: self._on_device(self.output_device, self.output_device_changed))
        layout.addWidget(self.output_device, 1)
        for box in (self.input_device, self.output_device):
            self.set_devices(box, [])
        self._apply_mode(Mode(mode))

    def show_shortcut(self, shortcut: QKeySequence) -> None:
        self.ptt_button.setText(f"Hold to talk (Space, {shortcut.toString(QKeySequence.SequenceFormat.NativeText)})")

    def current_mode(self) -> Mode:
        return Mode(self.mode.currentData())

    def _apply_mode(self, mode: Mode) -> None:
        push = mode is Mode.PUSH_TO_TALK
        if not push:
            self.ptt.release_all()
        self.ptt.enabled = push
        self.ptt_button.setEnabled(push)

    def _on_mode(self, _index: int) -> None:
        mode = self.current_mode()
        self._apply_mode(mode)
        self.mode_changed.emit(mode.value)

    @staticmethod
    def set_devices(box: QComboBox, names: list[str], current: str | None = None) -> None:
        """Replaces the choices without emitting a change; `current` (if listed) is selected."""
        if current is not None and current not in names:
            current = None
        box.blockSignals(True)
        box.clear()
        box.addItems(list(names) or [NO_DEVICES])
        box.setEnabled(bool(names))
        if current is not None:
            box.setCurrentText(current)
        box.blockSignals(False)

    @staticmethod
    def _on_device(box: QComboBox, signal) -> None:
        if box.isEnabled() and box.currentIndex() >= 0:
            signal.emit(box.currentText())

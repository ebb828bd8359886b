"""The demo overlay: a small frameless, translucent, always-on-top window with the live
voice-to-voice figure and the last turn's stage bar. Drag it anywhere; it remembers where."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QSettings, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QMouseEvent, QPainter
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from .latency import LatencyModel
from .meters import big_figure_label
from .stage_bar import StageBar
from .theme import format_ms

POSITION_KEY = "overlay/position"


class LatencyOverlay(QWidget):
    visibility_changed = Signal(bool)

    def __init__(self, settings: QSettings, parent: QWidget | None = None):
        super().__init__(parent, Qt.WindowType.Tool | Qt.WindowType.FramelessWindowHint
                         | Qt.WindowType.WindowStaysOnTopHint)
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)
        self.setWindowTitle("Foresay latency")
        self._settings = settings
        self._drag_offset: QPoint | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 12)
        caption = QLabel("voice-to-voice")
        caption.setStyleSheet("color: rgba(255,255,255,180);")
        layout.addWidget(caption)
        self.figure = big_figure_label(28)
        self.figure.setStyleSheet("color: white;")
        layout.addWidget(self.figure)
        self.stage_bar = StageBar(show_labels=True)
        self.stage_bar.setFixedHeight(18)
        layout.addWidget(self.stage_bar)
        self.setFixedSize(260, 112)
        saved = settings.value(POSITION_KEY)
        if isinstance(saved, QPoint):
            self.move(saved)
        else:  # first use: the top-right corner of the primary screen
            screen = QGuiApplication.primaryScreen()
            if screen is not None:
                area = screen.availableGeometry()
                self.move(area.right() - self.width() - 24, area.top() + 24)

    def refresh(self, model: LatencyModel) -> None:
        ms, running = model.live_voice_to_voice()
        self.figure.setText(format_ms(ms) + (" \u2026" if running else ""))
        self.stage_bar.set_stages(model.stages)

    def paintEvent(self, _event) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(20, 22, 28, 200))
        p.drawRoundedRect(self.rect(), 12, 12)
        p.end()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._drag_offset = event.globalPosition().toPoint() - self.frameGeometry().topLeft()
            event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._drag_offset is not None and event.buttons() & Qt.MouseButton.LeftButton:
            self.move(event.globalPosition().toPoint() - self._drag_offset)
            event.accept()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._drag_offset is not None:
            self._drag_offset = None
            self.save_position()
            event.accept()

    def save_position(self) -> None:
        self._settings.setValue(POSITION_KEY, self.pos())
        self._settings.sync()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.visibility_changed.emit(True)

    def hideEvent(self, event) -> None:
        self.save_position()
        super().hideEvent(event)
        self.visibility_changed.emit(False)

"""A horizontal bar of one turn's latency stages, stacked in order, one colour per stage."""
from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from .latency import STAGES
from .theme import STAGE_COLORS


class StageBar(QWidget):
    """Shows `stages` (ms per STAGES key, None = not measured) scaled so the bar's full width is
    `max(total, scale_ms)`: short turns look short, long ones fill the bar."""

    def __init__(self, scale_ms: float = 2000.0, show_labels: bool = True, parent: QWidget | None = None):
        super().__init__(parent)
        if scale_ms <= 0:
            raise ValueError(f"StageBar scale_ms must be > 0, got {scale_ms}")
        self._scale_ms = scale_ms
        self._show_labels = show_labels
        self._stages: dict[str, float | None] = {}
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumHeight(22)

    def sizeHint(self) -> QSize:
        return QSize(320, 26)

    def set_stages(self, stages: dict[str, float | None]) -> None:
        if stages != self._stages:
            self._stages = dict(stages)
            self.setToolTip("\n".join(f"{label}: {stages[key]:.0f} ms" for key, label in STAGES
                                      if stages.get(key) is not None))
            self.update()

    def segments(self) -> list[tuple[str, float, float]]:
        """(stage key, x, width) in pixels for the measured stages, left to right."""
        measured = [(key, self._stages[key]) for key, _ in STAGES if self._stages.get(key)]
        total = sum(ms for _, ms in measured)
        scale = max(total, self._scale_ms)
        x, out = 0.0, []
        for key, ms in measured:
            w = self.width() * ms / scale
            out.append((key, x, w))
            x += w
        return out

    def paintEvent(self, _event) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(128, 128, 128, 50))
        p.drawRoundedRect(QRectF(self.rect()), 4, 4)
        font = p.font()
        font.setPixelSize(max(self.height() - 10, 9))
        p.setFont(font)
        for key, x, w in self.segments():
            rect = QRectF(x, 0, w, self.height())
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor(STAGE_COLORS[key]))
            p.drawRect(rect)
            if self._show_labels:
                text = f"{self._stages[key]:.0f}"
                if p.fontMetrics().horizontalAdvance(text) + 6 <= w:
                    p.setPen(QPen(QColor("white")))
                    p.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        p.end()

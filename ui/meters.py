"""The latency meters: voice-to-voice in large type, the end-of-turn line (the silence being
waited, and whether the words so far sound finished), the last turn's stage bar, statistics since
start, NFETFS, speculation outcomes, resumed turns and underruns. `refresh(model)` redraws from a LatencyModel."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from .latency import OUTCOMES, STAGES, LatencyModel
from .stage_bar import StageBar
from .theme import STAGE_COLORS, format_ms

# rows of the statistics table: (metric key, label)
TABLE_ROWS = (("endpoint_delay_ms", "endpoint delay"), ("asr_final_ms", "ASR final"),
              ("ttfs_ms", "TTFS (LLM)"), ("tts_first_chunk_ms", "TTS first chunk"),
              ("audio_latency_ms", "audio latency"), ("voice_to_voice_ms", "voice-to-voice"))


def big_figure_label(point_size: int) -> QLabel:
    label = QLabel("\u2014")
    font = label.font()
    font.setPointSize(point_size)
    font.setBold(True)
    label.setFont(font)
    return label


class LatencyPanel(QFrame):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)

        layout.addWidget(QLabel("<b>Voice-to-voice</b> (last turn)"))
        top = QHBoxLayout()
        self.voice_to_voice = big_figure_label(30)
        self.voice_to_voice.setObjectName("voice_to_voice")
        top.addWidget(self.voice_to_voice)
        self.v2v_stats = QLabel()
        self.v2v_stats.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        top.addWidget(self.v2v_stats, 1)
        layout.addLayout(top)
        # the end of the user's turn: the silence being waited and the decision, in words
        self.turn_end = QLabel()
        self.turn_end.setObjectName("turn_end")
        self.turn_end.setWordWrap(True)
        layout.addWidget(self.turn_end)

        self.stage_bar = StageBar()
        layout.addWidget(self.stage_bar)
        legend = QGridLayout()
        self.stage_labels: dict[str, QLabel] = {}
        for i, (key, name) in enumerate(STAGES):
            swatch = QLabel()
            swatch.setFixedSize(10, 10)
            swatch.setStyleSheet(f"background: {STAGE_COLORS[key]}; border-radius: 2px;")
            value = QLabel()
            self.stage_labels[key] = value
            legend.addWidget(swatch, i // 2, (i % 2) * 3)
            legend.addWidget(QLabel(name), i // 2, (i % 2) * 3 + 1)
            legend.addWidget(value, i // 2, (i % 2) * 3 + 2, Qt.AlignmentFlag.AlignRight)
        layout.addLayout(legend)

        table = QGridLayout()
        for col, head in enumerate(("", "last", "median", "p90")):
            table.addWidget(QLabel(f"<b>{head}</b>"), 0, col, Qt.AlignmentFlag.AlignRight if col else Qt.AlignmentFlag.AlignLeft)
        self.table_cells: dict[str, tuple[QLabel, QLabel, QLabel]] = {}
        for row, (key, name) in enumerate(TABLE_ROWS, start=1):
            table.addWidget(QLabel(name), row, 0)
            cells = tuple(QLabel() for _ in range(3))
            for col, cell in enumerate(cells, start=1):
                table.addWidget(cell, row, col, Qt.AlignmentFlag.AlignRight)
            self.table_cells[key] = cells
        layout.addLayout(table)

        self.nfetfs = QLabel()
        self.outcomes = QLabel()
        self.underruns = QLabel()
        for label in (self.nfetfs, self.outcomes, self.underruns):
            layout.addWidget(label)
        layout.addStretch(1)

    def refresh(self, model: LatencyModel) -> None:
        ms, running = model.live_voice_to_voice()
        self.voice_to_voice.setText(format_ms(ms) + (" \u2026" if running else ""))
        self.turn_end.setText(model.turn_end.text())
        v2v = model.summary("voice_to_voice_ms")
        self.v2v_stats.setText(f"median {format_ms(v2v.median)}<br>p90 {format_ms(v2v.p90)}<br>"
                               f"{model.turns} turn{'s' if model.turns != 1 else ''}")
        stages = model.stages
        self.stage_bar.set_stages(stages)
        for key, label in self.stage_labels.items():
            label.setText(format_ms(stages[key]))
        for key, (last, median, p90) in self.table_cells.items():
            summary = model.summary(key)
            last.setText(format_ms(model.last.get(key)))
            median.setText(format_ms(summary.median))
            p90.setText(format_ms(summary.p90))
        n = model.summary("nfetfs")
        last_n = model.last.get("nfetfs")
        self.nfetfs.setText(f"NFETFS: last {'—' if last_n is None else int(last_n)}, "
                            f"median {'—' if n.median is None else f'{n.median:g}'}")
        self.outcomes.setText("Speculation: " + " · ".join(
            f"{name} {model.outcomes[name]}" for name in OUTCOMES if name != "baseline" or model.outcomes[name]))
        self.underruns.setText(f"Underruns: {model.underruns}" + (
            f" · resumed turns: {model.turn_end.resumed}" if model.turn_end.resumed else ""))

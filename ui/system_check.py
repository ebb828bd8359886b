"""Help ▸ System check: the `foresay doctor` checks, run in a worker thread and shown as a table.

The dialog gets the checks as a callable (the app passes `foresay.app.doctor.run_checks`) that
returns objects with `name`, `ok`, `detail`, `fix` and `essential`; it never blocks the GUI thread.
"""
from __future__ import annotations

import threading
from typing import Callable, Sequence

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QDialog, QDialogButtonBox, QHeaderView, QLabel, QPushButton, QTableWidget, QTableWidgetItem,
    QVBoxLayout, QWidget,
)

from .theme import ERROR, WARNING

COLUMNS = ("", "Check", "Result", "How to fix")


def verdict(check) -> str:
    return "ok" if check.ok else ("problem" if check.essential else "note")


def summary(checks: Sequence) -> str:
    problems = sum(1 for c in checks if not c.ok and c.essential)
    notes = sum(1 for c in checks if not c.ok and not c.essential)
    if problems:
        return f"{problems} problem(s) to fix" + (f", {notes} note(s)" if notes else "") + "."
    return "Everything Foresay needs is here" + (f" ({notes} note(s) about optional parts)." if notes else ".")


class _Relay(QObject):
    """Carries the result from the worker to the GUI thread. The worker holds only this child of
    the dialog, never the dialog: a Python reference dropped last in the worker would destroy a
    widget outside the GUI thread."""
    finished = Signal(object)   # the list of checks, or the exception the checks raised


def _run_and_report(run_checks: Callable[[], Sequence], relay: _Relay) -> None:
    try:
        result = list(run_checks())
    except Exception as exc:  # shown in the dialog: a check that crashes is itself a finding
        result = exc
    try:
        relay.finished.emit(result)
    except RuntimeError:  # the dialog (and its relay) were closed and deleted meanwhile
        pass


class SystemCheckDialog(QDialog):
    def __init__(self, run_checks: Callable[[], Sequence], parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("System check")
        self.run_checks = run_checks
        self.checks: list = []
        self.summary = QLabel()
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.again = QPushButton("Check again")
        buttons.addButton(self.again, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        self.again.clicked.connect(self.start)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.table, 1)
        layout.addWidget(buttons)
        self.resize(820, 420)
        self.relay = _Relay(self)
        # Emitted from the worker thread; Qt queues it to this dialog's (the GUI) thread.
        self.relay.finished.connect(self._show, Qt.ConnectionType.QueuedConnection)
        self.worker: threading.Thread | None = None

    def start(self) -> None:
        """Runs the checks in a worker thread (they import torch, query devices, run espeak-ng)."""
        if self.worker is not None and self.worker.is_alive():
            return
        self.again.setEnabled(False)
        self.summary.setText("Checking packages, GPU, audio devices, espeak-ng and models\u2026")
        self.worker = threading.Thread(target=_run_and_report, args=(self.run_checks, self.relay),
                                       name="foresay-system-check", daemon=True)
        self.worker.start()

    def _show(self, result) -> None:
        self.again.setEnabled(True)
        if isinstance(result, Exception):
            self.summary.setText(f"The system check itself failed: {type(result).__name__}: {result}")
            self.summary.setStyleSheet(f"color: {ERROR};")
            return
        self.checks = result
        self.summary.setText(summary(result))
        self.summary.setStyleSheet(f"color: {ERROR};" if any(not c.ok and c.essential for c in result) else "")
        self.table.setRowCount(len(result))
        for row, check in enumerate(result):
            mark = verdict(check)
            cells = (mark, check.name, check.detail, "" if check.ok else check.fix)
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                if column == 0 and mark != "ok":
                    item.setForeground(QColor(ERROR if mark == "problem" else WARNING))
                self.table.setItem(row, column, item)
        self.table.resizeRowsToContents()

    def rows(self) -> list[tuple[str, ...]]:
        """The table as text, row by row (what the user sees)."""
        return [tuple(self.table.item(r, c).text() for c in range(len(COLUMNS)))
                for r in range(self.table.rowCount())]

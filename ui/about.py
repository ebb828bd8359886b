"""The About box: what Foresay is and which version is running."""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QWidget

import PySide6


def foresay_version() -> str:
    try:
        return version("foresay")
    except PackageNotFoundError:
        return "unknown (not installed as a package)"


def about_text(build: str = "") -> str:
    """build: the git revision the app was built from ("" leaves it out)."""
    return (f"<h3>Foresay {foresay_version()}</h3>"
            + (f"<p>Build: git {build}</p>" if build else "") +
            "<p>A local voice assistant that answers while you are still speaking: PredGen drafts "
            "and verifies the reply on every partial transcript, so the first sentence is ready "
            "when you stop.</p>"
            f"<p>Qt for Python {PySide6.__version__}</p>")


def about_box(parent: QWidget | None = None, build: str = "") -> QMessageBox:
    """A non-modal About box (shown with open(), so the event loop never waits on it)."""
    box = QMessageBox(parent)
    box.setWindowTitle("About Foresay")
    box.setTextFormat(Qt.TextFormat.RichText)
    box.setText(about_text(build))
    return box

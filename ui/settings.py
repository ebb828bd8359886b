"""The settings dialog and the plain, validated choices it returns.

The dialog only edits a `SettingsChoices`; the app layer decides what a change means (reloading a
model, rebuilding the endpointer). `SettingsOptions` is what the app offers in the pickers.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QComboBox, QDialog, QDialogButtonBox, QFormLayout, QKeySequenceEdit, QLabel, QSpinBox,
    QVBoxLayout, QWidget,
)

from .errors import InvalidUiConfig
from .theme import ERROR

VERIFIERS = ("greedy", "topk", "reflection")
ENDPOINTING = ("adaptive", "fixed")


def parse_shortcut(text: str) -> QKeySequence:
    """One key combination (e.g. "F9", "Ctrl+Shift+T"), or InvalidUiConfig."""
    seq = QKeySequence(text)
    if seq.count() != 1 or not seq.toString() or seq[0].key() in (0, 0x01FFFFFF):
        raise InvalidUiConfig(f"push-to-talk shortcut {text!r} is not one key combination such as 'F9' or 'Ctrl+T'")
    return seq


@dataclass(frozen=True)
class SettingsChoices:
    """
    profile: the app's model profile ("auto", a GPU profile, an offline profile).
    llm_model, asr_model, tts_model: model ids or paths; empty means the profile's choice.
    verifier: how PredGen checks a draft against a newer partial: greedy (lossless), topk, reflection.
    k: the top-k verifier's k (ignored by the others).
    tts_voice: the voice: a Piper voice (a name such as "en_US-joe-medium", or a .onnx path) or an
        espeak-ng voice (such as "en-us"), for the engine the profile speaks with.
    endpointing: "adaptive" (hangover follows PredGen's P(end of turn) within the bounds) or
        "fixed" (always `hangover_ms`).
    hangover_ms: the fixed hangover; hangover_min_ms / hangover_max_ms: the adaptive bounds.
    ptt_shortcut: the key combination that acts as the push-to-talk button while held.
    """
    profile: str = "auto"
    llm_model: str = ""
    asr_model: str = ""
    tts_model: str = ""
    verifier: str = "greedy"
    k: int = 3
    tts_voice: str = "en-us"
    endpointing: str = "adaptive"
    hangover_ms: int = 700
    hangover_min_ms: int = 250
    hangover_max_ms: int = 1200
    ptt_shortcut: str = "F9"

    def __post_init__(self):
        if not self.profile.strip():
            raise InvalidUiConfig("settings: profile must not be empty")
        if self.verifier not in VERIFIERS:
            raise InvalidUiConfig(f"settings: verifier must be one of {VERIFIERS}, got {self.verifier!r}")
        if not 1 <= self.k <= 100:
            raise InvalidUiConfig(f"settings: k must be between 1 and 100, got {self.k}")
        if self.endpointing not in ENDPOINTING:
            raise InvalidUiConfig(f"settings: endpointing must be one of {ENDPOINTING}, got {self.endpointing!r}")
        for name in ("hangover_ms", "hangover_min_ms", "hangover_max_ms"):
            if not 50 <= getattr(self, name) <= 5000:
                raise InvalidUiConfig(f"settings: {name} must be between 50 and 5000 ms, got {getattr(self, name)}")
        if self.hangover_min_ms > self.hangover_max_ms:
            raise InvalidUiConfig(f"settings: hangover_min_ms ({self.hangover_min_ms}) is above "
                                  f"hangover_max_ms ({self.hangover_max_ms})")
        parse_shortcut(self.ptt_shortcut)

    @property
    def verifier_spec(self) -> str:
        """The engine's verifier spec: "greedy", "topk:K" or "reflection"."""
        return f"topk:{self.k}" if self.verifier == "topk" else self.verifier


@dataclass(frozen=True)
class SettingsOptions:
    """What the pickers offer; model and voice pickers also accept free text."""
    profiles: tuple[str, ...] = ("auto",)
    llm_models: tuple[str, ...] = ()
    asr_models: tuple[str, ...] = ()
    tts_models: tuple[str, ...] = ()
    voices: tuple[str, ...] = ()


def combo(items, current: str, editable: bool) -> QComboBox:
    box = QComboBox()
    box.setEditable(editable)
    box.addItems(list(items))
    if current and box.findText(current) < 0:
        box.addItem(current)
    box.setCurrentText(current)
    if editable:
        box.lineEdit().setPlaceholderText("(the profile's choice)")
    return box


MODEL_FIELD_CHARS = 44   # room for a hub id or a local path such as ~/models/Qwen2.5-7B-Instruct-GGUF


def widen(box: QComboBox) -> QComboBox:
    """A model field wide enough to show a hub id or a path whole (its full text also in the
    tooltip), growing with the dialog."""
    box.setMinimumWidth(box.fontMetrics().horizontalAdvance("M" * (MODEL_FIELD_CHARS * 2 // 3)) + 40)
    box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    box.setMinimumContentsLength(MODEL_FIELD_CHARS)
    box.setToolTip(box.currentText())
    box.currentTextChanged.connect(box.setToolTip)
    return box


def spin(value: int, lo: int, hi: int, suffix: str = "") -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setValue(value)
    box.setSuffix(suffix)
    return box


class SettingsDialog(QDialog):
    """Edits `initial`; after it is accepted, `choices()` is the validated result. An invalid
    combination keeps the dialog open with the reason shown."""

    def __init__(self, initial: SettingsChoices, options: SettingsOptions = SettingsOptions(),
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Foresay settings")
        self._choices = initial
        form = QFormLayout()
        self.profile = combo(options.profiles, initial.profile, editable=False)
        self.llm_model = widen(combo(options.llm_models, initial.llm_model, editable=True))
        self.asr_model = widen(combo(options.asr_models, initial.asr_model, editable=True))
        self.tts_model = widen(combo(options.tts_models, initial.tts_model, editable=True))
        self.verifier = combo(VERIFIERS, initial.verifier, editable=False)
        self.k = spin(initial.k, 1, 100)
        self.tts_voice = combo(options.voices, initial.tts_voice, editable=True)
        self.endpointing = combo(ENDPOINTING, initial.endpointing, editable=False)
        self.hangover_ms = spin(initial.hangover_ms, 50, 5000, " ms")
        self.hangover_min_ms = spin(initial.hangover_min_ms, 50, 5000, " ms")
        self.hangover_max_ms = spin(initial.hangover_max_ms, 50, 5000, " ms")
        self.ptt_shortcut = QKeySequenceEdit(QKeySequence(initial.ptt_shortcut))
        for label, widget in (("Profile", self.profile), ("LLM model", self.llm_model),
                              ("ASR model", self.asr_model), ("TTS model", self.tts_model),
                              ("Verifier", self.verifier), ("Top-k k", self.k), ("TTS voice", self.tts_voice),
                              ("Endpointing", self.endpointing), ("Fixed hangover", self.hangover_ms),
                              ("Adaptive hangover min", self.hangover_min_ms),
                              ("Adaptive hangover max", self.hangover_max_ms),
                              ("Push-to-talk shortcut", self.ptt_shortcut)):
            form.addRow(label, widget)
        self.verifier.currentTextChanged.connect(self._sync_enabled)
        self.endpointing.currentTextChanged.connect(self._sync_enabled)
        self._sync_enabled()

        self.error_label = QLabel()
        self.error_label.setStyleSheet(f"color: {ERROR};")
        self.error_label.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)

    def _sync_enabled(self) -> None:
        self.k.setEnabled(self.verifier.currentText() == "topk")
        fixed = self.endpointing.currentText() == "fixed"
        self.hangover_ms.setEnabled(fixed)
        self.hangover_min_ms.setEnabled(not fixed)
        self.hangover_max_ms.setEnabled(not fixed)

    def _read(self) -> SettingsChoices:
        values = {}
        for f in fields(SettingsChoices):
            widget = getattr(self, f.name)
            if isinstance(widget, QComboBox):
                values[f.name] = widget.currentText().strip()
            elif isinstance(widget, QSpinBox):
                values[f.name] = widget.value()
            else:
                values[f.name] = widget.keySequence().toString()
        return SettingsChoices(**values)

    def accept(self) -> None:
        try:
            self._choices = self._read()
        except InvalidUiConfig as exc:
            self.error_label.setText(str(exc))
            return
        self.error_label.clear()
        super().accept()

    def choices(self) -> SettingsChoices:
        return self._choices

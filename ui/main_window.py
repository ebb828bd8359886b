"""Foresay's main window: conversation, latency meters, controls, status area, overlay.

It shows what the EventBridge's view models hold, redrawn by one timer (at most 30 Hz), and turns
what the user does into signals. It never calls a model and never waits on anything.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtCore import QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QApplication, QLabel, QMainWindow, QProgressBar, QPushButton, QSplitter, QVBoxLayout, QWidget,
)

from .about import about_box
from .bridge import EventBridge
from .controls import ControlsPanel, Mode, PttKeyFilter, PushToTalk
from .conversation_view import ConversationView
from .errors import InvalidUiConfig
from .meters import LatencyPanel
from .overlay import LatencyOverlay
from .settings import SettingsChoices, SettingsDialog, SettingsOptions, parse_shortcut
from .system_check import SystemCheckDialog
from .theme import ERROR, WARNING

MAX_REFRESH_HZ = 30.0
GEOMETRY_KEY = "window/geometry"


@dataclass(frozen=True)
class WindowConfig:
    """
    refresh_hz: how often meters and views are redrawn from the view models (at most 30).
    mode: the listening mode the window starts in ("push-to-talk" or "hands-free").
    overlay_shortcut: toggles the latency overlay.
    build: the git revision of this build, shown in the About box ("" shows none).
    """
    refresh_hz: float = 30.0
    mode: str = Mode.PUSH_TO_TALK.value
    overlay_shortcut: str = "Ctrl+L"
    build: str = ""

    def __post_init__(self):
        if not 0 < self.refresh_hz <= MAX_REFRESH_HZ:
            raise InvalidUiConfig(f"window refresh_hz must be in (0, {MAX_REFRESH_HZ:g}], got {self.refresh_hz}")
        if self.mode not in {m.value for m in Mode}:
            raise InvalidUiConfig(f"window mode must be one of {[m.value for m in Mode]}, got {self.mode!r}")
        if QKeySequence(self.overlay_shortcut).isEmpty():
            raise InvalidUiConfig(f"overlay shortcut {self.overlay_shortcut!r} is not a key sequence")


class MainWindow(QMainWindow):
    ptt_pressed = Signal()
    ptt_released = Signal()
    mode_changed = Signal(str)             # "push-to-talk" | "hands-free"
    mute_toggled = Signal(bool)
    stop_reply = Signal()
    input_device_changed = Signal(str)
    output_device_changed = Signal(str)
    settings_changed = Signal(object)      # SettingsChoices
    new_conversation = Signal()
    resume_conversation = Signal()         # continue the latest saved conversation
    profile_requested = Signal(str)        # a profile to switch to (the offline profile offer)

    def __init__(self, bridge: EventBridge, settings: QSettings, config: WindowConfig = WindowConfig(),
                 choices: SettingsChoices = SettingsChoices(), options: SettingsOptions = SettingsOptions(),
                 system_checks=None):
        """system_checks: a callable returning the doctor's checks, for Help ▸ System check
        (None: no such menu item)."""
        super().__init__()
        self.system_checks = system_checks
        self.setWindowTitle("Foresay")
        self.bridge = bridge
        self.config = config
        self.choices = choices
        self.options = options
        self._shown = {"latency": -1, "status": -1}
        self.ready = False                 # models loaded and audio devices open
        self.not_ready_text = "starting"   # what the header says until then

        self.ptt = PushToTalk(self)
        self.ptt.pressed.connect(self.ptt_pressed)
        self.ptt.released.connect(self.ptt_released)
        self.controls = ControlsPanel(self.ptt, Mode(config.mode))
        for name in ("mode_changed", "mute_toggled", "stop_reply", "input_device_changed", "output_device_changed"):
            getattr(self.controls, name).connect(getattr(self, name))
        self.key_filter = PttKeyFilter(self, self.ptt, parse_shortcut(choices.ptt_shortcut))
        self.controls.show_shortcut(self.key_filter.shortcut)
        QApplication.instance().installEventFilter(self.key_filter)

        self.phase = QLabel()
        self.conversation = ConversationView()
        self.meters = LatencyPanel()
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.phase)
        left_layout.addWidget(self.conversation)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(self.meters)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.addWidget(split, 1)
        layout.addWidget(self.controls)
        self.setCentralWidget(central)

        self.status_text = QLabel()
        self.status_text.setWordWrap(True)   # a long error is shown whole, never cut mid-word
        self.status_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(220)
        self.progress.hide()
        self.state_line = QLabel()   # a lasting state (e.g. offline on the demo profile), not a message
        self.state_line.hide()
        self.profile_offer = QPushButton()
        self.profile_offer.hide()
        self.profile_offer.clicked.connect(self._take_profile_offer)
        self.statusBar().addWidget(self.status_text, 1)
        self.statusBar().addPermanentWidget(self.state_line)
        self.statusBar().addPermanentWidget(self.profile_offer)
        self.statusBar().addPermanentWidget(self.progress)

        self.overlay = LatencyOverlay(settings)
        self._build_menus()
        self.overlay.visibility_changed.connect(self.overlay_action.setChecked)

        self.timer = QTimer(self)
        self.timer.setInterval(round(1000 / config.refresh_hz))
        self.timer.timeout.connect(self.refresh)
        self.timer.start()
        self._settings = settings
        if not self.restoreGeometry(settings.value(GEOMETRY_KEY, b"")):
            self.resize(980, 600)
        self.refresh()

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        new = file_menu.addAction("&New conversation")
        new.triggered.connect(self.new_conversation)
        resume = file_menu.addAction("&Resume last conversation")
        resume.triggered.connect(self.resume_conversation)
        settings = file_menu.addAction("&Settings\u2026")
        settings.triggered.connect(self.open_settings)
        file_menu.addSeparator()
        quit_action = file_menu.addAction("&Quit")
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(self.close)
        view = self.menuBar().addMenu("&View")
        self.overlay_action = QAction("Latency &overlay", self, checkable=True)
        self.overlay_action.setShortcut(QKeySequence(self.config.overlay_shortcut))
        self.overlay_action.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)
        self.overlay_action.toggled.connect(self._show_overlay)
        view.addAction(self.overlay_action)
        help_menu = self.menuBar().addMenu("&Help")
        if self.system_checks is not None:
            help_menu.addAction("&System check\u2026").triggered.connect(self.show_system_check)
        help_menu.addAction("&About Foresay").triggered.connect(self.show_about)

    # --- fed from outside ------------------------------------------------------------------

    def set_input_devices(self, names: list[str], current: str | None = None) -> None:
        self.controls.set_devices(self.controls.input_device, names, current)

    def set_output_devices(self, names: list[str], current: str | None = None) -> None:
        self.controls.set_devices(self.controls.output_device, names, current)

    def set_ready(self, ready: bool, why: str = "") -> None:
        """Whether the pipeline listens; until it does the header says why not (never "listening"
        without loaded models and open devices)."""
        self.ready = ready
        self.not_ready_text = why or "not ready"
        self.refresh()

    # --- user actions ------------------------------------------------------------------------

    def open_settings(self) -> SettingsDialog:
        dialog = SettingsDialog(self.choices, self.options, self)
        dialog.accepted.connect(lambda: self._apply_settings(dialog.choices()))
        dialog.open()
        return dialog

    def _apply_settings(self, choices: SettingsChoices) -> None:
        if choices == self.choices:
            return
        self.choices = choices
        self.key_filter.shortcut = parse_shortcut(choices.ptt_shortcut)
        self.controls.show_shortcut(self.key_filter.shortcut)
        self.settings_changed.emit(choices)

    def offer_profile(self, profile: str, text: str) -> None:
        """Shows a status-bar button that switches to `profile` (e.g. the offline one when a model
        is missing); `text` is the button's label."""
        self.profile_offer.setProperty("profile", profile)
        self.profile_offer.setText(text)
        self.profile_offer.show()

    def set_state_line(self, text: str) -> None:
        """A state that lasts until it changes, shown beside the messages (which come and go):
        e.g. "offline: the demo profile, which knows a toy domain"; "" hides it."""
        self.state_line.setText(text)
        self.state_line.setVisible(bool(text))

    def withdraw_profile_offer(self) -> None:
        self.profile_offer.hide()

    def _take_profile_offer(self) -> None:
        profile = self.profile_offer.property("profile")
        self.withdraw_profile_offer()
        self.choices = replace(self.choices, profile=profile)
        self.profile_requested.emit(profile)

    def show_about(self):
        box = about_box(self, self.config.build)
        box.open()
        return box

    def show_system_check(self) -> SystemCheckDialog:
        dialog = SystemCheckDialog(self.system_checks, self)
        dialog.open()
        dialog.start()
        return dialog

    def set_overlay_visible(self, visible: bool) -> None:
        self.overlay_action.setChecked(visible)

    def _show_overlay(self, visible: bool) -> None:
        if visible:
            self.overlay.refresh(self.bridge.latency)
        self.overlay.setVisible(visible)

    # --- drawing -----------------------------------------------------------------------------

    def refresh(self) -> None:
        """Redraws what changed since the last tick (the live clock redraws while it runs)."""
        conversation, latency, status = self.bridge.conversation, self.bridge.latency, self.bridge.status
        self.conversation.refresh(conversation)
        self.phase.setText(f"<b>{conversation.phase}</b>" if self.ready
                           else f"<b>not listening</b> \u2014 {self.not_ready_text}")
        running = latency.live_voice_to_voice()[1]
        if running or latency.version != self._shown["latency"]:
            self._shown["latency"] = latency.version
            self.meters.refresh(latency)
            if self.overlay.isVisible():
                self.overlay.refresh(latency)
        if status.version != self._shown["status"]:
            self._shown["status"] = status.version
            self._refresh_status()

    def _refresh_status(self) -> None:
        status = self.bridge.status
        color = {"error": ERROR, "warning": WARNING}.get(status.level, "")
        self.status_text.setStyleSheet(f"color: {color};" if color else "")
        loading = ", ".join(f"{p.component} ({p.label})" if p.label else p.component for p in status.loading.values())
        text = status.message
        if loading:
            text = f"Loading {loading}\u2026" + (f" \u2014 {text}" if text else "")
        self.status_text.setText(text)
        self.status_text.setToolTip("Errors since start:\n" + "\n".join(status.errors[-10:]) if status.errors else text)
        fraction = status.overall_progress()
        self.progress.setVisible(bool(status.loading))
        if fraction is None:
            self.progress.setRange(0, 0)  # busy indicator: total unknown
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(round(1000 * fraction))

    def closeEvent(self, event) -> None:
        self.timer.stop()
        self._settings.setValue(GEOMETRY_KEY, self.saveGeometry())
        self._settings.sync()
        self.ptt.release_all()
        self.overlay.close()
        QApplication.instance().removeEventFilter(self.key_filter)
        super().closeEvent(event)

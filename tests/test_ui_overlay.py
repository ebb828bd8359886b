"""The latency overlay: a frameless, translucent, always-on-top window that toggles from the menu
and a shortcut, shows the live voice-to-voice clock, and remembers where it was dragged."""
import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QKeySequence, QMouseEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from foresay.engine.events import TurnEnded
from foresay.ui.bridge import EventBridge
from foresay.ui.latency import LatencyModel
from foresay.ui.main_window import MainWindow, WindowConfig
from foresay.ui.overlay import POSITION_KEY, LatencyOverlay
from ui_support import drain, metrics, qapp, qsettings  # noqa: F401  (fixtures)


@pytest.fixture
def window(qapp, qsettings):
    w = MainWindow(EventBridge(), qsettings, WindowConfig(overlay_shortcut="Ctrl+Shift+O"))
    w.show()
    w.activateWindow()
    drain()
    yield w
    w.close()
    w.deleteLater()
    drain()


def test_overlay_is_a_frameless_translucent_window_on_top(window):
    flags = window.overlay.windowFlags()
    assert flags & Qt.WindowType.FramelessWindowHint and flags & Qt.WindowType.WindowStaysOnTopHint
    assert window.overlay.testAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)


def test_overlay_toggles_from_the_menu_action_and_its_shortcut(window):
    action = window.overlay_action
    assert action.shortcut() == QKeySequence("Ctrl+Shift+O")
    assert not window.overlay.isVisible()
    action.trigger()
    assert window.overlay.isVisible() and action.isChecked()
    QTest.keyClick(window, Qt.Key.Key_O, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    drain()
    assert not window.overlay.isVisible() and not action.isChecked()
    window.set_overlay_visible(True)
    window.overlay.close()  # closed some other way: the menu follows
    assert not action.isChecked()


def test_overlay_shows_the_live_clock_then_the_measured_figure(window):
    now = [100.0]
    window.bridge.latency.clock = lambda: now[0]
    window.set_overlay_visible(True)
    window.bridge.post(TurnEnded(1, 99.9, last_voiced_t=99.6))
    drain()
    window.refresh()
    assert window.overlay.figure.text() == "400 ms \u2026"
    now[0] = 100.5
    window.refresh()  # the clock runs with no new event
    assert window.overlay.figure.text() == "900 ms \u2026"
    window.bridge.post(metrics(1, 950.0))
    drain()
    window.refresh()
    assert window.overlay.figure.text() == "950 ms"
    assert [k for k, _, _ in window.overlay.stage_bar.segments()] == ["endpoint", "asr", "llm", "tts", "output"]


def drag(widget, by: QPoint):
    """Presses at the widget's centre, moves by `by`, releases (global positions, as a user drag)."""
    local = QPointF(widget.width() / 2, widget.height() / 2)
    start = QPointF(widget.mapToGlobal(local.toPoint()))
    left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
    for kind, pos, button, buttons in ((QEvent.Type.MouseButtonPress, start, left, left),
                                       (QEvent.Type.MouseMove, start + QPointF(by), none, left),
                                       (QEvent.Type.MouseButtonRelease, start + QPointF(by), left, none)):
        QApplication.sendEvent(widget, QMouseEvent(kind, local, pos, button, buttons, Qt.KeyboardModifier.NoModifier))


def test_overlay_is_draggable_and_remembers_its_position(qapp, qsettings):
    overlay = LatencyOverlay(qsettings)
    overlay.move(100, 80)
    overlay.show()
    drain()
    before = overlay.pos()
    drag(overlay, QPoint(150, 60))
    assert overlay.pos() == before + QPoint(150, 60)
    assert qsettings.value(POSITION_KEY) == overlay.pos()
    overlay.close()
    again = LatencyOverlay(qsettings)
    assert again.pos() == before + QPoint(150, 60)
    again.refresh(LatencyModel())
    assert again.figure.text() == "\u2014"  # nothing measured yet

"""The main window, offscreen: meters and draft from synthetic events, controls' signals, the
settings dialog, the status area, events from other threads, screenshots."""
import threading

import pytest
from PySide6.QtCore import QEvent, QThread, Qt
from PySide6.QtGui import QColor, QKeyEvent, QTextCursor, QTextDocument
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from foresay.engine.events import LoadProgress, PartialTranscript, StatusMessage, TurnMetrics
from foresay.ui.about import about_text, foresay_version
from foresay.ui.bridge import EventBridge
from foresay.ui.controls import NO_DEVICES
from foresay.ui.main_window import MainWindow
from foresay.ui.settings import SettingsChoices, SettingsOptions
from foresay.ui.theme import DRAFT_ACCEPTED, DRAFT_NEW, DRAFT_REJECTED
from ui_support import (  # noqa: F401  (fixtures)
    OUTPUT_DIR, Recorder, drain, finished_turn_events, metrics, mid_turn_events, qapp, qsettings, wait_until,
)


@pytest.fixture
def window(qapp, qsettings):
    bridge = EventBridge()
    w = MainWindow(bridge, qsettings, choices=SettingsChoices(ptt_shortcut="F9"),
                   options=SettingsOptions(profiles=("auto", "cpu-small", "offline-tiny"), voices=("en-us", "de")))
    w.set_ready(True)   # as the app does once the pipeline listens
    w.show()
    drain()
    yield w
    w.close()
    w.deleteLater()
    drain()


def post_all(window, events):
    for e in events:
        window.bridge.post(e)
    drain()
    window.refresh()
    drain()


def key(window, kind, k, modifiers=Qt.KeyboardModifier.NoModifier, auto_repeat=False):
    """Sends a key event to the widget that has the focus in `window` (or the window itself)."""
    target = window.focusWidget() or window
    QApplication.sendEvent(target, QKeyEvent(kind, k, modifiers, "", auto_repeat))


# --- meters and conversation --------------------------------------------------------------------

def test_meters_update_from_synthetic_events(window):
    post_all(window, [metrics(0, 900.0, "partial", underruns=2)] + finished_turn_events(1))
    m = window.meters
    assert m.voice_to_voice.text() == "620 ms"
    last, median, p90 = m.table_cells["voice_to_voice_ms"]
    assert (last.text(), median.text(), p90.text()) == ("620 ms", "760 ms", "872 ms")
    assert m.stage_labels["output"].text() == "150 ms"
    assert "accepted 1" in m.outcomes.text() and "partial 1" in m.outcomes.text() and "rejected 0" in m.outcomes.text()
    assert m.underruns.text() == "Underruns: 2"
    assert m.nfetfs.text().startswith("NFETFS: last 1")
    segments = m.stage_bar.segments()
    assert [s[0] for s in segments] == ["endpoint", "asr", "llm", "tts", "output"]
    widths = {k: w for k, _, w in segments}
    assert widths["endpoint"] == pytest.approx(widths["llm"] * 300 / 40)


def test_the_timer_refreshes_at_most_30_times_a_second(window):
    assert window.timer.isActive() and window.timer.interval() >= 33
    window.bridge.post(metrics(1, 700.0))
    wait_until(lambda: window.meters.voice_to_voice.text() == "700 ms")  # by the timer alone


def char_format_at(view, text):
    doc = view.document()
    cursor = doc.find(text, 0, QTextDocument.FindFlag.FindCaseSensitively)
    assert not cursor.isNull(), f"{text!r} not shown"
    probe = QTextCursor(doc)
    probe.setPosition(cursor.selectionStart() + 1)
    return probe.charFormat()


def test_draft_parts_render_distinctly(window):
    post_all(window, finished_turn_events(1) + mid_turn_events(2))
    view = window.conversation
    shown = view.toPlainText()
    assert "Hello there." in shown and "Hi! How can I help?" in shown
    assert "What's the weather like in Paris tomorrow" in shown
    accepted = char_format_at(view, "The weather ")
    rejected = char_format_at(view, "today is sunny")
    new = char_format_at(view, "in Paris tomorrow will")
    assert accepted.foreground().color() == QColor(DRAFT_ACCEPTED)
    assert rejected.foreground().color() == QColor(DRAFT_REJECTED) and rejected.fontStrikeOut()
    assert new.foreground().color() == QColor(DRAFT_NEW) and new.fontItalic()
    assert not accepted.fontStrikeOut() and not accepted.fontItalic()
    assert "first sentence ready for the TTS" in shown
    assert window.phase.text() == "<b>user speaking</b>"


def test_an_empty_conversation_shows_what_the_demo_knows_and_questions_to_try(window):
    """The demo's intro, as the app posts it once the pipeline is loaded: the toy domain in one
    line and its example questions, until the first turn; a general model's empty intro clears it."""
    from foresay.app.demo_profile import assistant_intro
    from foresay.engine.events import AssistantIntro, FinalTranscript

    intro = assistant_intro("demo")
    post_all(window, [intro])
    shown = window.conversation.toPlainText()
    assert intro.knows in shown and "Try asking:" in shown
    assert all(question in shown for question in intro.examples) and len(intro.examples) >= 4
    post_all(window, [FinalTranscript(1, 1.0, "What currency does Canada use?")])
    assert intro.knows not in window.conversation.toPlainText()   # the conversation took its place
    general = EventBridge()
    general.conversation.apply(intro)
    general.conversation.apply(AssistantIntro(0, 0.0))   # another profile's model: nothing to say
    assert general.conversation.intro.knows == ""


def test_a_bad_event_is_shown_as_an_error_and_the_window_keeps_going(window):
    errors = Recorder(window.bridge.error)
    post_all(window, [TurnMetrics(1, 0.0, values={"voice_to_voice_ms": -1})])
    assert len(errors) == 1 and "voice_to_voice_ms" in window.status_text.text()
    post_all(window, [metrics(2, 640.0)])
    assert window.meters.voice_to_voice.text() == "640 ms"


# --- controls ----------------------------------------------------------------------------------------

def test_ptt_button_press_and_release_emit_once_each(window):
    pressed, released = Recorder(window.ptt_pressed), Recorder(window.ptt_released)
    QTest.mousePress(window.controls.ptt_button, Qt.MouseButton.LeftButton)
    assert (len(pressed), len(released)) == (1, 0)
    QTest.mouseRelease(window.controls.ptt_button, Qt.MouseButton.LeftButton)
    assert (len(pressed), len(released)) == (1, 1)


def test_space_holds_push_to_talk_and_auto_repeat_is_ignored(window):
    pressed, released = Recorder(window.ptt_pressed), Recorder(window.ptt_released)
    window.controls.stop.setFocus()  # Space must not click the focused button
    stops = Recorder(window.stop_reply)
    key(window, QEvent.Type.KeyPress, Qt.Key.Key_Space)
    key(window, QEvent.Type.KeyPress, Qt.Key.Key_Space, auto_repeat=True)
    key(window, QEvent.Type.KeyRelease, Qt.Key.Key_Space, auto_repeat=True)
    assert (len(pressed), len(released)) == (1, 0)
    assert window.controls.ptt_button.isDown()
    key(window, QEvent.Type.KeyRelease, Qt.Key.Key_Space)
    assert (len(pressed), len(released)) == (1, 1)
    assert len(stops) == 0 and not window.controls.ptt_button.isDown()


def test_leaving_the_window_lets_go_of_a_held_key(window):
    pressed, released = Recorder(window.ptt_pressed), Recorder(window.ptt_released)
    key(window, QEvent.Type.KeyPress, Qt.Key.Key_F9)
    QApplication.sendEvent(window, QEvent(QEvent.Type.WindowDeactivate))
    assert (len(pressed), len(released)) == (1, 1)


def test_button_and_space_together_make_one_press(window):
    pressed, released = Recorder(window.ptt_pressed), Recorder(window.ptt_released)
    QTest.mousePress(window.controls.ptt_button, Qt.MouseButton.LeftButton)
    key(window, QEvent.Type.KeyPress, Qt.Key.Key_Space)
    QTest.mouseRelease(window.controls.ptt_button, Qt.MouseButton.LeftButton)
    assert (len(pressed), len(released)) == (1, 0)
    key(window, QEvent.Type.KeyRelease, Qt.Key.Key_Space)
    assert (len(pressed), len(released)) == (1, 1)


def test_the_configured_shortcut_holds_push_to_talk_and_follows_the_settings(window):
    pressed, released = Recorder(window.ptt_pressed), Recorder(window.ptt_released)
    assert "F9" in window.controls.ptt_button.text()
    key(window, QEvent.Type.KeyPress, Qt.Key.Key_F9)
    key(window, QEvent.Type.KeyRelease, Qt.Key.Key_F9)
    assert (len(pressed), len(released)) == (1, 1)
    dialog = window.open_settings()
    dialog.ptt_shortcut.setKeySequence("Ctrl+T")
    dialog.accept()
    assert "Ctrl+T" in window.controls.ptt_button.text()
    key(window, QEvent.Type.KeyPress, Qt.Key.Key_F9)
    assert len(pressed) == 1
    ctrl = Qt.KeyboardModifier.ControlModifier
    key(window, QEvent.Type.KeyPress, Qt.Key.Key_T, ctrl)
    key(window, QEvent.Type.KeyRelease, Qt.Key.Key_T)  # Ctrl may come up first
    assert (len(pressed), len(released)) == (2, 2)


def test_hands_free_mode_disables_push_to_talk_and_releases_a_held_one(window):
    modes, released = Recorder(window.mode_changed), Recorder(window.ptt_released)
    pressed = Recorder(window.ptt_pressed)
    key(window, QEvent.Type.KeyPress, Qt.Key.Key_Space)
    window.controls.mode.setCurrentIndex(window.controls.mode.findData("hands-free"))
    assert modes.calls == [("hands-free",)] and len(released) == 1
    assert not window.controls.ptt_button.isEnabled()
    key(window, QEvent.Type.KeyRelease, Qt.Key.Key_Space)
    key(window, QEvent.Type.KeyPress, Qt.Key.Key_Space)
    assert len(pressed) == 1
    window.controls.mode.setCurrentIndex(window.controls.mode.findData("push-to-talk"))
    assert modes.calls[-1] == ("push-to-talk",) and window.controls.ptt_button.isEnabled()


def test_mute_stop_and_device_pickers_emit(window):
    mutes, stops = Recorder(window.mute_toggled), Recorder(window.stop_reply)
    inputs, outputs = Recorder(window.input_device_changed), Recorder(window.output_device_changed)
    QTest.mouseClick(window.controls.mute, Qt.MouseButton.LeftButton)
    QTest.mouseClick(window.controls.mute, Qt.MouseButton.LeftButton)
    QTest.mouseClick(window.controls.stop, Qt.MouseButton.LeftButton)
    assert mutes.calls == [(True,), (False,)] and len(stops) == 1
    assert window.controls.input_device.currentText() == NO_DEVICES
    assert not window.controls.input_device.isEnabled()
    window.set_input_devices(["Built-in Microphone", "USB Headset"], current="USB Headset")
    window.set_output_devices(["Speakers"])
    assert len(inputs) == 0 and len(outputs) == 0  # feeding the lists is not a user choice
    assert window.controls.input_device.currentText() == "USB Headset"
    window.controls.input_device.setCurrentIndex(0)
    assert inputs.calls == [("Built-in Microphone",)]


def test_settings_dialog_returns_the_choices_and_keeps_invalid_ones_open(window):
    changed = Recorder(window.settings_changed)
    dialog = window.open_settings()
    assert not dialog.k.isEnabled()  # only the top-k verifier has a k
    dialog.profile.setCurrentText("cpu-small")
    dialog.verifier.setCurrentText("topk")
    assert dialog.k.isEnabled()
    dialog.k.setValue(4)
    dialog.tts_voice.setCurrentText("de")
    dialog.llm_model.setCurrentText("Qwen/Qwen2.5-0.5B-Instruct")
    dialog.hangover_min_ms.setValue(1500)
    dialog.hangover_max_ms.setValue(1000)
    dialog.accept()
    assert dialog.isVisible() and "hangover_min_ms" in dialog.error_label.text() and len(changed) == 0
    dialog.hangover_min_ms.setValue(300)
    dialog.accept()
    assert not dialog.isVisible() and len(changed) == 1
    choices = changed.calls[0][0]
    assert isinstance(choices, SettingsChoices)
    assert (choices.profile, choices.verifier_spec, choices.tts_voice, choices.llm_model) == (
        "cpu-small", "topk:4", "de", "Qwen/Qwen2.5-0.5B-Instruct")
    assert (choices.hangover_min_ms, choices.hangover_max_ms) == (300, 1000)


def test_status_area_shows_loading_progress_and_errors(window):
    post_all(window, [LoadProgress(0, 0.0, component="llm", label="qwen-0.5b", done=40, total=100)])
    assert window.progress.isVisible() and window.progress.value() == 400
    assert "llm (qwen-0.5b)" in window.status_text.text()
    post_all(window, [LoadProgress(0, 0.0, component="llm", done=100, total=100),
                      StatusMessage(0, 0.0, text="Model missing: run offline profile 'offline-tiny'", level="error")])
    assert not window.progress.isVisible()
    assert "offline-tiny" in window.status_text.text() and "c62828" in window.status_text.styleSheet()


def test_events_from_another_thread_arrive_in_the_gui_thread_in_order(window):
    gui = QThread.currentThread()
    threads, revisions = [], []

    def seen(event):
        threads.append(QThread.currentThread() == gui)
        if isinstance(event, PartialTranscript):
            revisions.append(event.revision)
    window.bridge.event_received.connect(seen)

    def produce():
        for r in range(1, 201):
            window.bridge.post(PartialTranscript(5, float(r), revision=r, committed=f"word {r}"))
    worker = threading.Thread(target=produce)
    worker.start()
    wait_until(lambda: len(revisions) == 200)
    worker.join()
    assert all(threads) and revisions == list(range(1, 201))
    assert window.bridge.conversation.partial.committed == "word 200"


def test_the_window_remembers_its_size(qapp, qsettings):
    first = MainWindow(EventBridge(), qsettings)
    first.resize(790, 530)
    first.show()
    drain()
    assert (first.width(), first.height()) == (790, 530)
    first.close()
    second = MainWindow(EventBridge(), qsettings)
    assert (second.width(), second.height()) == (790, 530)
    second.close()


def test_about_shows_the_installed_version(window):
    box = window.show_about()
    assert foresay_version()[0].isdigit() and foresay_version() in box.text() == about_text()
    box.close()


def test_bridge_refuses_what_is_not_an_event(window):
    with pytest.raises(TypeError, match="engine event"):
        window.bridge.post("hello")


def test_screenshots_of_the_main_window_mid_turn_and_of_the_overlay(window):
    window.set_input_devices(["Built-in Microphone", "USB Headset"], current="USB Headset")
    window.set_output_devices(["Speakers"])
    post_all(window, [metrics(0, 900.0, "partial", underruns=1)] + finished_turn_events(1) + mid_turn_events(2)
             + [LoadProgress(0, 0.0, component="tts", label="espeak-ng", done=3, total=4)])
    window.set_overlay_visible(True)
    drain()
    window.refresh()
    drain()
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    dialog = window.open_settings()
    drain()
    shots = {"main_window_mid_turn.png": window.grab(), "latency_overlay.png": window.overlay.grab(),
             "settings_dialog.png": dialog.grab()}
    dialog.reject()
    for name, pixmap in shots.items():
        assert pixmap.save(str(OUTPUT_DIR / name))
        image = pixmap.toImage()
        colors = {image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)}
        assert len(colors) > 8, f"{name} looks blank"

"""The window's controls reach the pipeline: push-to-talk through the window drives a turn."""
import asyncio
from dataclasses import replace

from foresay.app.gui import App, settings_with_choices
from foresay.engine.events import TalkPressed, TalkReleased
from foresay.ui.settings import SettingsChoices

from test_pipeline import recording, settings  # noqa: F401  (fixture)
from ui_support import OUTPUT_DIR, qapp, qsettings  # noqa: F401  (fixtures)


def make_window(qapp, qsettings, mode="push-to-talk"):
    from foresay.ui.bridge import EventBridge
    from foresay.ui.main_window import MainWindow, WindowConfig
    bridge = EventBridge()
    return MainWindow(bridge, qsettings, WindowConfig(mode=mode)), bridge


class FakePipeline:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *a: self.calls.append((name, *a))


def test_window_controls_call_the_pipeline(qapp, qsettings, settings):  # noqa: F811
    window, bridge = make_window(qapp, qsettings)
    app = App(settings, window, bridge)
    app.pipeline = fake = FakePipeline()
    window.ptt_pressed.emit()
    window.ptt_released.emit()
    window.mode_changed.emit("hands-free")
    window.stop_reply.emit()
    window.new_conversation.emit()
    window.mute_toggled.emit(True)
    assert fake.calls == [("press_ptt",), ("release_ptt",), ("set_mode", "hands-free"),
                          ("stop_reply",), ("new_conversation",), ("set_muted", True)]


def test_settings_dialog_choices_reach_the_settings(settings):  # noqa: F811
    choices = SettingsChoices(verifier="topk", k=5, endpointing="fixed", hangover_ms=900,
                              hangover_min_ms=200, hangover_max_ms=1500, tts_voice="en-gb")
    s = settings_with_choices(settings, choices)
    assert s.predgen.verifier == "topk:5" and not s.app.adaptive_endpointing
    assert s.audio.fixed_hangover_s == 0.9 and s.audio.hangover.max_s == 1.5
    assert s.tts.espeak.voice.voice == "en-gb"
    piper = settings_with_choices(replace(settings, tts=replace(settings.tts, engine="piper")),
                                  replace(choices, tts_voice="en_GB-alan-low"))
    assert piper.tts.engine_config().voice == "en_GB-alan-low" and piper.tts.espeak == settings.tts.espeak


def test_push_to_talk_in_the_window_drives_a_turn(tmp_path, qapp, qsettings, settings):  # noqa: F811
    from foresay.app.assemble import build_pipeline
    from foresay.audio.files import FileSource
    from foresay.audio.wav_sink import WavSink

    audio = recording(tmp_path, ["What time is it in Tokyo?"], gap_s=2.5)
    window, bridge = make_window(qapp, qsettings)
    s = replace(settings, app=replace(settings.app, mode="push-to-talk"))
    controller = App(s, window, bridge)
    received = []
    bridge.event_received.connect(received.append)

    async def main():
        pipeline = await build_pipeline(s, FileSource(audio, realtime=True), WavSink(tmp_path / "o.wav"),
                                         [bridge.post])
        controller.pipeline = pipeline
        loop = asyncio.get_running_loop()
        loop.call_later(0.1, window.ptt_pressed.emit)
        loop.call_later(2.3, window.ptt_released.emit)
        await pipeline.run()
        pipeline.close()
        return pipeline

    pipeline = asyncio.run(main())
    assert len(pipeline.metrics) == 1 and pipeline.metrics[0]["reply_text"]
    qapp.processEvents()
    controls = [type(e) for e in received if isinstance(e, (TalkPressed, TalkReleased))]
    assert controls == [TalkPressed, TalkReleased]  # the window hears its own controls as events
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    window.resize(1000, 700)
    window.grab().save(str(OUTPUT_DIR / "main_window_after_ptt_turn.png"))


def test_the_window_starts_a_new_conversation_and_resumes_the_last_on_request(tmp_path, qapp, qsettings,
                                                                              settings):  # noqa: F811
    from foresay.app.history import HistoryStore, HistoryTurn

    old = HistoryStore(tmp_path)
    old.append(HistoryTurn("What is the capital of France?", "The capital of France is Paris."))
    old.close()   # an earlier session, ended
    s = replace(settings, app=replace(settings.app, history_dir=tmp_path))
    window, bridge = make_window(qapp, qsettings)
    app = App(s, window, bridge)
    restarts = []
    app.restart = lambda **kw: restarts.append(kw)
    assert app._history().turns == [] and app._history() is app._history()   # kept across restarts
    window.resume_conversation.emit()
    assert restarts == [{}]
    assert app._history().path == old.path and len(app._history().turns) == 1
    qapp.processEvents()
    assert "resumed" in bridge.status.message


def test_ctrl_c_in_the_terminal_quits_the_window_cleanly(qapp):
    import os
    import signal
    import threading

    from PySide6.QtCore import QTimer

    from foresay.app.gui import QuitOnInterrupt

    import time

    before = signal.getsignal(signal.SIGINT)   # ignored when the suite runs in the background
    interrupt = QuitOnInterrupt(qapp.quit)
    interrupt.install()
    started = time.monotonic()
    try:
        QTimer.singleShot(10_000, qapp.quit)   # never hangs the suite
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()   # while Qt waits for events
        qapp.exec()   # a KeyboardInterrupt would surface here (or in a Qt callback) instead
    finally:
        interrupt.uninstall()
    assert interrupt.interrupted and time.monotonic() - started < 5   # at once, not at the safety timer
    assert signal.getsignal(signal.SIGINT) is before

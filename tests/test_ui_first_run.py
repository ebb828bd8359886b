"""What a first run in the packaged app shows: the system check, the offline-profile offer, the
build's revision in About."""
import threading
from dataclasses import replace

import pytest

from foresay.app.doctor import Check
from foresay.app.gui import App, app_icon
from foresay.engine.errors import ModelUnavailable
from foresay.ui.about import about_text
from foresay.ui.bridge import EventBridge
from foresay.ui.main_window import MainWindow, WindowConfig
from foresay.ui.system_check import SystemCheckDialog

from test_pipeline import settings  # noqa: F401  (fixture)
from ui_support import drain, qapp, qsettings, wait_until  # noqa: F401  (fixtures)

CHECKS = [Check("python package torch", True, "2.13.0"),
          Check("PortAudio", False, "library not found", "install libportaudio2"),
          Check("CUDA GPU", False, "none (CPU-only build)", "install a CUDA build", essential=False)]


@pytest.fixture
def windows(qapp, qsettings):
    """Makes main windows and closes them after the test (a window left open keeps its timer
    and its application-wide key filter running into later tests)."""
    made = []

    def make(*args, **kwargs):
        made.append(MainWindow(EventBridge() if not args else args[0], qsettings, *args[1:], **kwargs))
        return made[-1]
    yield make
    import gc
    gc.collect()   # apps made in the test go while their windows still exist
    for w in made:
        w.close()
        w.deleteLater()
    drain()


def help_actions(window):
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    return [a.text() for a in menu.actions()]


def test_system_check_runs_off_the_gui_thread_and_lists_problems_with_fixes(qapp):
    gui_thread = threading.get_ident()
    ran_on = []

    def run_checks():
        ran_on.append(threading.get_ident())
        return CHECKS

    dialog = SystemCheckDialog(run_checks)
    dialog.start()
    wait_until(lambda: dialog.table.rowCount() == 3)
    dialog.worker.join()
    assert ran_on and ran_on[0] != gui_thread
    assert dialog.rows() == [("ok", "python package torch", "2.13.0", ""),
                             ("problem", "PortAudio", "library not found", "install libportaudio2"),
                             ("note", "CUDA GPU", "none (CPU-only build)", "install a CUDA build")]
    assert dialog.summary.text() == "1 problem(s) to fix, 1 note(s)."
    assert dialog.again.isEnabled()


def test_a_crashing_check_is_reported_in_the_dialog(qapp):
    def run_checks():
        raise RuntimeError("espeak-ng hung")

    dialog = SystemCheckDialog(run_checks)
    dialog.start()
    wait_until(lambda: "failed" in dialog.summary.text())
    dialog.worker.join()
    assert "RuntimeError: espeak-ng hung" in dialog.summary.text() and dialog.table.rowCount() == 0


def test_help_menu_has_the_system_check_when_the_app_gives_checks(windows):
    plain = windows()
    assert "&System check\u2026" not in help_actions(plain)
    window = windows(system_checks=lambda: CHECKS[:1])
    assert help_actions(window)[0] == "&System check\u2026"
    dialog = window.show_system_check()
    wait_until(lambda: dialog.table.rowCount() == 1)
    dialog.worker.join()
    dialog.close()


def test_about_shows_the_build_revision(windows):
    window = windows(EventBridge(), WindowConfig(build="v0.1.0-3-gabc1234"))
    box = window.show_about()
    assert "git v0.1.0-3-gabc1234" in box.text() and box.text() == about_text("v0.1.0-3-gabc1234")
    box.close()


def test_missing_models_start_the_demo_profile_say_so_and_keep_the_choice(windows, settings, tmp_path):  # noqa: F811
    """First run offline: the chosen profile's models cannot be had, so the app starts on the
    embedded demo profile, says so plainly with the way to the real models, and shows a lasting
    state line; config.toml keeps the user's choice, so the next start tries it again. The real
    models are one click away, and that click says why it cannot while still offline."""
    from foresay.app.config import load_settings, remember_profile
    from foresay.engine.events import StatusMessage

    config = tmp_path / "config.toml"
    config.write_text('# mine\n[app]\nmode = "push-to-talk"\nprofile = "cpu"\n')
    before = config.read_text()
    cpu = replace(settings, app=replace(settings.app, profile="cpu"))
    loaded = []

    def load_profile(name):
        loaded.append(name)
        return replace(settings, app=replace(settings.app, profile=name))

    bridge = EventBridge()
    window = windows(bridge)
    app = App(cpu, window, bridge, load_profile, remember_profile=lambda name: remember_profile(config, name))
    app.start = lambda: loaded.append("started")  # the pipeline itself is not under test here
    window.set_ready(False, "the models are missing")
    assert "listening" not in window.phase.text().replace("not listening", "")
    missing = ModelUnavailable("the language model 'Qwen/Qwen2.5-0.5B-Instruct' is not downloaded yet and "
                               "cannot be downloaded now: no network connection")
    app.model_missing(missing)
    drain()
    assert loaded == ["demo", "started"] and app.settings.app.profile == "demo"
    message = bridge.status.message
    assert bridge.status.level == "warning" and "offline 'demo' profile instead" in message
    assert "Qwen/Qwen2.5-0.5B-Instruct" in message and "connect to the internet" in message
    assert "--profile" not in message and ").)" not in message   # window advice, no nesting
    assert window.profile_offer.isVisibleTo(window) and "Get the real models (cpu)" == window.profile_offer.text()
    assert config.read_text() == before and load_settings(config).app.profile == "cpu"  # not the user's choice
    # the pipeline's "ready" message and a device error replace the message, not the state line
    bridge.post(StatusMessage(0, 0.0, "ready: demo profile, demo (qwen2, 1.44M parameters)", "info"))
    bridge.post(StatusMessage(0, 0.0, "no input device", "error"))
    drain()
    window.refresh()
    assert window.state_line.isVisibleTo(window)
    assert window.state_line.text() == "offline: the demo profile, which knows a toy domain"
    loaded.clear()
    window.profile_offer.click()   # back to the real models ...
    assert loaded == ["cpu", "started"] and load_settings(config).app.profile == "cpu"
    app.model_missing(missing)     # ... still offline: said, and back on the demo profile
    drain()
    assert bridge.status.level == "error" and "Cannot get the real models of the 'cpu' profile now" in bridge.status.message
    assert app.settings.app.profile == "demo" and window.state_line.isVisibleTo(window)
    assert window.profile_offer.isVisibleTo(window) and load_settings(config).app.profile == "cpu"


def test_choosing_a_profile_clears_the_offline_state(windows, settings):  # noqa: F811
    bridge = EventBridge()
    window = windows(bridge)
    cpu = replace(settings, app=replace(settings.app, profile="cpu"))
    app = App(cpu, window, bridge, lambda name: replace(settings, app=replace(settings.app, profile=name)))
    app.start = lambda: None
    app.model_missing(ModelUnavailable("no network connection"))
    assert window.state_line.isVisibleTo(window)
    app.restart(audio_output="")   # another device: still on the fallback
    assert window.state_line.isVisibleTo(window)
    window._apply_settings(replace(window.choices, profile="demo"))   # chosen now
    assert app.settings.app.profile == "demo" and not window.state_line.isVisibleTo(window)


def test_on_an_offline_profile_a_missing_model_is_an_error_with_the_other_offline_profile(windows, settings):  # noqa: F811
    demo = replace(settings, app=replace(settings.app, profile="demo"))
    bridge = EventBridge()
    window = windows(bridge)
    app = App(demo, window, bridge, lambda name: replace(settings, app=replace(settings.app, profile=name)))
    app.start = lambda: None
    app.model_missing(ModelUnavailable("demo model 'demo' is missing from /x"))
    drain()
    assert bridge.status.level == "error" and app.settings.app.profile == "demo"
    assert window.profile_offer.isVisibleTo(window) and "tiny-random" in window.profile_offer.text()


def test_choosing_a_profile_in_settings_loads_that_profile(windows, settings):  # noqa: F811
    bridge = EventBridge()
    window = windows(bridge)
    app = App(settings, window, bridge, lambda name: replace(settings, app=replace(settings.app, profile=name)))
    app.start = lambda: None
    window._apply_settings(replace(window.choices, profile="cpu"))
    assert app.settings.app.profile == "cpu"
    window._apply_settings(replace(window.choices, profile="auto", verifier="reflection"))
    assert app.settings.app.profile == "cpu" and app.settings.predgen.verifier == "reflection"


def test_the_window_icon_comes_from_the_packaged_assets(qapp):
    sizes = {(s.width(), s.height()) for s in app_icon().availableSizes()}
    assert {(16, 16), (48, 48), (256, 256)} <= sizes


def test_the_settings_dialog_shows_model_ids_and_paths_whole(qapp):
    from ui_support import OUTPUT_DIR

    from foresay.ui.settings import SettingsChoices, SettingsDialog

    long_id = "~/models/Qwen2.5-7B-Instruct-GGUF/q4_k_m"
    dialog = SettingsDialog(SettingsChoices(llm_model=long_id, asr_model="distil-whisper/distil-medium.en"))
    dialog.show()
    drain()
    for box in (dialog.llm_model, dialog.asr_model):
        edit = box.lineEdit()
        assert edit.fontMetrics().horizontalAdvance(box.currentText()) < edit.width(), box.currentText()
    assert dialog.llm_model.toolTip() == long_id
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    dialog.grab().save(str(OUTPUT_DIR / "settings_dialog.png"))
    dialog.close()


def test_the_header_says_listening_only_once_the_pipeline_is_ready(windows, settings, monkeypatch):  # noqa: F811
    import asyncio

    from foresay.app import assemble
    from foresay.audio import capture

    window = windows()
    drain()
    assert window.phase.text().startswith("<b>not listening</b>")

    class NoMic:
        def __init__(self, config):
            from foresay.audio.errors import NoAudioDevice
            raise NoAudioDevice("no input device found (is one plugged in and enabled?)")

    async def never(*a, **k):
        raise AssertionError("no pipeline without a microphone")
    monkeypatch.setattr(capture, "MicSource", NoMic)
    monkeypatch.setattr(assemble, "build_pipeline", never)
    bridge = window.bridge
    app = App(settings, window, bridge)
    asyncio.run(app._run())
    drain()
    assert "not listening" in window.phase.text() and "no input device" in bridge.status.message
    window.set_ready(True)
    assert window.phase.text() == "<b>listening</b>"

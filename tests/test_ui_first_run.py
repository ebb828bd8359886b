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


def test_missing_model_offers_the_offline_profile_and_switches_to_it(windows, settings):  # noqa: F811
    cpu = replace(settings, app=replace(settings.app, profile="cpu"))
    loaded = []

    def load_profile(name):
        loaded.append(name)
        return replace(settings, app=replace(settings.app, profile=name))

    bridge = EventBridge()
    window = windows(bridge)
    app = App(cpu, window, bridge, load_profile)
    app.start = lambda: loaded.append("started")  # the pipeline itself is not under test here
    app.model_missing(ModelUnavailable("the language model 'Qwen/Qwen2.5-0.5B-Instruct' is not downloaded"))
    drain()
    assert bridge.status.level == "error" and "--profile demo" in bridge.status.message
    assert window.profile_offer.isVisibleTo(window) and "demo" in window.profile_offer.text()
    app.restart(choices=replace(window.choices, verifier="reflection"))  # another attempt: offer withdrawn
    assert not window.profile_offer.isVisibleTo(window)
    app.model_missing(ModelUnavailable("the language model 'Qwen/Qwen2.5-0.5B-Instruct' is not downloaded"))
    loaded.clear()
    window.profile_offer.click()
    assert loaded == ["demo", "started"]
    assert app.settings.app.profile == "demo" and window.choices.profile == "demo"
    assert not window.profile_offer.isVisibleTo(window)


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

"""`foresay` with no command: the window, on one qasync event loop shared with the pipeline.

The window gets events only through the bridge and sends user actions as Qt signals, which are
connected here to the pipeline's controls. Models load in the background with progress in the
status area; the window stays responsive, and a loading error is shown there, not as a crash.
"""
from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import replace
from typing import Callable

from foresay.app.config import PROFILES, Settings, auto_profile, default_config_path, load_settings, remember_profile
from foresay.app.downloads import offline_hint, offline_profiles, offline_state
from foresay.app.voice import shown_voice, with_voice
from foresay.engine.errors import ForesayError, ModelFileMissing, ModelUnavailable
from foresay.engine.events import StatusMessage

log = logging.getLogger(__name__)


def settings_with_choices(settings: Settings, choices) -> Settings:
    """The settings dialog's choices applied on top of the loaded settings."""
    llm = replace(settings.llm, model=choices.llm_model) if choices.llm_model else settings.llm
    asr = replace(settings.asr, target=choices.asr_model) if choices.asr_model else settings.asr
    hangover = replace(settings.audio.hangover, min_s=choices.hangover_min_ms / 1000,
                       max_s=choices.hangover_max_ms / 1000,
                       default_s=min(max(settings.audio.hangover.default_s, choices.hangover_min_ms / 1000),
                                     choices.hangover_max_ms / 1000))
    settings = with_voice(settings, choices.tts_voice)
    return replace(settings, llm=llm, asr=asr,
                   predgen=replace(settings.predgen, verifier=choices.verifier_spec),
                   audio=replace(settings.audio, hangover=hangover,
                                 fixed_hangover_s=choices.hangover_ms / 1000),
                   app=replace(settings.app, adaptive_endpointing=choices.endpointing == "adaptive"))


class App:
    """Owns the window and the running pipeline; restarts the pipeline when settings change.

    load_profile(name) gives the settings of another profile (the settings dialog's profile
    choice, the offline profile offered when a model is missing). The conversation starts new
    (or resumes the latest with `resume`) and goes on across restarts for new settings."""

    def __init__(self, settings: Settings, window, bridge,
                 load_profile: Callable[[str], Settings] = lambda name: load_settings(profile=name),
                 resume: bool = False, remember_profile: Callable[[str], None] | None = None):
        """remember_profile(name): keeps the profile for the next start (config.toml); None when
        the command line chose the profile."""
        self.settings = settings
        self.remember_profile = remember_profile
        self.fallback_from: str | None = None  # the chosen profile whose models were missing
        self.retry_of: str | None = None       # that profile, tried again by the user
        self.resume = resume
        self.history = None
        self.window = window
        self.bridge = bridge
        self.load_profile = load_profile
        self.pipeline = None
        self.task: asyncio.Task | None = None
        w = window
        w.ptt_pressed.connect(lambda: self.pipeline and self.pipeline.press_ptt())
        w.ptt_released.connect(lambda: self.pipeline and self.pipeline.release_ptt())
        w.mode_changed.connect(lambda m: self.pipeline and self.pipeline.set_mode(m))
        w.mute_toggled.connect(lambda on: self.pipeline and self.pipeline.set_muted(on))
        w.stop_reply.connect(lambda: self.pipeline and self.pipeline.stop_reply())
        w.new_conversation.connect(lambda: self.pipeline and self.pipeline.new_conversation())
        w.resume_conversation.connect(lambda: self.resume_latest())
        w.input_device_changed.connect(lambda name: self.restart(audio_input=name))
        w.output_device_changed.connect(lambda name: self.restart(audio_output=name))
        w.settings_changed.connect(lambda choices: self.restart(choices=choices))
        w.profile_requested.connect(lambda name: self.restart(profile=name))

    def start(self) -> None:
        self.task = asyncio.get_event_loop().create_task(self._run())

    def restart(self, audio_input=None, audio_output=None, choices=None, profile=None,
                fallback: bool = False) -> None:
        """Starts the pipeline again with what changed. `fallback`: `profile` stands in for the
        chosen one (its models are missing), so it is not remembered as the user's choice."""
        s = self.settings
        wanted = chosen = profile or (choices.profile if choices is not None else None)
        if wanted == "auto":
            wanted = auto_profile()
        if wanted and wanted != s.app.profile:
            try:
                s = replace(self.load_profile(wanted), audio=s.audio)
            except ForesayError as exc:
                self.bridge.post(StatusMessage(0, 0.0, str(exc), "error"))
                return
        if audio_input is not None:
            s = replace(s, audio=replace(s.audio, input_device=audio_input or None))
        if audio_output is not None:
            s = replace(s, audio=replace(s.audio, output_device=audio_output or None))
        if choices is not None:
            try:
                s = settings_with_choices(s, choices)
            except ForesayError as exc:
                self.bridge.post(StatusMessage(0, 0.0, str(exc), "error"))
                return
        self.settings = s
        self.window.withdraw_profile_offer()  # a new attempt: the offer returns if it fails again
        if chosen and not fallback:   # the user's own choice: no longer on a fallback
            self.retry_of = chosen if chosen == self.fallback_from else None
            self.fallback_from = None
            self.window.set_state_line("")
        if chosen and not fallback and self.remember_profile is not None:
            try:
                self.remember_profile(chosen)   # the user's choice holds at the next start
            except ForesayError as exc:
                log.warning("could not remember the profile: %s", exc)
        if self.task is not None:
            self.task.cancel()
        self.start()

    def resume_latest(self) -> None:
        """File ▸ Resume last conversation: the latest saved conversation becomes the context."""
        if self.history is not None:
            self.history.close()   # releases the file, which may be the one to resume
        self.history, self.resume = None, True
        self.restart()

    def _history(self):
        from foresay.app.history import HistoryStore

        if self.history is None:
            self.history = HistoryStore(self.settings.app.history_dir, resume=self.resume)
            if self.history.problem:
                self.bridge.post(StatusMessage(0, 0.0, self.history.problem, "warning"))
            if self.history.notice:
                self.bridge.post(StatusMessage(0, 0.0, self.history.notice, "warning"))
            elif self.resume:
                n = len(self.history.turns)
                self.bridge.post(StatusMessage(0, 0.0, f"resumed {self.history.path.name} ({n} turn(s))"
                                               if n else "no saved conversation to resume", "info"))
        return self.history

    async def _run(self) -> None:

        from foresay.app.assemble import build_pipeline
        from foresay.audio.capture import MicSource
        from foresay.audio.playback import DeviceSink

        s = self.settings
        self.window.set_ready(False, f"loading the {s.app.profile} profile\u2026")
        try:
            source = MicSource(s.audio.mic_config())
            sink = DeviceSink(s.audio.playback_config())
            self.pipeline = await build_pipeline(s, source, sink, [self.bridge.post], history=self._history())
            self.window.set_ready(True)
            await self.pipeline.run()
        except asyncio.CancelledError:
            raise
        except ModelFileMissing as exc:   # a wrong path: said as it is, no offline profile offered
            self.window.set_ready(False, "see the message below")
            self.bridge.post(StatusMessage(0, 0.0, str(exc), "error"))
        except ModelUnavailable as exc:
            self.window.set_ready(False, "the models are missing (see below)")
            self.model_missing(exc)
        except ForesayError as exc:
            self.window.set_ready(False, "see the message below")
            self.bridge.post(StatusMessage(0, 0.0, str(exc), "error"))
        except Exception as exc:  # shown to the user; the window keeps running
            log.exception("pipeline failed")
            self.window.set_ready(False, "the pipeline stopped (see below)")
            self.bridge.post(StatusMessage(0, 0.0, f"the pipeline stopped: {exc}", "error"))
        finally:
            if self.pipeline is not None:
                self.pipeline.close()
                self.pipeline = None

    def model_missing(self, exc: ModelUnavailable) -> None:
        """The chosen models cannot be had: start on the embedded demo profile and say so, with
        the way to get the real models (one click away). The fallback is not the user's choice:
        the next start tries the chosen profile again. Already on an offline profile: say what
        is missing and offer the other one."""
        wanted = self.settings.app.profile
        retried, self.retry_of = self.retry_of == wanted, None
        text = str(exc).replace(offline_hint(profile=wanted), "").replace(offline_hint(), "").strip()
        offline = [p for p in offline_profiles() if p != wanted]
        if not offline:
            self.bridge.post(StatusMessage(0, 0.0, f"{text} {offline_hint(window=True)}", "error"))
            return
        fallback = offline[0]
        if wanted in offline_profiles():
            self.bridge.post(StatusMessage(0, 0.0, text, "error"))
            self.window.offer_profile(fallback, f"Use the offline profile ({fallback})")
            return
        self.restart(profile=fallback, fallback=True)
        if self.settings.app.profile != fallback:
            return   # the fallback itself could not be loaded; restart() said why
        self.fallback_from = wanted
        self.window.set_state_line(offline_state(fallback))
        if retried:   # "Get the real models" clicked, still without them
            self.bridge.post(StatusMessage(0, 0.0, (
                f"Cannot get the real models of the {wanted!r} profile now: {text.rstrip('.')}. Foresay "
                f"stays on the offline {fallback!r} profile; connect to the internet and click "
                f"\u201cGet the real models\u201d again."), "error"))
        else:
            self.bridge.post(StatusMessage(0, 0.0, (
                f"The {wanted!r} profile cannot start: {text.rstrip('.')}. Foresay runs on the offline "
                f"{fallback!r} profile instead: small "
                f"models trained in-house that know only a toy domain (capitals, timers, arithmetic, ...). "
                f"To get the real models, connect to the internet and click \u201cGet the real models\u201d; "
                f"each start tries the {wanted!r} profile first."), "warning"))
        self.window.offer_profile(wanted, f"Get the real models ({wanted})")


class QuitOnInterrupt:
    """Ctrl+C in the terminal that started the window quits it cleanly (exit status 130) instead
    of raising KeyboardInterrupt inside whichever Qt callback was running."""

    def __init__(self, quit: Callable[[], None]):
        self.quit = quit
        self.interrupted = False
        self._previous = None
        self._timer = None

    def install(self) -> None:
        import signal

        from PySide6.QtCore import QTimer

        self._previous = signal.signal(signal.SIGINT, self._on_interrupt)
        self._timer = QTimer()   # Python runs signal handlers only between its own bytecodes:
        self._timer.timeout.connect(lambda: None)   # wake it while Qt waits for events
        self._timer.start(200)

    def uninstall(self) -> None:
        import signal

        if self._timer is not None:
            self._timer.stop()
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _on_interrupt(self, signum, frame) -> None:
        self.interrupted = True
        self.quit()


def app_icon():
    """Foresay's icon at every size it ships (assets/icons, drawn by packaging/make_icons.py)."""
    from importlib.resources import files

    from PySide6.QtGui import QIcon

    icons = files("foresay.assets").joinpath("icons")
    icon = QIcon()
    for size in (16, 24, 32, 48, 64, 128, 256):
        icon.addFile(str(icons.joinpath(f"foresay-{size}.png")))
    return icon


def run_gui(args) -> int:
    import qasync
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from foresay.app.arguments import settings_from
    from foresay.app.doctor import run_checks
    from foresay.app.version import git_revision
    from foresay.ui.bridge import EventBridge
    from foresay.ui.main_window import MainWindow, WindowConfig
    from foresay.ui.settings import SettingsChoices, SettingsOptions

    settings = settings_from(args)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Foresay")
    app.setDesktopFileName("foresay")  # Wayland/X11 match the window to foresay.desktop's icon
    app.setWindowIcon(app_icon())
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    bridge = EventBridge()
    choices = SettingsChoices(profile=settings.app.profile, verifier=settings.predgen.verifier.split(":")[0],
                              k=int(settings.predgen.verifier.split(":")[1]) if ":" in settings.predgen.verifier else 3,
                              tts_voice=shown_voice(settings),
                              endpointing="adaptive" if settings.app.adaptive_endpointing else "fixed")
    options = SettingsOptions(profiles=("auto", *PROFILES))
    window = MainWindow(bridge, QSettings("Foresay", "Foresay"),
                        WindowConfig(mode=settings.app.mode, build=git_revision()),
                        choices, options, system_checks=lambda: run_checks(settings=controller.settings))
    try:
        from foresay.audio.devices import list_devices
        devices = list_devices()
        window.set_input_devices([d.name for d in devices if d.max_input_channels > 0])
        window.set_output_devices([d.name for d in devices if d.max_output_channels > 0])
    except ForesayError as exc:
        bridge.post(StatusMessage(0, 0.0, str(exc), "warning"))
    window.show()
    config_path = args.config or default_config_path()
    remember = None if args.profile else (lambda name: remember_profile(config_path, name))
    controller = App(settings, window, bridge, lambda name: load_settings(args.config, name, args.set),
                     resume=getattr(args, "resume", False), remember_profile=remember)
    controller.start()
    interrupt = QuitOnInterrupt(app.quit)
    interrupt.install()
    try:
        with loop:
            app.aboutToQuit.connect(lambda: controller.task and controller.task.cancel())
            loop.run_forever()
    finally:
        interrupt.uninstall()
    return 130 if interrupt.interrupted else 0

"""Offscreen Qt helpers for the UI tests (QT_QPA_PLATFORM=offscreen comes from conftest)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from foresay.engine.events import (
    DraftUpdated, FinalTranscript, FirstSentenceReady, PartialTranscript, ReplyDone, SentenceReady,
    SpeechStarted, TurnEnded, TurnMetrics,
)

OUTPUT_DIR = Path(os.environ.get("FORESAY_TEST_OUTPUT", Path(__file__).resolve().parent.parent / "test-output")) / "ui"


@pytest.fixture(scope="session")
def qapp():
    return QApplication.instance() or QApplication([])


@pytest.fixture
def qsettings(tmp_path):
    return QSettings(str(tmp_path / "foresay-ui.ini"), QSettings.Format.IniFormat)


def wait_until(condition, timeout: float = 3.0) -> None:
    """Runs the Qt event loop until `condition()` holds; fails the test after `timeout` s."""
    app = QApplication.instance()
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError("condition not met within %.1f s" % timeout)
        app.processEvents()
        time.sleep(0.002)


def drain() -> None:
    """Delivers every queued event and signal."""
    app = QApplication.instance()
    for _ in range(3):
        app.processEvents()


class Recorder:
    """Records each emission of a Qt signal as a tuple of its arguments."""

    def __init__(self, signal):
        self.calls: list[tuple] = []
        signal.connect(lambda *args: self.calls.append(args))

    def __len__(self):
        return len(self.calls)


def metrics(turn: int, v2v: float, outcome: str = "accepted", **extra) -> TurnMetrics:
    values = {"turn": turn, "user_text": "hi", "reply_text": "hello", "outcome": outcome,
              "endpoint_delay_ms": 300.0, "asr_final_ms": 80.0, "ttfs_ms": 40.0, "nfetfs": 1,
              "tts_first_chunk_ms": 30.0, "audio_latency_ms": 90.0, "voice_to_voice_ms": v2v,
              "underruns": 0}
    values.update(extra)
    return TurnMetrics(turn, 100.0 + turn, values=values)


def mid_turn_events(turn: int = 2, t0: float = 50.0) -> list:
    """A user turn in progress: two partials, a draft that was partly rejected, a prepared first sentence."""
    return [
        SpeechStarted(turn, t0),
        PartialTranscript(turn, t0 + 0.4, revision=1, committed="What's the weather",
                          tentative="like in"),
        DraftUpdated(turn, t0 + 0.5, revision=1, draft="The weather today is sunny and warm.",
                     accepted_tokens=0, p_end_of_turn=0.2),
        PartialTranscript(turn, t0 + 0.8, revision=2, committed="What's the weather like in",
                          tentative="Paris tomorrow"),
        DraftUpdated(turn, t0 + 0.9, revision=2, draft="The weather in Paris tomorrow will be mild.",
                     accepted_tokens=3, p_end_of_turn=0.71, accepted_text="The weather ",
                     rejected_text="today is sunny and warm.", new_text="in Paris tomorrow will be mild."),
        FirstSentenceReady(turn, t0 + 0.9, revision=2, text="The weather in Paris tomorrow will be mild."),
    ]


def finished_turn_events(turn: int = 1, t0: float = 10.0) -> list:
    return [
        SpeechStarted(turn, t0),
        PartialTranscript(turn, t0 + 0.5, revision=1, committed="Hello", tentative="there"),
        TurnEnded(turn, t0 + 1.3, last_voiced_t=t0 + 1.0),
        FinalTranscript(turn, t0 + 1.4, text="Hello there."),
        SentenceReady(turn, t0 + 1.45, index=0, text="Hi! How can I help?"),
        ReplyDone(turn, t0 + 1.6, text="Hi! How can I help?", outcome="accepted"),
        metrics(turn, 620.0),
    ]

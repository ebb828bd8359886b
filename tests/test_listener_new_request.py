"""A new request begun in the resume window right after a turn's end, while the reply plays: the
endpointer opened the turn, so it hears every block of it, whatever the barge-in detector makes
of the voice (nothing the user said is lost)."""
from __future__ import annotations

import numpy as np
from audio_kit import speech_clip

from foresay.audio.blocks import SAMPLE_RATE, AudioBlock
from foresay.audio.endpoint import Endpointer, EndpointerConfig
from foresay.audio.hangover import FixedHangover
from foresay.audio.listener import Listener
from foresay.audio.vad import WebRtcVad
from foresay.engine.events import Event, ReplyStarted, SpeechStarted, TurnEnded, TurnResumed, UserAudio
from foresay.engine.stage import EventBus


class DeafBargeIn:
    """A barge-in detector that never hears the user (their voice stays under its echo gate)."""

    def __init__(self):
        self.armed, self.onset_t, self.speaking_since = False, None, None

    def arm(self, turn_id):
        self.armed = True

    def disarm(self):
        self.armed = False

    def process(self, block, raw=None):
        return []


def test_a_new_request_in_the_resume_window_over_the_reply_keeps_all_its_audio(tmp_path):
    first = speech_clip(tmp_path, "Turn on the lights.", before_s=0.5, after_s=0.0)
    second = speech_clip(tmp_path, "Then tell me how long the walk to the station will take.", before_s=0.0,
                         after_s=1.5, seed=1)
    gap_s = 1.3   # past resume_max_gap_s (1.2): a new request, inside resume_window_s (1.0) of the end
    gap = np.random.default_rng(2).normal(0, 10 ** (-55 / 20), int(gap_s * SAMPLE_RATE)).astype(np.float32)
    samples = np.concatenate([first.samples, gap, second.samples])
    onset = 100.0 + len(first.samples) / SAMPLE_RATE + gap_s + second.speech_start
    events: list[Event] = []
    bus = EventBus(observers=[events.append])
    listener = Listener(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.5)), bus.emit,
                        bargein=DeafBargeIn())
    bus.connect(listener)
    block = 320
    for i in range(0, len(samples), block):
        t = 100.0 + i / SAMPLE_RATE
        if any(isinstance(e, TurnEnded) for e in events) and not listener.bargein.armed:
            bus.emit(ReplyStarted(1, t))   # the first reply starts playing at once
        listener.on_block(AudioBlock(samples[i:i + block], t))
    listener.finish()
    assert not any(isinstance(e, TurnResumed) for e in events)
    started = [e for e in events if isinstance(e, SpeechStarted)]
    assert len(started) == 2 and abs(started[1].t - onset) < 0.1
    heard = sum(len(e.samples) for e in events if isinstance(e, UserAudio) and e.turn_id == started[1].turn_id)
    assert heard / SAMPLE_RATE >= second.speech_end - second.speech_start
    ends = [e for e in events if isinstance(e, TurnEnded) and e.turn_id == started[1].turn_id]
    assert ends and ends[0].last_voiced_t >= 100.0 + len(first.samples) / SAMPLE_RATE + gap_s + second.speech_end - 0.1

"""The user's controls are events: the pipeline sends them on the bus, the listener and the
history act on them, and every observer sees them."""
import pytest
from audio_kit import speech_clip

from foresay.app.pipeline import Pipeline
from foresay.app.turn_log import HistoryWriter, TurnLog
from foresay.audio.blocks import SAMPLE_RATE, AudioBlock
from foresay.audio.endpoint import Endpointer, EndpointerConfig
from foresay.audio.hangover import FixedHangover
from foresay.audio.listener import Listener
from foresay.audio.vad import WebRtcVad
from foresay.engine.events import (BadEvent, ListeningMode, ModeChanged, MuteChanged, NewConversation, SpeechStarted,
                                   TalkPressed, TalkReleased, TurnEnded)
from foresay.engine.stage import EventBus, Stage

T0 = 100.0


class History:
    def __init__(self):
        self.new = 0

    def new_conversation(self):
        self.new += 1


def pipeline(mode="hands-free"):
    seen, now, history = [], {"t": T0}, History()
    bus = EventBus(observers=[seen.append])
    listener = Listener(Endpointer(WebRtcVad(2, 30), EndpointerConfig(mode=mode), FixedHangover(0.5)), bus.emit)
    p = Pipeline(bus=bus, source=None, listener=listener, asr=Stage(), llm=Stage(), speaker=Stage(), sink=None,
                 turn_log=TurnLog(bus.emit), more=[HistoryWriter(history)], clock=lambda: now["t"])
    return p, listener, seen, now, history


def play(listener, samples, t0):
    for i in range(0, len(samples), 320):
        listener.on_block(AudioBlock(samples[i:i + 320], t0 + i / SAMPLE_RATE))


def test_muting_silences_the_microphone_until_unmuted(tmp_path):
    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=0.5, after_s=1.0)
    p, listener, seen, now, _ = pipeline()
    p.set_muted(True)
    play(listener, clip.samples, T0)
    assert not any(isinstance(e, SpeechStarted) for e in seen)
    now["t"] = T0 + 10
    p.set_muted(False)
    play(listener, clip.samples, T0 + 10)
    assert [e.t for e in seen if isinstance(e, MuteChanged)] == [T0, T0 + 10]
    assert [e.muted for e in seen if isinstance(e, MuteChanged)] == [True, False]
    assert [type(e) for e in seen if isinstance(e, (SpeechStarted, TurnEnded))] == [SpeechStarted, TurnEnded]


def test_after_an_unmute_a_turn_ends_as_it_would_have_without_the_mute(tmp_path):
    """The zeros a muted microphone is replaced by are not the room: the next turn is heard
    against the room's noise as before (a floor pulled down to zeros let the room pass as
    voice, and such turns ended late or not at all)."""
    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=1.0, after_s=1.5, noise_db=-50.0)
    room = clip.samples[:SAMPLE_RATE // 2]

    def last_voiced_after(mute_s: float) -> list[float]:
        p, listener, seen, now, _ = pipeline()
        play(listener, room, T0)
        now["t"] = T0 + 0.5
        p.set_muted(True)
        play(listener, room[:int(mute_s * SAMPLE_RATE)] if mute_s else room[:0], T0 + 0.5)
        now["t"] = start = T0 + 0.5 + mute_s
        p.set_muted(False)
        play(listener, clip.samples, start)
        return [round(e.last_voiced_t - start, 2) for e in seen if isinstance(e, TurnEnded)]

    unmuted = last_voiced_after(0.0)
    assert len(unmuted) == 1 and abs(unmuted[0] - clip.speech_end) < 0.1
    after_mute = last_voiced_after(3.0)
    assert len(after_mute) == 1 and abs(after_mute[0] - unmuted[0]) <= 0.031  # within a frame


def test_push_to_talk_turns_run_from_the_press_to_the_release(tmp_path):
    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=1.0, after_s=1.5)
    p, listener, seen, now, _ = pipeline(mode="push-to-talk")
    pressed, released = T0 + 0.5, T0 + clip.speech_end + 0.3
    now["t"] = pressed
    p.press_ptt()
    now["t"] = released
    p.release_ptt()
    play(listener, clip.samples, T0)
    controls = [(type(e), e.t) for e in seen if isinstance(e, (TalkPressed, TalkReleased))]
    assert controls == [(TalkPressed, pressed), (TalkReleased, released)]
    [start] = [e for e in seen if isinstance(e, SpeechStarted)]
    [end] = [e for e in seen if isinstance(e, TurnEnded)]
    assert abs(start.t - pressed) < 0.05 and abs(end.t - released) < 0.05


def test_mode_and_new_conversation_reach_their_stages():
    p, listener, seen, now, history = pipeline()
    p.set_mode("push-to-talk")
    assert listener.endpointer.gate.mode is ListeningMode.PUSH_TO_TALK
    p.new_conversation()
    assert history.new == 1
    assert [type(e) for e in seen] == [ModeChanged, NewConversation]
    assert seen[0].mode is ListeningMode.PUSH_TO_TALK and seen[0].turn_id == 0
    with pytest.raises(BadEvent, match="ModeChanged mode"):
        p.set_mode("whenever")

"""The stage contract: routing by event type, one global event order, turns that close, and
nothing the user said lost between stages."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np
from audio_kit import speech_clip

from foresay.audio.blocks import SAMPLE_RATE, AudioBlock
from foresay.audio.endpoint import Endpointer, EndpointerConfig
from foresay.audio.hangover import FixedHangover
from foresay.audio.listener import Listener
from foresay.audio.vad import WebRtcVad
from foresay.engine.events import (Event, FinalTranscript, PartialTranscript, ReplyDone, ReplyHeard,
                                   SpeechStarted, TurnClosed, TurnEnded, UserAudio)
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.stage import PredGenStage
from foresay.engine.predgen.turn import PredGenConfig
from foresay.engine.stage import EventBus, Stage


@dataclass(frozen=True)
class Ping(Event):
    n: int = 0


@dataclass(frozen=True)
class Pong(Ping):
    pass


class Recorder(Stage):
    consumes = (Ping,)

    def __init__(self, bus: EventBus, echo: bool = False):
        super().__init__(bus.emit)
        self.bus, self.echo, self.seen = bus, echo, []

    def handle(self, event):
        self.seen.append((type(event).__name__, event.n))
        if self.echo and type(event) is Ping:
            self.bus.emit(Pong(0, 0.0, event.n))


def test_the_bus_routes_by_type_in_one_global_order():
    order = []
    bus = EventBus(observers=[lambda e: order.append((type(e).__name__, getattr(e, "n", None)))])
    echoing, listening = Recorder(bus, echo=True), Recorder(bus)
    bus.connect(echoing)
    bus.connect(listening)
    bus.emit(Ping(0, 0.0, 1))
    bus.emit(Ping(0, 0.0, 2))
    bus.emit(TurnEnded(0, 0.0))  # consumed by nobody: only observed
    # Pong is a Ping: both stages get it; it is routed after Ping 1 reached every stage
    assert listening.seen == [("Ping", 1), ("Pong", 1), ("Ping", 2), ("Pong", 2)]
    assert [o for o in order if o[0] != "TurnEnded"] == listening.seen and len(order) == 5


class Failing(Recorder):
    def handle(self, event):
        super().handle(event)
        if type(event) is Ping:
            raise PermissionError(13, "Permission denied")


def test_a_failing_stage_never_leaves_an_event_half_routed():
    bus = EventBus()
    failing, echoing, listening = Failing(bus), Recorder(bus, echo=True), Recorder(bus)
    for stage in (failing, echoing, listening):
        bus.connect(stage)
    try:
        bus.emit(Ping(0, 0.0, 1))
    except PermissionError:
        pass
    else:
        raise AssertionError("the error reaches the emitter")
    # every stage after the failing one got Ping 1, and what it emitted was routed at once
    assert listening.seen == [("Ping", 1), ("Pong", 1)] and failing.seen == [("Ping", 1), ("Pong", 1)]
    bus.emit(Pong(0, 0.0, 2))
    assert listening.seen[-1] == ("Pong", 2) and len(listening.seen) == 3


def test_the_listener_streams_each_sample_of_a_turn_exactly_once(tmp_path):
    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=0.8, after_s=1.5)
    events: list[Event] = []
    endpointer = Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.5))
    listener = Listener(endpointer, events.append)
    block = 320
    for i in range(0, len(clip.samples), block):
        listener.on_block(AudioBlock(clip.samples[i:i + block], 100.0 + i / SAMPLE_RATE))
    listener.finish()
    kinds = [type(e) for e in events]
    assert kinds[0] is SpeechStarted and kinds[-1] is TurnEnded
    audio = [e for e in events if isinstance(e, UserAudio)]
    assert kinds.index(UserAudio) == 1  # the pre-roll follows the start at once
    streamed = np.concatenate([e.samples for e in audio])
    assert np.array_equal(streamed, endpointer.turn.audio(trimmed=False))
    for a, b in zip(audio, audio[1:]):  # contiguous, in order, no sample twice
        assert abs(a.t + len(a.samples) / SAMPLE_RATE - b.t) < 1e-6


class FakeSpeaker(Stage):
    """Plays every reply instantly and completely."""
    consumes = (ReplyDone,)

    def __init__(self, emit):
        super().__init__(emit)

    def handle(self, event):
        if event.outcome not in ("empty", "failed"):
            self.emit(ReplyHeard(event.turn_id, 0.0))


def test_the_listener_hands_the_decision_the_estimate_how_steadily_and_how_it_was_heard():
    from foresay.audio.turn_end import TurnEndDecision
    from foresay.engine.events import DraftUpdated, PauseRechecked, PausedTranscript
    policy = TurnEndDecision()
    bus = EventBus()
    bus.connect(Listener(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), policy), bus.emit))
    policy.begin_turn(1)
    bus.emit(PausedTranscript(1, 0.3, 1, "Set a timer for 5 minutes.", audio_until_t=0.3, rechecking=True))
    bus.emit(DraftUpdated(1, 0.35, 1, "", 0, 0.999, audio_until_t=0.3))
    assert policy.view().verdict == "checking words" and policy.hangover_s() == policy.config.unsteady_s
    bus.emit(PauseRechecked(1, 0.4, 1, steady=True))
    assert policy.view().verdict == "sounds finished"
    bus.emit(PauseRechecked(1, 0.5, 2, steady=False))
    bus.emit(DraftUpdated(1, 0.6, 2, "", 0, 0.999, audio_until_t=0.5))
    assert policy.view().verdict == "unclear words" and policy.hangover_s() == policy.config.unsteady_s
    bus.emit(PauseRechecked(1, 0.7, 3, steady=True))
    bus.emit(DraftUpdated(1, 0.8, 3, "", 0, 0.999, audio_until_t=0.7))
    assert policy.view().verdict == "sounds finished"
    bus.emit(PausedTranscript(1, 0.9, 4, "Set a timer for", audio_until_t=0.9))  # no sentence end written
    bus.emit(DraftUpdated(1, 0.95, 4, "", 0, 0.999, audio_until_t=0.9))
    assert policy.view().verdict == "no sentence end" and policy.hangover_s() == policy.config.open_sentence_s
    bus = EventBus()
    bus.connect(Listener(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), policy), bus.emit,
                         adaptive_endpointing=False))  # the fixed hangover takes no estimate
    bus.emit(PauseRechecked(1, 1.0, 5, steady=False))
    bus.emit(PausedTranscript(1, 1.0, 5, "Set a timer for", audio_until_t=1.0))
    policy.update(0.999, 1, revision=5, audio_until_t=1.0)
    assert policy.view().verdict == "sounds finished"


def test_a_final_transcript_after_the_next_turn_began_is_its_own_request_and_no_word_is_lost(tiny_lm):
    """Turn 1's final transcript arrives after the user already started turn 2 (a slow recognizer;
    a new turn is the turn-taking machine's decision, taken after a real gap): turn 1 is not
    answered, its words enter the history as a request of their own, and turn 2 is answered alone."""
    seen: list[Event] = []
    bus = EventBus(observers=[seen.append])
    conv = Conversation(tiny_lm)
    stage = PredGenStage(conv, bus.emit, PredGenConfig(max_new_tokens=8))
    bus.connect(stage)
    bus.connect(FakeSpeaker(bus.emit))

    async def main():
        bus.emit(SpeechStarted(1, 0.0))
        bus.emit(PartialTranscript(1, 0.5, 1, "set a timer", "for"))
        bus.emit(TurnEnded(1, 1.0))
        bus.emit(SpeechStarted(2, 3.5))
        bus.emit(FinalTranscript(1, 3.6, "set a timer for ten minutes"))
        bus.emit(PartialTranscript(2, 4.0, 1, "what time", "is it"))
        bus.emit(TurnEnded(2, 4.5))
        bus.emit(FinalTranscript(2, 4.6, "what time is it"))
        while not any(isinstance(e, TurnClosed) and e.turn_id == 2 for e in seen):
            await stage.settle()
            await asyncio.sleep(0.01)
        stage.close()

    asyncio.run(main())
    closed = {e.turn_id: e for e in seen if isinstance(e, TurnClosed)}
    assert closed[1].outcome == "unanswered" and closed[1].user_text == "set a timer for ten minutes"
    assert closed[1].reply_text == ""
    assert closed[2].user_text == "what time is it" and closed[2].reply_text
    assert [m["content"] for m in conv.messages if m["role"] == "user"] == ["set a timer for ten minutes",
                                                                             "what time is it"]
    assert not any(isinstance(e, ReplyDone) and e.turn_id == 1 for e in seen)


def test_a_reply_not_yet_heard_when_a_new_request_begins_stops_and_both_requests_stay(tiny_lm):
    """The reply to turn 1 is being made (not heard yet) when the user starts turn 2: it stops,
    turn 1's request enters the history without its unheard reply, and turn 2 is answered alone."""
    seen: list[Event] = []
    bus = EventBus(observers=[seen.append])
    conv = Conversation(tiny_lm)
    stage = PredGenStage(conv, bus.emit, PredGenConfig(max_new_tokens=8))
    bus.connect(stage)

    async def main():
        bus.emit(SpeechStarted(1, 0.0))
        bus.emit(TurnEnded(1, 1.0))
        bus.emit(FinalTranscript(1, 1.0, "set a timer for ten minutes"))
        await asyncio.sleep(0)
        bus.emit(SpeechStarted(2, 3.5))   # no speaker: the reply to turn 1 never started playing
        bus.emit(TurnEnded(2, 4.5))
        bus.emit(FinalTranscript(2, 4.6, "what time is it"))
        while not any(isinstance(e, TurnClosed) and e.turn_id == 2 for e in seen):
            await stage.settle()
            await asyncio.sleep(0.01)
            if any(isinstance(e, ReplyDone) and e.turn_id == 2 for e in seen):
                bus.emit(ReplyHeard(2, 5.0))
        stage.close()

    asyncio.run(main())
    closed = {e.turn_id: e for e in seen if isinstance(e, TurnClosed)}
    assert closed[1].interrupted and closed[1].user_text == "set a timer for ten minutes"
    assert closed[1].reply_text == ""
    assert closed[2].user_text == "what time is it"
    assert [m["content"] for m in conv.messages if m["role"] == "user"] == ["set a timer for ten minutes",
                                                                             "what time is it"]


def test_every_turn_closes_exactly_once_even_when_there_is_nothing_to_answer(tiny_lm):
    seen: list[Event] = []
    bus = EventBus(observers=[seen.append])
    stage = PredGenStage(Conversation(tiny_lm), bus.emit, PredGenConfig(max_new_tokens=8))
    bus.connect(stage)
    bus.connect(FakeSpeaker(bus.emit))

    async def main():
        for turn, text in ((1, ""), (2, "hello there")):
            bus.emit(SpeechStarted(turn, 0.0))
            bus.emit(TurnEnded(turn, 1.0))
            bus.emit(FinalTranscript(turn, 1.0, text))
            while not any(isinstance(e, TurnClosed) and e.turn_id == turn for e in seen):
                await stage.settle()
                await asyncio.sleep(0.01)
        stage.close()

    asyncio.run(main())
    closed = [(e.turn_id, e.outcome) for e in seen if isinstance(e, TurnClosed)]
    assert [c[0] for c in closed] == [1, 2] and closed[0][1] == "empty" and closed[1][1] == "rejected"


def test_runtime_code_does_not_import_training_code():
    """The app's runtime path (models, stages, pipeline) loads without engine/demo."""
    import subprocess
    import sys
    code = ("import sys; import foresay.engine.llm, foresay.engine.asr.whisper.models, foresay.app.pipeline, "
            "foresay.app.assemble, foresay.engine.predgen.stage, foresay.engine.tts.speaker; "
            "bad = sorted(m for m in sys.modules if m.startswith('foresay.engine.demo')); "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


class QuietBargeIn:
    """A barge-in detector that hears the user from `onset` on but never interrupts."""

    def __init__(self, onset):
        self.onset, self.armed, self.onset_t = onset, False, None
        self.speaking_since = None

    def arm(self, turn_id):
        self.armed = True

    def disarm(self):
        self.armed = False

    def process(self, block, raw=None):
        if block.t >= self.onset:
            self.speaking_since = self.onset
        return []


def test_speech_over_a_reply_that_never_interrupts_it_becomes_the_next_turn(tmp_path):
    """The user talks over the end of the reply (3 s, too quiet or too short a run for a
    barge-in): when the reply ends, all of it goes to the endpointer and makes the next turn."""
    from foresay.engine.events import ReplyHeard, ReplyStarted
    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=1.0, after_s=1.5)
    events: list[Event] = []
    onset = 100.0 + clip.speech_start
    bus = EventBus(observers=[events.append])
    listener = Listener(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.5)), bus.emit,
                        bargein=QuietBargeIn(onset))
    bus.connect(listener)
    bus.emit(ReplyStarted(7, 100.0))
    block = 320
    reply_ends = 100.0 + clip.speech_start + 1.5  # mid-sentence
    for i in range(0, len(clip.samples), block):
        t = 100.0 + i / SAMPLE_RATE
        if t >= reply_ends and listener.bargein.armed:
            bus.emit(ReplyHeard(7, t))
        listener.on_block(AudioBlock(clip.samples[i:i + block], t))
    listener.finish()
    started = [e for e in events if isinstance(e, SpeechStarted)]
    assert len(started) == 1 and abs(started[0].t - onset) < 0.1  # from the first word, not the last
    audio = [e for e in events if isinstance(e, UserAudio)]
    assert audio[0].t <= onset - 0.2


def test_a_failing_speculation_falls_back_to_a_plain_reply(tiny_lm, monkeypatch):
    """The LLM failed while speculating (a served engine answered 500, say): the user is told, and
    the final transcript still gets its reply, decoded without speculation; nothing is lost."""
    from foresay.engine.errors import ForesayError
    from foresay.engine.events import StatusMessage
    from foresay.engine.predgen.turn import PredGenTurn

    def broken(self, *args, **kwargs):
        raise ForesayError("the LLM server answered 500")
    monkeypatch.setattr(PredGenTurn, "update", broken)
    seen: list[Event] = []
    bus = EventBus(observers=[seen.append])
    stage = PredGenStage(Conversation(tiny_lm), bus.emit, PredGenConfig(max_new_tokens=8))
    bus.connect(stage)
    bus.connect(FakeSpeaker(bus.emit))

    async def main():
        bus.emit(SpeechStarted(1, 0.0))
        bus.emit(PartialTranscript(1, 0.5, 1, "what is the", "weather"))
        await stage.settle()
        bus.emit(TurnEnded(1, 1.0))
        bus.emit(FinalTranscript(1, 1.0, "what is the weather"))
        while not any(isinstance(e, TurnClosed) for e in seen):
            await stage.settle()
            await asyncio.sleep(0.01)
        stage.close()

    asyncio.run(main())
    assert any(isinstance(e, StatusMessage) and "500" in e.text for e in seen)
    [closed] = [e for e in seen if isinstance(e, TurnClosed)]
    assert closed.outcome == "baseline" and closed.reply_text and closed.user_text == "what is the weather"

"""A turn the user reopened after its end (`TurnResumed`): the reply already playing is held until
the turn's words decide. New words stop it, and the turn is answered once, whole. A sound with no
words (a breath, a laugh) keeps it (`ReplyKept`), and the turn closes once, with that reply."""
from __future__ import annotations

import asyncio

from foresay.engine.events import (DraftUpdated, Event, FinalTranscript, Interrupt, PartialTranscript,
                                   PausedTranscript, ReplyDone, ReplyHeard, ReplyKept, ReplyStarted, SpeechStarted,
                                   TurnClosed, TurnEnded, TurnResumed)
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.stage import PredGenStage, says_more
from foresay.engine.predgen.turn import PredGenConfig
from foresay.engine.stage import EventBus, Stage


class HeldSpeaker(Stage):
    """Starts playing each reply and finishes it only when told to."""
    consumes = (ReplyDone,)

    def __init__(self, emit):
        super().__init__(emit)
        self.done = []

    def handle(self, event):
        if event.outcome not in ("empty", "failed"):
            self.emit(ReplyStarted(event.turn_id, 0.0))
            self.done.append(event)

    def finish(self, turn_id):
        self.emit(ReplyHeard(turn_id, 0.0))


def held_reply_rig(conv: Conversation):
    """PredGen on a bus beside a `HeldSpeaker`: (the events seen, the bus, the stage, the speaker,
    `until(predicate)`, which lets the stage work until the predicate holds)."""
    seen: list[Event] = []
    bus = EventBus(observers=[seen.append])
    stage = PredGenStage(conv, bus.emit, PredGenConfig(max_new_tokens=8))
    speaker = HeldSpeaker(bus.emit)
    bus.connect(stage)
    bus.connect(speaker)

    async def until(predicate):
        while not predicate():
            await stage.settle()
            await asyncio.sleep(0.01)
    return seen, bus, stage, speaker, until


async def _answer_then_reopen(rig, text: str, resumed_at: float) -> None:
    """Turn 1 says `text`, ends at 1.0 s, its reply starts playing, and the user's voice reopens it."""
    seen, bus, stage, speaker, until = rig
    bus.emit(SpeechStarted(1, 0.0))
    bus.emit(PausedTranscript(1, 0.5, 1, text, audio_until_t=0.5))
    bus.emit(TurnEnded(1, 1.0))
    bus.emit(FinalTranscript(1, 1.0, text))
    await until(lambda: speaker.done)
    bus.emit(TurnResumed(1, resumed_at, ended_t=1.0))


async def _answered_again(rig, text: str) -> None:
    """The reopened turn ends with `text`: its second reply is played to the end, the turn closes."""
    seen, bus, stage, speaker, until = rig
    bus.emit(TurnEnded(1, 2.0))
    bus.emit(FinalTranscript(1, 2.0, text))
    await until(lambda: len(speaker.done) == 2)
    speaker.finish(1)
    await until(lambda: any(isinstance(e, TurnClosed) for e in seen))
    stage.close()


def test_only_words_beyond_the_request_say_more():
    assert not says_more("What is the capital of France?", "what is the capital of France")
    assert not says_more("what is the", "what is the capital of France")  # a hop's partial
    assert not says_more("", "what is the capital of France")            # a laugh heard as nothing
    assert says_more("what is the capital of France and Spain", "what is the capital of France")
    assert says_more("what was the capital", "what is the capital of France")


def test_an_early_endpoint_recovers_the_reply_stops_and_the_turn_goes_on(tiny_lm):
    """The end of the turn was declared too early and the reply began; the user goes on: the
    reply stops once their words go beyond the request, nothing of it enters the history, and
    the turn is answered once with all its words."""
    conv = Conversation(tiny_lm)
    rig = seen, bus, stage, speaker, until = held_reply_rig(conv)

    async def main():
        await _answer_then_reopen(rig, "set a timer for", 1.2)
        bus.emit(PartialTranscript(1, 1.4, 2, "set a", "timer"))
        await stage.settle()
        assert not any(isinstance(e, Interrupt) for e in seen)  # nothing new yet: the reply is held
        bus.emit(PartialTranscript(1, 1.5, 3, "set a timer for ten", "minutes"))
        assert any(isinstance(e, Interrupt) and e.turn_id == 1 for e in seen)
        await _answered_again(rig, "set a timer for ten minutes")

    asyncio.run(asyncio.wait_for(main(), 60))
    closed = [e for e in seen if isinstance(e, TurnClosed)]
    assert len(closed) == 1 and closed[0].user_text == "set a timer for ten minutes"
    assert [m["content"] for m in conv.messages if m["role"] == "user"] == ["set a timer for ten minutes"]
    assert closed[0].reply_text == speaker.done[1].text and len(conv.messages) == 2
    assert not any(isinstance(e, ReplyKept) for e in seen)


def test_a_breath_after_the_request_keeps_the_reply_and_the_turn_is_answered_once(tiny_lm):
    """A sound after the request reopens the turn while the reply plays; it ends with the same
    words. The reply is kept (neither stopped nor made again), its playback's end waits for the
    words, and the turn closes once, with the reply as heard."""
    conv = Conversation(tiny_lm)
    rig = seen, bus, stage, speaker, until = held_reply_rig(conv)

    async def main():
        await _answer_then_reopen(rig, "what is the capital of France", 1.3)
        bus.emit(PausedTranscript(1, 1.6, 2, "what is the capital of France", audio_until_t=1.6))
        speaker.finish(1)  # the reply ends while the words are still out
        await stage.settle()
        assert not any(isinstance(e, TurnClosed) for e in seen)
        bus.emit(TurnEnded(1, 1.9))
        bus.emit(FinalTranscript(1, 1.9, "What is the capital of France?"))
        await until(lambda: any(isinstance(e, TurnClosed) for e in seen))
        stage.close()

    asyncio.run(asyncio.wait_for(main(), 60))
    assert not any(isinstance(e, Interrupt) for e in seen)
    assert [(e.turn_id, e.ended_t) for e in seen if isinstance(e, ReplyKept)] == [(1, 1.0)]
    assert len(speaker.done) == 1 and sum(isinstance(e, ReplyDone) for e in seen) == 1
    [closed] = [e for e in seen if isinstance(e, TurnClosed)]
    assert (closed.user_text, closed.reply_text) == ("what is the capital of France", speaker.done[0].text)
    assert [m["content"] for m in conv.messages if m["role"] == "user"] == ["what is the capital of France"]


def test_a_held_reply_the_user_talks_over_stops_and_the_turn_is_answered_again(tiny_lm):
    """A barge-in (or the stop key) during the hold stops the reply as new words would: nothing of
    it enters the history, and the turn's final is answered."""
    conv = Conversation(tiny_lm)
    rig = seen, bus, stage, speaker, until = held_reply_rig(conv)

    async def main():
        await _answer_then_reopen(rig, "tell me a joke", 1.3)
        bus.emit(Interrupt(1, 1.5))
        speaker.finish(1)
        await _answered_again(rig, "tell me a joke")

    asyncio.run(asyncio.wait_for(main(), 60))
    assert sum(isinstance(e, Interrupt) for e in seen) == 1  # the stage adds none of its own
    [closed] = [e for e in seen if isinstance(e, TurnClosed)]
    assert closed.reply_text == speaker.done[1].text
    assert [m["role"] for m in conv.messages] == ["user", "assistant"]


def test_a_turn_resumed_without_new_words_still_gets_its_end_estimate(tiny_lm):
    """A breath after the declared end reopens the turn and its pause is decoded to the same words:
    the turn must still learn its P(end of turn) for them, or it stays open for the no-estimate
    silence, and a reply that was stopped starts again only then."""
    seen, bus, stage, speaker, until = held_reply_rig(Conversation(tiny_lm))

    def estimate(revision):
        return next((e for e in seen if isinstance(e, DraftUpdated) and e.revision == revision), None)

    async def main():
        bus.emit(SpeechStarted(1, 0.0))
        bus.emit(PausedTranscript(1, 0.5, 1, "what is the capital of France", audio_until_t=0.5))
        await until(lambda: estimate(1) is not None)
        bus.emit(TurnEnded(1, 1.0))
        bus.emit(FinalTranscript(1, 1.0, "what is the capital of France"))
        await until(lambda: speaker.done)
        bus.emit(TurnResumed(1, 1.2, ended_t=1.0))
        bus.emit(PausedTranscript(1, 1.5, 2, "what is the capital of France", audio_until_t=1.5))
        await until(lambda: estimate(2) is not None)
        stage.close()

    asyncio.run(asyncio.wait_for(main(), 60))
    assert estimate(2).audio_until_t == 1.5
    assert abs(estimate(2).p_end_of_turn - estimate(1).p_end_of_turn) < 1e-4

"""A new request answered while the previous reply still plays: the user heard some of that reply,
so the new request did not stop it, and did not talk over it loudly enough to interrupt it. The
earlier reply stops, its turn closes as far as heard, and only then is the new one answered."""
from __future__ import annotations

import asyncio

from foresay.engine.events import (Event, FinalTranscript, Interrupt, ReplyDone, ReplyHeard, ReplyStarted,
                                   SpeechStarted, TurnClosed, TurnEnded)
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.stage import PredGenStage
from foresay.engine.predgen.turn import PredGenConfig
from foresay.engine.stage import EventBus, Stage


class SlowSpeaker(Stage):
    """Starts playing each reply and plays on until it is interrupted (4 characters heard)."""
    consumes = (ReplyDone, Interrupt)

    def __init__(self, emit):
        super().__init__(emit)
        self.playing: set[int] = set()

    def handle(self, event):
        if isinstance(event, ReplyDone) and event.outcome not in ("empty", "failed"):
            self.playing.add(event.turn_id)
            self.emit(ReplyStarted(event.turn_id, 0.0))
        elif isinstance(event, Interrupt) and event.turn_id in self.playing:
            self.playing.discard(event.turn_id)
            self.emit(ReplyHeard(event.turn_id, 0.0, heard_chars=4, interrupted=True))


def test_the_reply_still_playing_stops_and_its_turn_closes_before_the_next_is_answered(tiny_lm):
    seen: list[Event] = []
    bus = EventBus(observers=[seen.append])
    conv = Conversation(tiny_lm)
    stage = PredGenStage(conv, bus.emit, PredGenConfig(max_new_tokens=8))
    bus.connect(stage)
    speaker = SlowSpeaker(bus.emit)
    bus.connect(speaker)

    async def main():
        bus.emit(SpeechStarted(1, 0.0))
        bus.emit(TurnEnded(1, 1.0))
        bus.emit(FinalTranscript(1, 1.0, "set a timer for ten minutes"))
        while 1 not in speaker.playing:
            await asyncio.sleep(0.01)
        bus.emit(SpeechStarted(2, 3.5))   # heard in part: the new request does not stop it
        bus.emit(TurnEnded(2, 4.5))
        bus.emit(FinalTranscript(2, 4.6, "what time is it"))
        for _ in range(500):
            if 2 in speaker.playing:
                break
            await asyncio.sleep(0.01)
        stage.close()

    asyncio.run(main())
    closed = [e for e in seen if isinstance(e, TurnClosed)]
    assert [e.turn_id for e in closed] == [1]
    assert closed[0].interrupted and closed[0].user_text == "set a timer for ten minutes"
    order = [type(e).__name__ for e in seen if e.turn_id in (1, 2) and isinstance(e, (TurnClosed, ReplyDone))]
    assert order.index("TurnClosed") < len(order) - 1   # turn 1 closed before turn 2's reply was done
    assert 2 in speaker.playing
    assert [m["content"] for m in conv.messages if m["role"] == "user"][:1] == ["set a timer for ten minutes"]

import asyncio

from foresay.engine.compute_gate import ComputeGate
from foresay.engine.events import (DraftUpdated, FinalTranscript, FirstSentenceReady, Interrupt,
                                   PartialTranscript, ReplyDone, ReplyHeard, ReplyStarted, SentenceReady, TurnClosed)
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.stage import PredGenStage, partial_prompt
from foresay.engine.predgen.turn import PredGenConfig
from foresay.engine.sentences import SplitterConfig
from foresay.engine.stage import EventBus

from predgen_helpers import cold_greedy

CONFIG = PredGenConfig(max_new_tokens=24, max_draft_tokens=20, margin_tokens=2,
                       splitter=SplitterConfig(max_chars=40, min_cut_chars=10))


def wired(conv, **kwargs):
    """The stage on a bus: returns it, the bus, and the list of what the stage emitted."""
    emitted = []
    bus = EventBus()
    stage = PredGenStage(conv, lambda e: (emitted.append(e), bus.emit(e)), CONFIG, **kwargs)
    bus.connect(stage)
    return stage, bus, emitted


def test_partial_prompt_drops_the_growing_word():
    assert partial_prompt(PartialTranscript(1, 0.0, 3, "what is", "the wea")) == "what is the"
    assert partial_prompt(PartialTranscript(1, 0.0, 3, "what is the", "")) == "what is the"


def test_stage_streams_a_lossless_reply_from_transcript_events(tiny_lm):
    stage, bus, events = wired(Conversation(tiny_lm))

    async def main():
        await stage.start()
        words = "could you tell me about the weather in Paris".split()
        for i in range(1, len(words)):
            bus.emit(PartialTranscript(1, 0.0, i, " ".join(words[:i]), words[i]))
            await stage.settle()
        bus.emit(FinalTranscript(1, 0.0, " ".join(words)))
        await stage.settle()
        done = events[-1]
        bus.emit(ReplyHeard(1, 0.0))  # played to the end: the whole reply enters the history
        await stage.settle()
        stage.close()
        [closed] = [e for e in events if isinstance(e, TurnClosed)]
        return stage.turn.record, done, closed.reply_text

    record, done, heard = asyncio.run(main())
    kinds = [type(e) for e in events]
    assert DraftUpdated in kinds and FirstSentenceReady in kinds
    sentences = [e for e in events if isinstance(e, SentenceReady)]
    assert [s.index for s in sentences] == list(range(len(sentences)))
    assert sentences[0].text == record.first_sentence
    assert isinstance(done, ReplyDone) and done.text == heard
    turn = stage.turn
    assert turn.reply_ids() == cold_greedy(tiny_lm, turn.prompt.ids, CONFIG.max_new_tokens)


def test_barge_in_cancels_the_reply_and_keeps_the_heard_part(tiny_lm):
    conv = Conversation(tiny_lm)
    stage, bus, events = wired(conv)

    def barge_in(event):  # the user speaks over the reply as its first sentence is out
        if event.index == 0:
            bus.emit(ReplyStarted(1, 0.0))
            bus.emit(Interrupt(1, 0.0))
            bus.emit(ReplyHeard(1, 0.0, heard_chars=5, interrupted=True))
    bus.subscribe(SentenceReady, barge_in)

    async def main():
        bus.emit(FinalTranscript(1, 0.0, "tell me a long story"))
        await stage.settle()
        stage.close()
        [closed] = [e for e in events if isinstance(e, TurnClosed)]
        return closed.reply_text

    heard = asyncio.run(main())
    assert not any(isinstance(e, ReplyDone) for e in events)
    assert 5 <= len(heard) < 40 and conv.messages[-1]["content"] == heard


def test_baseline_stage_ignores_partials(tiny_lm):
    stage, bus, events = wired(Conversation(tiny_lm), speculate=False)

    async def main():
        bus.emit(PartialTranscript(1, 0.0, 1, "hello", "there"))
        bus.emit(FinalTranscript(1, 0.0, "hello there"))
        await stage.settle()
        stage.close()
        return stage.turn.record

    record = asyncio.run(main())
    assert record.outcome == "baseline"
    assert not any(isinstance(e, DraftUpdated) for e in events)
    assert isinstance(events[-1], ReplyDone)


async def _first_update(stage):
    """Wait (briefly) until the stage's turn has recorded a transcript update."""
    for _ in range(500):
        if stage.turn is not None and stage.turn.updates:
            return stage.turn.updates[-1]
        await asyncio.sleep(0.01)
    raise AssertionError("the partial was never verified")


def test_speculation_yields_while_the_asr_decodes_and_goes_on_when_it_is_done(tiny_lm):
    """After a voice pause no partial comes for the rest of the silence: the draft must still get
    its first sentence once the decode is done, without a newer transcript."""
    gate = ComputeGate()
    stage, bus, events = wired(Conversation(tiny_lm), gate=gate)

    async def main():
        with gate.claim():  # an ASR decode holds the processor (or waits for it)
            bus.emit(PartialTranscript(1, 0.0, 1, "what is the weather", "in"))
            yielded = await _first_update(stage)
            await asyncio.sleep(0.05)
            held = len(stage.turn.draft)
        await stage.settle()  # the decode is done; no newer partial comes
        stage.close()
        return yielded, held, stage.turn.updates[-1]

    yielded, held, resumed = asyncio.run(main())
    assert yielded.passes == 1 and yielded.draft_after == 1 and yielded.yielded  # verification only
    assert held == 1   # nothing drafted while the gate was held
    assert resumed.revision == 1 and resumed.draft_after > 1 and not resumed.yielded
    assert any(isinstance(e, FirstSentenceReady) and e.revision == 1 for e in events)


def test_yielded_speculation_stops_for_the_final_transcript(tiny_lm):
    """A final transcript answers at once, even while urgent work still holds the gate."""
    gate = ComputeGate()
    stage, bus, events = wired(Conversation(tiny_lm), gate=gate)

    async def main():
        with gate.claim():
            bus.emit(PartialTranscript(1, 0.0, 1, "what is the weather", "in"))
            await _first_update(stage)
            bus.emit(FinalTranscript(1, 0.0, "what is the weather in Paris"))
            for _ in range(500):
                if any(isinstance(e, ReplyDone) for e in events):
                    break
                await asyncio.sleep(0.01)
        await stage.settle()
        stage.close()

    asyncio.run(main())
    assert any(isinstance(e, ReplyDone) for e in events)
    assert [u.revision for u in stage.turn.updates] == [1]   # the old draft was not extended again


def test_the_estimate_is_sent_before_the_draft_is_extended(tiny_lm):
    """P(end of turn) comes from the verification pass: the decision gets it before the
    extension steps, and once more with the extended draft."""
    stage, bus, events = wired(Conversation(tiny_lm))

    async def main():
        bus.emit(PartialTranscript(1, 0.0, 1, "could you tell me about the weather in", "Paris"))
        await stage.settle()
        stage.close()

    asyncio.run(main())
    kinds = [type(e) for e in events if isinstance(e, (DraftUpdated, FirstSentenceReady))]
    assert kinds[0] is DraftUpdated and FirstSentenceReady in kinds and kinds[-1] is DraftUpdated
    first, last = [e for e in events if isinstance(e, DraftUpdated)]
    assert first.revision == last.revision == 1 and first.p_end_of_turn == last.p_end_of_turn
    assert len(first.draft) < len(last.draft)


def test_a_transcript_of_marks_alone_is_not_answered_and_stops_no_reply(tiny_lm):
    """A recognizer writes "." or ". . ." over a noise it could not read: nothing was said. The
    reply still playing plays on, and the turn closes as empty."""
    stage, bus, events = wired(Conversation(tiny_lm))

    async def main():
        bus.emit(FinalTranscript(1, 0.0, "tell me a story"))
        await stage.settle()
        bus.emit(ReplyStarted(1, 0.0))
        bus.emit(FinalTranscript(2, 0.0, " . . ."))
        await stage.settle()
        stage.close()

    asyncio.run(main())
    assert not any(isinstance(e, Interrupt) for e in events)
    [closed] = [e for e in events if isinstance(e, TurnClosed)]
    assert (closed.turn_id, closed.outcome) == (2, "empty")
    assert [(e.turn_id, e.outcome) for e in events if isinstance(e, ReplyDone)][-1] == (2, "empty")

import asyncio

from foresay.engine.events import (DraftUpdated, FinalTranscript, FirstSentenceReady,
                                   PartialTranscript, ReplyDone, SentenceReady)
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.stage import PredGenStage, partial_prompt
from foresay.engine.predgen.turn import PredGenConfig
from foresay.engine.sentences import SplitterConfig

from predgen_helpers import cold_greedy

CONFIG = PredGenConfig(max_new_tokens=24, max_draft_tokens=20, margin_tokens=2,
                       splitter=SplitterConfig(max_chars=40, min_cut_chars=10))


def test_partial_prompt_drops_the_growing_word():
    assert partial_prompt(PartialTranscript(1, 0.0, 3, "what is", "the wea")) == "what is the"
    assert partial_prompt(PartialTranscript(1, 0.0, 3, "what is the", "")) == "what is the"


def test_stage_streams_a_lossless_reply_from_transcript_events(tiny_lm):
    events = []

    async def main():
        stage = PredGenStage(Conversation(tiny_lm), events.append, CONFIG)
        await stage.warmup()
        words = "could you tell me about the weather in Paris".split()
        for i in range(1, len(words)):
            stage.on_partial(PartialTranscript(1, 0.0, i, " ".join(words[:i]), words[i]))
            await stage.settled()
        record = await stage.on_final(FinalTranscript(1, 0.0, " ".join(words)))
        heard = await stage.commit()
        stage.close()
        return stage, record, heard

    stage, record, heard = asyncio.run(main())
    kinds = [type(e) for e in events]
    assert DraftUpdated in kinds and FirstSentenceReady in kinds
    sentences = [e for e in events if isinstance(e, SentenceReady)]
    assert [s.index for s in sentences] == list(range(len(sentences)))
    assert sentences[0].text == record.first_sentence
    done = events[-1]
    assert isinstance(done, ReplyDone) and done.text == heard
    turn = stage.turn
    assert turn.reply_ids() == cold_greedy(tiny_lm, turn.prompt.ids, CONFIG.max_new_tokens)


def test_barge_in_cancels_the_reply_and_keeps_the_heard_part(tiny_lm):
    events = []

    async def main():
        conv = Conversation(tiny_lm)
        stage = PredGenStage(conv, events.append, CONFIG)
        task = asyncio.create_task(stage.on_final(FinalTranscript(1, 0.0, "tell me a long story")))
        while not any(isinstance(e, SentenceReady) for e in events):
            await asyncio.sleep(0.001)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        heard = await stage.commit(heard_chars=5)
        stage.close()
        return conv, heard

    conv, heard = asyncio.run(main())
    assert not any(isinstance(e, ReplyDone) for e in events)
    assert 5 <= len(heard) < 40 and conv.messages[-1]["content"] == heard


def test_baseline_stage_ignores_partials(tiny_lm):
    events = []

    async def main():
        stage = PredGenStage(Conversation(tiny_lm), events.append, CONFIG, speculate=False)
        stage.on_partial(PartialTranscript(1, 0.0, 1, "hello", "there"))
        record = await stage.on_final(FinalTranscript(1, 0.0, "hello there"))
        stage.close()
        return record

    record = asyncio.run(main())
    assert record.outcome == "baseline"
    assert not any(isinstance(e, DraftUpdated) for e in events)
    assert isinstance(events[-1], ReplyDone)


def test_speculation_yields_while_the_asr_decodes(tiny_lm):
    events = []
    busy = {"asr": True}

    async def main():
        stage = PredGenStage(Conversation(tiny_lm), events.append, CONFIG, yield_to=lambda: busy["asr"])
        stage.on_partial(PartialTranscript(1, 0.0, 1, "what is the", "weather"))
        await stage.settled()
        yielded = stage.turn.updates[-1]
        busy["asr"] = False
        stage.on_partial(PartialTranscript(1, 0.0, 2, "what is the weather", "in"))
        await stage.settled()
        stage.close()
        return yielded, stage.turn.updates[-1]

    yielded, free = asyncio.run(main())
    assert yielded.passes == 1 and yielded.draft_after == 1   # verification only, no extension
    assert free.draft_after > 1

"""The speaking stage with each CPU voice: while the end of the turn is uncertain the draft's first
sentence is prepared and held (a changed draft replaces it); the final sentence plays the held audio
at once, resampled for the output."""
import time

import numpy as np
import pytest
import soundfile as sf

from foresay.audio.wav_sink import WavSink
from foresay.engine.events import FirstSentenceReady, ReplyDone, ReplyHeard, ReplyStarted, SentenceReady
from foresay.engine.tts.base import PreparationOptions
from foresay.engine.tts.espeak import EspeakConfig, EspeakEngine
from foresay.engine.tts.hold import FixedHold
from foresay.engine.tts.piper_engine import PiperConfig, PiperEngine
from foresay.engine.tts.speaker import Speaker
from tts_support import run_async

DRAFT, FINAL = "Sure, the station is close.", "Sure, the station is near."


def _engine(name, request):
    options = PreparationOptions(hold=FixedHold(0.4))
    if name == "espeak":
        return EspeakEngine(EspeakConfig(preparation=options))
    return PiperEngine(PiperConfig(preparation=options), model=request.getfixturevalue("piper_model"))


async def _speaking(tts, sink):
    """(the sink, started; a Speaker into it, warmed up; the list of what it emits)."""
    await sink.start()
    seen = []
    speaker = Speaker(tts, sink, seen.append)
    await speaker.start()
    return sink, speaker, seen


@pytest.mark.parametrize("name", ["espeak", "piper"])
def test_the_held_draft_plays_at_once_when_the_final_sentence_matches(name, request, tmp_path):
    tts = _engine(name, request)

    @run_async
    async def main():
        sink, speaker, seen = await _speaking(tts, WavSink(tmp_path / "reply.wav", sample_rate=24_000,
                                                           realtime=False))
        speaker.handle(FirstSentenceReady(1, time.monotonic(), 0, DRAFT))
        [first] = tts.held()
        await first.ready()
        assert first.holding
        speaker.handle(FirstSentenceReady(1, time.monotonic(), 1, FINAL))  # the draft changed
        [held] = tts.held()
        assert first.cancelled and held is not first and held.text == FINAL
        await held.ready()
        speaker.handle(SentenceReady(1, time.monotonic(), 0, FINAL, 0))
        speaker.handle(ReplyDone(1, time.monotonic(), FINAL, "accepted"))
        await speaker.settle()
        await sink.close()
        timing = held.timing()
        assert timing.chunks[0].ready_at < timing.stream_started_at and timing.ttfc_stream_s < 0.05
        assert [type(e) for e in seen if isinstance(e, (ReplyStarted, ReplyHeard))] == [ReplyStarted, ReplyHeard]
        assert [e.heard_chars for e in seen if isinstance(e, ReplyHeard)] == [None]

    main()
    audio, rate = sf.read(tmp_path / "reply.wav")
    assert rate == 24_000 and 1.0 < audio.size / rate < 4.0


REPLY = "The station is near. Walk two blocks north and turn left at the bakery."


@pytest.mark.parametrize("kept", [True, False])
def test_a_reply_falls_silent_while_its_turn_is_reopened(kept, tmp_path):
    """The user's voice reopens the turn being answered: the reply pauses where it is. Kept (no
    new word), it plays on from there, whole; stopped, the user heard only what came before."""
    import asyncio

    from foresay.engine.events import Interrupt, ReplyKept, TurnResumed

    tts = EspeakEngine(EspeakConfig())

    @run_async
    async def main():
        sink, speaker, seen = await _speaking(tts, WavSink(tmp_path / "reply.wav", sample_rate=16_000))
        speaker.handle(SentenceReady(1, time.monotonic(), 0, REPLY, 0))
        speaker.handle(ReplyDone(1, time.monotonic(), REPLY, "accepted"))
        while not any(isinstance(e, ReplyStarted) for e in seen):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.8)
        speaker.handle(TurnResumed(1, time.monotonic(), ended_t=0.0))
        await asyncio.sleep(0.6)
        speaker.handle(ReplyKept(1, time.monotonic(), ended_t=0.0) if kept else Interrupt(1, time.monotonic()))
        await speaker.settle()
        await sink.close()
        return [e for e in seen if isinstance(e, ReplyHeard)]

    [heard] = main()
    audio, rate = sf.read(tmp_path / "reply.wav")
    loud = np.flatnonzero(np.sqrt(np.mean(audio[:audio.size // 160 * 160].reshape(-1, 160) ** 2, axis=1)) > 0.01)
    spoken = (loud[-1] - loud[0] + 1) / 100
    if kept:  # all of it, around a silence as long as the hold, longer than any gap between words
        assert heard.heard_chars is None and not heard.interrupted
        assert np.diff(loud).max() / 100 == pytest.approx(0.6, abs=0.15)
        assert spoken > 2.0
    else:     # what came before the pause, nothing after
        assert heard.interrupted and 0 < heard.heard_chars < len(REPLY)
        assert spoken == pytest.approx(0.8, abs=0.15)

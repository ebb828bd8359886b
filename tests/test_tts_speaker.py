"""The speaking stage with each CPU voice: while the end of the turn is uncertain the draft's first
sentence is prepared and held (a changed draft replaces it); the final sentence plays the held audio
at once, resampled for the output."""
import time

import pytest
import soundfile as sf

from foresay.audio.playback import WavSink
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


@pytest.mark.parametrize("name", ["espeak", "piper"])
def test_the_held_draft_plays_at_once_when_the_final_sentence_matches(name, request, tmp_path):
    tts = _engine(name, request)

    @run_async
    async def main():
        sink = WavSink(tmp_path / "reply.wav", sample_rate=24_000, realtime=False)
        await sink.start()
        seen = []
        speaker = Speaker(tts, sink, seen.append)
        await speaker.start()
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

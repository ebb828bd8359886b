"""A hop does not start in the voice's silence: begun there it would hear no new word, and the
pause decode (the turn's final, on the user's critical path) would wait behind it."""
import asyncio

import numpy as np

from test_asr_stage import WORDS, wired
from foresay.engine.asr.scripted import ScriptedBackend, SyntheticUtterance
from foresay.engine.asr.stage import HOP_QUIET_S
from foresay.engine.asr.streaming import StreamingConfig
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.events import PartialTranscript, UserAudio


def _hops(voiced_until, then_voice):
    """Words, heard by hops; then 0.08 s of audio past the voice (the endpointer's pause comes at
    0.1 s) and three hop periods; then, with `then_voice`, the voice back. Returns the partials
    made in the quiet and in all."""
    audio = SyntheticUtterance(WORDS).audio()
    silence = np.zeros(int(0.08 * SAMPLE_RATE), np.float32)
    stage, send, events = wired(ScriptedBackend(SyntheticUtterance(WORDS)), StreamingConfig(hop_ms=50))
    seen = {}

    async def main():
        end = len(audio) / SAMPLE_RATE
        send(UserAudio(1, 0.0, audio, voiced_until_t=end))
        await asyncio.sleep(0.2)
        before = sum(isinstance(e, PartialTranscript) for e in events)
        send(UserAudio(1, end, silence, voiced_until_t=voiced_until(end)))
        await asyncio.sleep(0.2)
        seen["quiet"] = sum(isinstance(e, PartialTranscript) for e in events) - before
        if then_voice:
            send(UserAudio(1, end + 0.08, audio[:1600], voiced_until_t=end + 0.18))
            await asyncio.sleep(0.2)
        seen["after"] = sum(isinstance(e, PartialTranscript) for e in events) - before
        await stage.settle()
        stage.close()
    asyncio.run(main())
    return seen


def test_no_hop_while_the_voice_is_quiet_and_hops_again_when_it_comes_back():
    assert 0.08 > HOP_QUIET_S
    seen = _hops(lambda end: end, then_voice=True)
    assert seen["quiet"] == 0 and seen["after"] >= 1


def test_hops_as_before_while_the_voice_goes_on_or_when_no_one_says_where_it_ended():
    assert _hops(lambda end: end + 0.08, then_voice=False)["quiet"] >= 1
    assert _hops(lambda end: None, then_voice=False)["quiet"] >= 1

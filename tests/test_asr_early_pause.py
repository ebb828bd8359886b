"""The pause decode begins in the silence, before the endpointer confirms the pause: its
transcript goes out only once the pause is confirmed, is the final when the turn then ends, and
is dropped (losing no word) when the voice comes back first."""
import asyncio
from dataclasses import replace

import numpy as np

from test_asr_stage import WORDS, wired
from foresay.engine.asr.scripted import ScriptedBackend, SyntheticUtterance
from foresay.engine.asr.streaming import StreamingConfig
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.events import FinalTranscript, PausedTranscript, TurnEnded, UserAudio, VoicePaused

NO_HOPS = StreamingConfig(hop_ms=5000, recheck_ms=0, late_look_ms=0)


def _silence(seconds):
    return np.zeros(int(seconds * SAMPLE_RATE), np.float32)


def _bus_events(backend, script, config):
    """Run `script(stage, send, events)`; returns what the stage emitted."""
    stage, send, events = wired(backend, config)

    async def main():
        await script(stage, send, events)
        await stage.settle()
        stage.close()
    asyncio.run(main())
    return events


def _quiet_then_pause(config):
    """The request, 60 ms of quiet, then 40 ms more and the endpointer's pause, then the end:
    what the stage had done at each step, and the finals."""
    utterance = SyntheticUtterance(WORDS)
    audio, end = utterance.audio(), len(utterance.audio()) / SAMPLE_RATE
    backend = ScriptedBackend(utterance)
    seen = {}

    async def script(stage, send, events):
        send(UserAudio(1, 0.0, audio, voiced_until_t=end))
        send(UserAudio(1, end, _silence(0.06), voiced_until_t=end))
        await stage.settle()
        seen["decodes"] = len(backend.calls)
        seen["sent_before_pause"] = [e for e in events if isinstance(e, PausedTranscript)]
        send(UserAudio(1, end + 0.06, _silence(0.04), voiced_until_t=end))
        send(VoicePaused(1, end + 0.1, last_voiced_t=end))
        seen["sent_at_pause"] = [e.text for e in events if isinstance(e, PausedTranscript)]
        send(TurnEnded(1, end + 0.4, last_voiced_t=end, heard_revision=None))
        await stage.settle()
        seen["decodes_at_end"] = len(backend.calls)

    events = _bus_events(backend, script, config)
    seen["finals"] = [e.text for e in events if isinstance(e, FinalTranscript)]
    return seen


def test_the_pause_decode_begun_in_the_silence_is_sent_at_the_pause_and_is_the_final():
    seen = _quiet_then_pause(NO_HOPS)
    assert seen["decodes"] == 1 and seen["sent_before_pause"] == []  # begun 60 ms in, held back
    assert seen["sent_at_pause"] == ["turn the lights off"]  # at once, no decode waited for
    assert seen["decodes_at_end"] == 1  # ending cost no decode
    assert seen["finals"] == ["turn the lights off"]


def test_a_pause_decode_begun_in_a_silence_the_voice_breaks_is_never_sent_and_loses_no_word():
    utterance = SyntheticUtterance(WORDS)
    audio = utterance.audio()
    cut = int(utterance.timeline()[2][0])  # "turn the" | "lights off"
    first_end, end = cut / SAMPLE_RATE, (len(audio) + int(0.06 * SAMPLE_RATE)) / SAMPLE_RATE
    backend = ScriptedBackend(utterance)

    async def script(stage, send, events):
        send(UserAudio(1, 0.0, audio[:cut], voiced_until_t=first_end))
        send(UserAudio(1, first_end, _silence(0.06), voiced_until_t=first_end))  # the decode begins
        await stage.settle()
        rest = audio[cut:]
        send(UserAudio(1, first_end + 0.06, rest, voiced_until_t=first_end + 0.06 + len(rest) / SAMPLE_RATE))
        send(UserAudio(1, end, _silence(0.1), voiced_until_t=end))
        send(VoicePaused(1, end + 0.1, last_voiced_t=end))
        await stage.settle()
        send(TurnEnded(1, end + 0.4, last_voiced_t=end))

    events = _bus_events(backend, script, NO_HOPS)
    paused = [e.text for e in events if isinstance(e, PausedTranscript)]
    assert paused and paused[-1] == "turn the lights off" and "turn the" not in paused
    assert [e.text for e in events if isinstance(e, FinalTranscript)] == ["turn the lights off"]


def test_with_the_early_start_off_the_decode_waits_for_the_pause():
    seen = _quiet_then_pause(replace(NO_HOPS, pause_decode_after_ms=0))
    assert seen["decodes"] == 0 and seen["sent_at_pause"] == []  # begun at the pause, out later
    assert seen["decodes_at_end"] == 1 and seen["finals"] == ["turn the lights off"]

"""The asyncio ASR stage: cadence, coalescing under slow decoding, the final always runs."""
import asyncio
import time

import numpy as np

from asr_slow import SlowScripted
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.asr.scripted import ScriptedBackend, SyntheticUtterance
from foresay.engine.asr.stage import StreamingAsr
from foresay.engine.asr.streaming import StreamingConfig
from foresay.engine.events import FinalTranscript, PartialTranscript, TurnEnded, UserAudio
from foresay.engine.stage import EventBus

WORDS = ("turn", "the", "lights", "off")


def wired(backend, config=StreamingConfig(hop_ms=50)):
    """The stage on a bus: returns it, the bus's `emit`, and the list of what the stage emitted."""
    emitted = []
    bus = EventBus()
    stage = StreamingAsr(backend, lambda e: (emitted.append(e), bus.emit(e)), config)
    bus.connect(stage)
    return stage, bus.emit, emitted


async def speak(send, turn_id, t0, audio, chunk_ms=20, speed=4.0):
    chunk = chunk_ms * SAMPLE_RATE // 1000
    for at in range(0, len(audio), chunk):
        send(UserAudio(turn_id, t0 + at / SAMPLE_RATE, audio[at: at + chunk]))
        await asyncio.sleep(chunk_ms / 1000 / speed)


def run_turn(backend, hop_ms, speed=4.0):
    stage, send, events = wired(backend, StreamingConfig(hop_ms=hop_ms))
    audio = SyntheticUtterance(WORDS).audio()

    async def main():
        await speak(send, 3, 50.0, audio, speed=speed)
        end = 50.0 + len(audio) / SAMPLE_RATE
        send(TurnEnded(3, end + 0.5, last_voiced_t=end))
        await stage.settle()
        stage.close()

    started = time.monotonic()
    asyncio.run(main())
    final = [e for e in events if isinstance(e, FinalTranscript)][-1]
    return stage, events, final, time.monotonic() - started


def test_partials_on_cadence_then_the_final():
    backend = ScriptedBackend(SyntheticUtterance(WORDS))
    stage, events, final, _ = run_turn(backend, hop_ms=50)
    partials = [e for e in events if isinstance(e, PartialTranscript)]
    assert len(partials) >= 3 and len(partials) == stage.hops_run  # no timing bound: CI machines are busy
    assert [p.revision for p in partials] == list(range(1, len(partials) + 1))
    assert events[-1] is final and isinstance(final, FinalTranscript)
    assert final.text == "turn the lights off" and final.turn_id == 3


def test_slow_hops_are_coalesced_not_queued_and_the_final_still_runs():
    backend = SlowScripted(SyntheticUtterance(WORDS), seconds=0.15)
    stage, events, final, elapsed = run_turn(backend, hop_ms=50)
    assert stage.hops_skipped > stage.hops_run  # most ticks found a hop still running
    assert len(backend.calls) <= elapsed / 0.15 + 1  # never more decodes than time allows
    assert final.text == "turn the lights off"
    assert sum(call["samples"] for call in backend.calls[-1:]) == len(SyntheticUtterance(WORDS).audio())


def test_a_turn_that_heard_nothing_or_never_ended_still_gets_its_final():
    """An end with no audio gives an empty final at once; audio of a newer turn while one is
    still open finishes the open one first: every turn gets exactly one final transcript."""
    stage, send, events = wired(ScriptedBackend(SyntheticUtterance(WORDS)))

    async def main():
        send(TurnEnded(1, 1.0, last_voiced_t=0.9))
        assert [(e.turn_id, e.text) for e in events] == [(1, "")]
        send(UserAudio(2, 2.0, SyntheticUtterance(WORDS).audio()))
        send(UserAudio(3, 5.0, SyntheticUtterance(WORDS).audio()))
        send(TurnEnded(3, 8.0, last_voiced_t=7.9))
        await stage.settle()
        stage.close()

    asyncio.run(main())
    finals = [(e.turn_id, e.text) for e in events if isinstance(e, FinalTranscript)]
    assert sorted(finals) == [(1, ""), (2, "turn the lights off"), (3, "turn the lights off")]


def test_a_cancelled_turn_emits_nothing_more():
    stage, send, events = wired(ScriptedBackend(SyntheticUtterance(WORDS)))

    async def main():
        await speak(send, 1, 0.0, SyntheticUtterance(WORDS).audio()[:8000])
        await stage.cancel()
        emitted = len(events)
        await asyncio.sleep(0.15)
        assert len(events) == emitted and not any(isinstance(e, FinalTranscript) for e in events)
        send(UserAudio(2, 1.0, SyntheticUtterance(WORDS).audio()))  # the next turn starts cleanly
        send(TurnEnded(2, 4.0, last_voiced_t=3.9))
        await stage.settle()

    asyncio.run(main())
    stage.close()
    [final] = [e for e in events if isinstance(e, FinalTranscript)]
    assert final.turn_id == 2 and final.text == "turn the lights off"


def _bus_events(backend, script, config=StreamingConfig(hop_ms=50)):
    """Run `script(stage, send)` (a coroutine function) on a stage wired to a bus; returns what
    the stage emitted."""
    stage, send, events = wired(backend, config)

    async def main():
        await script(stage, send)
        await stage.settle()
        stage.close()
    asyncio.run(main())
    return events


def test_the_next_turn_never_mixes_into_a_final_still_decoding():
    """Turn 2's audio arrives while turn 1's (slow) final transcript is still decoding: each
    turn's transcript holds exactly its own words."""
    first = SyntheticUtterance(WORDS)
    backend = SlowScripted(first, seconds=0.2)

    async def script(stage, send):
        send(UserAudio(1, 0.0, first.audio()))
        send(TurnEnded(1, 2.0, last_voiced_t=1.8))
        send(UserAudio(2, 3.0, first.audio()[: len(first.audio()) // 2]))
        send(TurnEnded(2, 4.0, last_voiced_t=3.8))

    events = _bus_events(backend, script)
    finals = {e.turn_id: e.text for e in events if isinstance(e, FinalTranscript)}
    assert finals[1] == "turn the lights off"
    assert finals[2] and finals[2] != finals[1] and "off" not in finals[2]


def test_a_pause_decodes_at_once_and_ending_the_turn_then_costs_no_decode():
    from foresay.engine.events import VoicePaused
    utterance = SyntheticUtterance(WORDS)
    backend = ScriptedBackend(utterance)
    calls = {}

    async def script(stage, send):
        audio = utterance.audio()
        send(UserAudio(1, 0.0, audio))
        send(VoicePaused(1, len(audio) / SAMPLE_RATE, last_voiced_t=1.0))
        await stage.settle()
        calls["before_end"] = len(backend.calls)
        send(TurnEnded(1, 3.0, last_voiced_t=1.0))
        calls["after_end"] = len(backend.calls)

    events = _bus_events(backend, script)
    from foresay.engine.events import PauseRechecked, PausedTranscript
    paused = [e for e in events if isinstance(e, PausedTranscript)]
    finals = [e for e in events if isinstance(e, FinalTranscript)]
    assert paused and paused[-1].text == "turn the lights off" and paused[-1].audio_until_t == finals[0].t
    rechecked = [e for e in events if isinstance(e, PauseRechecked)]
    assert paused[-1].rechecking  # the decision is told to wait for the answer
    assert [(e.revision, e.steady) for e in rechecked] == [(paused[-1].revision, True)]  # heard again a few ms later in
    assert [f.text for f in finals] == ["turn the lights off"]
    assert calls["after_end"] == calls["before_end"]  # the final was the speculative one
    # with the check off, the paused transcript promises no answer and none comes
    events = _bus_events(ScriptedBackend(utterance), script, StreamingConfig(hop_ms=50, recheck_ms=0))
    assert [e.rechecking for e in events if isinstance(e, PausedTranscript)] == [False]
    assert not any(isinstance(e, PauseRechecked) for e in events)


def test_a_resumed_turn_keeps_what_it_heard_and_transcribes_the_rest():
    from foresay.engine.events import TurnResumed
    utterance = SyntheticUtterance(WORDS)
    audio = utterance.audio()
    cut = int(utterance.timeline()[2][0])  # "turn the" | "lights off"
    backend = ScriptedBackend(utterance)

    async def script(stage, send):
        send(UserAudio(1, 0.0, audio[:cut]))
        send(TurnEnded(1, 1.0, last_voiced_t=0.9))
        await stage.settle()
        send(TurnResumed(1, 1.1))
        send(UserAudio(1, cut / SAMPLE_RATE, audio[cut:]))
        send(TurnEnded(1, 3.0, last_voiced_t=2.5))

    events = _bus_events(backend, script)
    finals = [e.text for e in events if isinstance(e, FinalTranscript)]
    assert finals[0] == "turn the" and finals[-1] == "turn the lights off"


def _resumed_before_its_final(pause_first: bool):
    """A slow recognizer: "turn the" ends (after a voice pause or not), the voice comes back
    before that end's final is out, and the turn ends again after "lights off"."""
    from foresay.engine.events import TurnResumed, VoicePaused
    utterance = SyntheticUtterance(WORDS)
    audio = utterance.audio()
    cut = int(utterance.timeline()[2][0])
    backend = SlowScripted(utterance, seconds=0.1)

    async def script(stage, send):
        send(UserAudio(1, 0.0, audio[:cut]))
        if pause_first:
            send(VoicePaused(1, cut / SAMPLE_RATE, last_voiced_t=cut / SAMPLE_RATE - 0.1))
        send(TurnEnded(1, cut / SAMPLE_RATE + 0.05, last_voiced_t=cut / SAMPLE_RATE - 0.1))
        if pause_first:
            await asyncio.sleep(0.02)  # the pause decode is under way when the voice comes back
        send(TurnResumed(1, cut / SAMPLE_RATE + 0.1))
        send(UserAudio(1, cut / SAMPLE_RATE, audio[cut:]))
        send(TurnEnded(1, len(audio) / SAMPLE_RATE + 0.5, last_voiced_t=len(audio) / SAMPLE_RATE))

    events = _bus_events(backend, script, StreamingConfig(hop_ms=5000))
    return [e.text for e in events if isinstance(e, FinalTranscript)], backend


def test_a_turn_resumed_before_its_final_is_out_gets_one_final_with_every_word():
    """The final of an end the voice took back is never said: said after the resume, it would be
    answered as the request (a fragment of it), or come after the real final and replace it."""
    for pause_first in (True, False):
        finals, backend = _resumed_before_its_final(pause_first)
        assert finals == ["turn the lights off"], pause_first
    assert len(backend.calls) == 1  # the end's final decode, not begun when the voice came back, never runs


def test_a_turn_ending_while_its_pause_decode_runs_takes_that_decode_as_its_final():
    """A slow recognizer: the end is declared before the pause decode is out. That decode heard
    every voiced sample, so it is awaited and becomes the final; no decode runs after the end,
    and a check that would double the real model's cost is not run (the decode was not cheap)."""
    from foresay.engine.events import PauseRechecked, PausedTranscript, VoicePaused
    utterance = SyntheticUtterance(WORDS)
    backend = SlowScripted(utterance, seconds=0.1)
    audio = utterance.audio()
    calls = {}

    async def script(stage, send):
        send(UserAudio(1, 0.0, audio))
        send(VoicePaused(1, len(audio) / SAMPLE_RATE, last_voiced_t=1.0))
        send(UserAudio(1, len(audio) / SAMPLE_RATE, np.zeros(1600, np.float32)))  # silence after the pause
        await asyncio.sleep(0.02)
        calls["at_end"] = len(backend.calls)
        send(TurnEnded(1, 1.5, last_voiced_t=1.0))
        await stage.settle()
        calls["settled"] = len(backend.calls)

    events = _bus_events(backend, script, StreamingConfig(hop_ms=5000, recheck_max_ms=50))
    finals = [e for e in events if isinstance(e, FinalTranscript)]
    assert [f.text for f in finals] == ["turn the lights off"]
    assert calls["settled"] == 1  # the pause decode only
    assert not any(isinstance(e, (PausedTranscript, PauseRechecked)) for e in events)  # ended before it was out


def test_the_turn_end_names_the_pause_transcript_that_is_the_final_and_a_slow_one_is_not_rechecked():
    from foresay.engine.events import PauseRechecked, PausedTranscript, VoicePaused
    utterance = SyntheticUtterance(WORDS)
    audio = utterance.audio()
    backend = SlowScripted(utterance, seconds=0.06)
    counts = {}

    async def script(stage, send):
        send(UserAudio(1, 0.0, audio))
        send(VoicePaused(1, len(audio) / SAMPLE_RATE, last_voiced_t=1.0))
        send(UserAudio(1, len(audio) / SAMPLE_RATE, np.zeros(3200, np.float32)))
        await stage.settle()
        counts["before"] = len(backend.calls)
        [paused] = [e for e in events if isinstance(e, PausedTranscript)]
        # the machine found this transcript heard every voiced frame (its clock runs 10 ms later)
        send(TurnEnded(1, 1.5, last_voiced_t=paused.audio_until_t + 0.01, heard_revision=paused.revision))
        await stage.settle()
        counts["after"] = len(backend.calls)

    stage, send, events = wired(backend, StreamingConfig(hop_ms=5000, recheck_max_ms=50))

    async def main():
        await script(stage, send)
        await stage.settle()
        stage.close()
    asyncio.run(main())
    [paused] = [e for e in events if isinstance(e, PausedTranscript)]
    assert not paused.rechecking and not any(isinstance(e, PauseRechecked) for e in events)
    assert [e.text for e in events if isinstance(e, FinalTranscript)] == ["turn the lights off"]
    assert counts["after"] == counts["before"]


def test_a_pause_decode_not_begun_when_the_voice_comes_back_is_skipped_and_loses_nothing():
    from foresay.engine.events import PausedTranscript, VoicePaused, VoiceResumed
    utterance = SyntheticUtterance(WORDS)
    audio = utterance.audio()
    cut = int(utterance.timeline()[2][0])  # "turn the" | "lights off"
    backend = ScriptedBackend(utterance)

    async def script(stage, send):
        send(UserAudio(1, 0.0, audio[:cut]))
        send(VoicePaused(1, cut / SAMPLE_RATE, last_voiced_t=0.5))
        send(VoiceResumed(1, cut / SAMPLE_RATE))   # before the worker took the pause decode
        send(UserAudio(1, cut / SAMPLE_RATE, audio[cut:]))
        await stage.settle()
        send(TurnEnded(1, 3.0, last_voiced_t=2.5))

    events = _bus_events(backend, script, StreamingConfig(hop_ms=5000))
    assert not any(isinstance(e, PausedTranscript) for e in events)
    assert len(backend.calls) == 1   # the final only
    assert [e.text for e in events if isinstance(e, FinalTranscript)] == ["turn the lights off"]


def test_audio_fed_much_faster_than_real_time_reaches_the_final_whole():
    """A recording replayed as fast as the stage takes it (the pipeline awaits `caught_up()`
    between blocks) on a slow recognizer: hops take audio that waits for the worker behind a
    pause decode, and the turn ends before they ran. Every word still reaches the final."""
    from foresay.engine.events import VoicePaused, VoiceResumed
    words = ("um", "so", "start", "a", "timer", "for", "seven", "seconds", "please")
    utterance = SyntheticUtterance(words, pause_after=frozenset({1}))
    audio = utterance.audio()
    first_pause = int(utterance.timeline()[2][0])  # "um so" | "start a timer ..."
    block = 1600

    async def script(stage, send):
        send(UserAudio(1, 0.0, audio[:first_pause]))
        send(VoicePaused(1, first_pause / SAMPLE_RATE, last_voiced_t=0.8))
        await asyncio.sleep(0.02)  # its pause decode has begun: the worker is busy
        send(VoiceResumed(1, first_pause / SAMPLE_RATE))
        for at in range(first_pause, len(audio), block):
            send(UserAudio(1, at / SAMPLE_RATE, audio[at: at + block]))
            await stage.caught_up()
            await asyncio.sleep(0)
        end = len(audio) / SAMPLE_RATE
        send(VoicePaused(1, end, last_voiced_t=utterance.word_ends_s()[-1]))
        send(TurnEnded(1, end, last_voiced_t=utterance.word_ends_s()[-1]))

    backend = SlowScripted(utterance, seconds=0.2)
    backend.window_seconds = 6.0  # the demo Whisper's: at most 2 s of audio waits for a hop
    events = _bus_events(backend, script, StreamingConfig(hop_ms=250))
    assert [e.text for e in events if isinstance(e, FinalTranscript)] == [" ".join(words)]


class _SureBackend(ScriptedBackend):
    """Says how sure it is that a sentence ended, as the CTranslate2 Whisper does."""
    def transcribe(self, audio, forced=(), prompt=(), guess=()):
        import dataclasses
        return dataclasses.replace(super().transcribe(audio, forced, prompt, guess), p_sentence_end=0.42,
                                   p_goes_on=0.03)


def test_the_paused_transcript_carries_the_recognizers_probability():
    from foresay.engine.events import PausedTranscript, VoicePaused
    utterance = SyntheticUtterance(WORDS)

    async def script(stage, send):
        audio = utterance.audio()
        send(UserAudio(1, 0.0, audio))
        send(VoicePaused(1, len(audio) / SAMPLE_RATE, last_voiced_t=1.0))
        await stage.settle()

    events = _bus_events(_SureBackend(utterance), script)
    assert [(e.p_sentence_end, e.p_goes_on) for e in events if isinstance(e, PausedTranscript)] == [(0.42, 0.03)]
    events = _bus_events(ScriptedBackend(utterance), script)   # a backend that does not say
    assert [(e.p_sentence_end, e.p_goes_on) for e in events if isinstance(e, PausedTranscript)] == [(None, None)]

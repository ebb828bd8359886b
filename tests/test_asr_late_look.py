"""The second look in a long silence: nothing the user said is lost to the voice test. A last
word spoken low over room noise fails the endpointer's test (the VAD and a margin over the
noise), so the pause decode stops before it; the recognizer decodes the turn again once the
silence runs on, and a look that hears more words is the final (the stage on the scripted
recognizer, then real Whisper tiny.en on a Piper reading)."""
import asyncio
import wave
from dataclasses import replace

import numpy as np
import pytest

from asr_slow import SlowScripted
from test_asr_stage import WORDS, _bus_events, wired
from foresay.audio.blocks import SAMPLE_RATE, AudioBlock
from foresay.engine.asr.scripted import ScriptedBackend, SyntheticUtterance
from foresay.engine.asr.streaming import StreamingConfig
from foresay.engine.events import FinalTranscript, TurnEnded, UserAudio
from foresay.engine.sequences import words


async def _pause_then(stage, send, audio, cut, after):
    """The voice test heard the turn only up to sample `cut`: a pause there, its decode, then
    `after` (the rest of the recording, a quiet word the test missed or nothing) arriving in the
    silence."""
    from foresay.engine.events import VoicePaused
    send(UserAudio(1, 0.0, audio[:cut]))
    send(VoicePaused(1, cut / SAMPLE_RATE, last_voiced_t=cut / SAMPLE_RATE - 0.1))
    await stage.settle()
    send(UserAudio(1, cut / SAMPLE_RATE, after))


def test_a_quiet_last_word_the_voice_test_missed_is_heard_by_a_second_look_in_the_silence():
    """The endpointer's voice test missed "off": the pause decode heard "turn the lights". Once the
    silence's audio runs `late_look_ms` past it, the turn is decoded again: the look hears more
    words, is sent as the newest paused transcript, and is the final, with no decode after the end."""
    from foresay.engine.events import PausedTranscript
    utterance = SyntheticUtterance(WORDS)
    audio = utterance.audio()
    cut = int(utterance.timeline()[3][0])  # "turn the lights" | "off"
    rest = np.concatenate([audio[cut:], np.zeros(SAMPLE_RATE // 2, np.float32)])
    backend = ScriptedBackend(utterance)
    calls = {}

    async def script(stage, send):
        await _pause_then(stage, send, audio, cut, rest)
        await stage.settle()
        calls["before_end"] = len(backend.calls)
        first = [e for e in events if isinstance(e, PausedTranscript)][0]
        send(TurnEnded(1, 2.5, last_voiced_t=first.audio_until_t - 0.05, heard_revision=first.revision))
        await stage.settle()
        calls["after_end"] = len(backend.calls)

    stage, send, events = wired(backend, StreamingConfig(hop_ms=5000, recheck_ms=0, late_look_ms=350))

    async def main():
        await script(stage, send)
        stage.close()
    asyncio.run(main())
    paused = [e for e in events if isinstance(e, PausedTranscript)]
    assert [e.text for e in paused] == ["turn the lights", "turn the lights off"]
    assert paused[1].revision > paused[0].revision and paused[1].audio_until_t > paused[0].audio_until_t
    assert [e.text for e in events if isinstance(e, FinalTranscript)] == ["turn the lights off"]
    assert calls["after_end"] == calls["before_end"] == 2  # the pause decode and the look


def test_a_second_look_that_hears_nothing_more_changes_nothing_and_none_runs_when_off():
    from foresay.engine.events import PausedTranscript
    utterance = SyntheticUtterance(WORDS)
    audio = utterance.audio()
    silence = np.zeros(SAMPLE_RATE // 2, np.float32)

    async def script(stage, send):
        await _pause_then(stage, send, audio, len(audio), silence)
        await stage.settle()
        send(TurnEnded(1, 3.0, last_voiced_t=len(audio) / SAMPLE_RATE - 0.1))

    for late_look_ms, decodes in ((350, 2), (0, 1)):
        backend = ScriptedBackend(utterance)
        events = _bus_events(backend, script, StreamingConfig(hop_ms=5000, recheck_ms=0, late_look_ms=late_look_ms))
        assert [e.text for e in events if isinstance(e, PausedTranscript)] == ["turn the lights off"]
        assert [e.text for e in events if isinstance(e, FinalTranscript)] == ["turn the lights off"]
        assert len(backend.calls) == decodes


def test_a_turn_ending_while_its_second_look_decodes_waits_for_the_words_it_hears():
    """A slow recognizer: the end comes while the look is still decoding. The look heard a word
    the pause decode did not, so the final is the look's, not the pause's."""
    from foresay.engine.events import PausedTranscript
    utterance = SyntheticUtterance(WORDS)
    audio = utterance.audio()
    cut = int(utterance.timeline()[3][0])
    rest = np.concatenate([audio[cut:], np.zeros(SAMPLE_RATE // 2, np.float32)])
    backend = SlowScripted(utterance, seconds=0.1)

    async def script(stage, send):
        send(UserAudio(1, 0.0, audio[:cut]))
        from foresay.engine.events import VoicePaused
        send(VoicePaused(1, cut / SAMPLE_RATE, last_voiced_t=cut / SAMPLE_RATE - 0.1))
        while not any(isinstance(e, PausedTranscript) for e in events):
            await asyncio.sleep(0.01)
        send(UserAudio(1, cut / SAMPLE_RATE, rest))   # the look begins: it takes 0.1 s
        await asyncio.sleep(0.02)
        [first] = [e for e in events if isinstance(e, PausedTranscript)]
        send(TurnEnded(1, 2.5, last_voiced_t=first.audio_until_t - 0.05, heard_revision=first.revision))
        await stage.settle()

    stage, send, events = wired(backend, StreamingConfig(hop_ms=5000, recheck_max_ms=0, late_look_ms=350))

    async def main():
        await script(stage, send)
        stage.close()
    asyncio.run(main())
    assert [e.text for e in events if isinstance(e, PausedTranscript)] == ["turn the lights"]  # ended before the look was out
    assert [e.text for e in events if isinstance(e, FinalTranscript)] == ["turn the lights off"]
    assert len(backend.calls) == 2


def test_a_slow_pause_decode_does_not_start_a_look_that_holds_up_a_turn_ending_at_once():
    """A busy processor: the pause decode comes out when the silence's audio already runs past
    `late_look_ms`. The decision ends the turn on it at once; no look was begun, so the final is
    the pause decode's, out without waiting for another decode."""
    from foresay.engine.events import PausedTranscript, VoicePaused
    utterance = SyntheticUtterance(WORDS)
    audio = utterance.audio()
    backend = SlowScripted(utterance, seconds=0.2)
    block = SAMPLE_RATE // 50
    silence = np.zeros(SAMPLE_RATE // 2, np.float32)

    async def script(stage, send):
        send(UserAudio(1, 0.0, audio))
        t = len(audio) / SAMPLE_RATE
        send(VoicePaused(1, t, last_voiced_t=t - 0.1))
        for at in range(0, len(silence), block):  # the silence arrives in real time
            send(UserAudio(1, t + at / SAMPLE_RATE, silence[at:at + block]))
            await asyncio.sleep(block / SAMPLE_RATE)
            paused = [e for e in events if isinstance(e, PausedTranscript)]
            if paused:  # ended the moment its transcript arrives
                send(TurnEnded(1, t + at / SAMPLE_RATE, last_voiced_t=t - 0.1, heard_revision=paused[0].revision))
                break
    stage, send, events = wired(backend, StreamingConfig(hop_ms=5000, recheck_max_ms=0, late_look_ms=100))

    async def main():
        await script(stage, send)
        await stage.settle()
        stage.close()
    asyncio.run(main())
    assert [e.text for e in events if isinstance(e, FinalTranscript)] == ["turn the lights off"]
    assert len(backend.calls) == 1  # the pause decode only: no look for the final to wait on


def test_a_second_look_counts_only_words_that_extend_what_the_pause_heard():
    from foresay.engine.sequences import extends
    assert extends("Call my brother", "call my brother on his mobile.")
    assert not extends("Call my brother.", "Call my brother.")            # nothing more
    assert not extends("Book a table for four.", "Book a table for for it.")  # heard otherwise
    assert extends("", "hello")


REQUEST = "Could you summarise the news headlines in a few sentences?"
NOISE = 0.002   # room noise RMS, about -54 dBFS
LAST_WORD_OVER_NOISE = 1.6  # the last word's RMS over the noise's: 4 dB, under the margins of the voice test


@pytest.fixture(scope="module")
def quiet_last_word(registry_model, tmp_path_factory):
    """A recording of REQUEST whose last word is spoken low, and the time that word begins."""
    registry_model("piper-en_US-joe-medium")
    from foresay.engine.demo.piper_sets import Reading, load_voice, read_aligned, room_noise

    samples, boundaries = read_aligned(load_voice(alignments=True), REQUEST, Reading(1.0, 0.667, 0.8))
    last = boundaries[-1]
    loud = samples[last:][np.abs(samples[last:]) > 0.1 * np.abs(samples[last:]).max()]
    samples = samples.copy()
    samples[last:] *= LAST_WORD_OVER_NOISE * NOISE / np.sqrt(np.mean(loud ** 2))
    lead, tail = int(0.5 * SAMPLE_RATE), int(2.5 * SAMPLE_RATE)
    audio = np.concatenate([np.zeros(lead, np.float32), samples, np.zeros(tail, np.float32)])
    audio = audio + room_noise(len(audio), NOISE, np.random.default_rng(3))
    path = tmp_path_factory.mktemp("late_look") / "request.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes())
    return path, audio, (lead + last) / SAMPLE_RATE


def test_the_voice_test_misses_the_quiet_last_word(quiet_last_word):
    """The premise of the next test: the endpointer's last voiced frame lies before the last word."""
    from foresay.audio.endpoint import Endpointer
    from foresay.audio.vad import VadConfig, make_vad
    from foresay.engine.events import VoicePaused

    _, audio, last_word_t = quiet_last_word
    endpointer = Endpointer(make_vad(VadConfig()))
    paused = []
    for at in range(0, len(audio), 320):
        paused += [e for e in endpointer.push(AudioBlock(audio[at:at + 320], at / SAMPLE_RATE))
                   if isinstance(e, VoicePaused)]
    assert paused and paused[-1].last_voiced_t < last_word_t + 0.05


def test_a_quiet_last_word_reaches_the_final_transcript(quiet_last_word, tmp_path, fixture_dir, tiny_en):
    """With the second look the final holds a word after "a few" (low over the noise, Whisper may
    mishear it); without it (`late_look_ms = 0`) the final stops at "few": the word is lost."""
    from foresay.app.commands import replay
    from foresay.app.config import load_settings

    config = tmp_path / "config.toml"
    config.write_text(f'[app]\nprofile = "tiny-random"\nhistory_dir = "{tmp_path / "history"}"\n'
                      '[asr]\nbackend = "faster-whisper"\ntarget = "tiny.en"\n'
                      '[predgen]\nmax_new_tokens = 8\n[tts]\nengine = "espeak"\n')
    settings = load_settings(config)
    heard = {}
    for late_look_ms in (350, 0):
        chosen = replace(settings, streaming=replace(settings.streaming, late_look_ms=late_look_ms))
        metrics = asyncio.run(replay(chosen, quiet_last_word[0], None))
        assert len(metrics) == 1  # one turn
        heard[late_look_ms] = words(metrics[0]["user_text"])
    assert heard[0][:3] == ["could", "you", "summarize"] and heard[0][-2:] == ["a", "few"], heard
    assert heard[350] == heard[0] + heard[350][len(heard[0]):] and len(heard[350]) == len(heard[0]) + 1, heard

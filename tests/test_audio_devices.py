"""sounddevice paths on real ALSA streams (FIFO-backed devices via ALSA_CONFIG_PATH): listing,
choosing, capture, playback, barge-in, missing devices, rates. Faults: test_audio_device_faults."""
from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest
from audio_kit import alsa_fifo, speech_clip  # noqa: F401  (alsa_fifo is a fixture)

from foresay.app.cli import main
from foresay.audio import devices as devices_mod
from foresay.audio.bargein import BargeInDetector
from foresay.audio.blocks import SAMPLE_RATE
from foresay.audio.capture import MicConfig, MicSource
from foresay.audio.devices import choose_stream_format, list_devices, resolve_device
from foresay.audio.echo import make_echo_canceller
from foresay.audio.endpoint import Endpointer
from foresay.audio.errors import NoAudioDevice, UnsupportedSampleRate
from foresay.audio.hangover import FixedHangover
from foresay.audio.playback import DeviceSink, PlaybackConfig
from foresay.audio.resample import resample
from foresay.audio.vad import WebRtcVad
from foresay.engine.events import SpeechStarted, TurnEnded

BLOCK = SAMPLE_RATE * MicConfig().block_ms // 1000   # samples in a block the microphone hands out
BLOCK_S = BLOCK / SAMPLE_RATE


def test_listing_and_the_devices_command(alsa_fifo, capsys):
    devices = list_devices()
    names = {d.name for d in devices}
    assert {"default", "foresay_in", "foresay_out"} <= names
    [default] = [d for d in devices if d.name == "default"]
    assert default.is_default_input and default.is_default_output
    assert default.hostapi == "ALSA" and default.default_samplerate > 0

    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "Input devices:" in out and "Output devices:" in out
    assert any(line.lstrip().startswith("*") and "default" in line for line in out.splitlines())
    assert main(["devices", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["devices"]
    assert {"index", "name", "is_default_input", "default_samplerate"} <= set(listed[0])


def test_choosing_devices_by_index_and_name(alsa_fifo):
    default = resolve_device(None, "input")
    assert default.name == "default"
    assert resolve_device(default.index, "output").name == "default"
    assert resolve_device(str(default.index), "input").index == default.index
    assert resolve_device("FORESAY_IN", "input").name == "foresay_in"      # case-insensitive
    assert resolve_device("_out", "output").name == "foresay_out"          # part of a name
    with pytest.raises(NoAudioDevice, match="no input device matches 'usb mic'.*foresay_in"):
        resolve_device("usb mic", "input")
    with pytest.raises(NoAudioDevice, match="no device 99"):
        resolve_device(99, "input")


def test_no_device_at_all(monkeypatch):
    monkeypatch.setattr(devices_mod, "list_devices", lambda: [])
    with pytest.raises(NoAudioDevice, match="no input device found"):
        resolve_device(None, "input")


def test_mic_captures_speech_at_48k_through_alsa(alsa_fifo):
    clip = speech_clip(alsa_fifo.infile.parent, "What is the capital of Australia?",
                       voice="en-us", before_s=0.5, after_s=1.2, noise_db=-120)

    async def run():
        events, blocks = [], []
        ep = Endpointer(WebRtcVad(2, 30), policy=FixedHangover(0.5))
        async with MicSource(MicConfig(device="default", sample_rate=48000)) as mic:
            async for block in mic:
                blocks.append(block)
                if len(blocks) == round(0.2 / BLOCK_S):   # 200 ms in: the "user" starts talking
                    t_feed = time.monotonic()
                    alsa_fifo.play_into_mic(resample(clip.samples, 16000, 48000))
                events += ep.push(block)
                if any(isinstance(e, TurnEnded) for e in events):
                    break
            return mic, blocks, events, t_feed, time.monotonic()

    mic, blocks, events, t_feed, t_stop = asyncio.run(asyncio.wait_for(run(), 20))
    assert (mic.device.name, mic.device_rate, mic.device_channels) == ("default", 48000, 1)
    assert mic.overflows == 0 and mic.reopens == 0
    assert all(len(b.samples) == BLOCK for b in blocks)
    gaps = np.diff([b.t for b in blocks]) - BLOCK_S
    assert np.abs(gaps).max() < 0.003    # contiguous: the clock fit moves by <= 1 ms a callback
    assert 0 <= t_stop - blocks[-1].t_end < 0.15         # and close to the real capture time
    started, ended = [e for e in events if isinstance(e, (SpeechStarted, TurnEnded))]  # not pauses, estimates
    assert isinstance(started, SpeechStarted) and isinstance(ended, TurnEnded)
    # Truth: the speech went into the capture FIFO at t_feed + speech_start; the FIFO and
    # ALSA buffers add a few tens of ms, and the null device's timing information is only
    # as exact as its buffer accounting.
    assert -0.05 <= started.t - (t_feed + clip.speech_start) < 0.1
    assert -0.05 <= ended.last_voiced_t - (t_feed + clip.speech_end) < 0.1
    assert 0.5 - 1e-6 <= ended.t - ended.last_voiced_t < 0.53


def test_device_sink_plays_through_alsa_and_flush_stops_within_a_block(alsa_fifo):
    rate = 22050
    x = (0.5 * np.sin(2 * np.pi * 440 * np.arange(2 * rate) / rate)).astype(np.float32)

    async def run():
        sink = DeviceSink(PlaybackConfig(device="default", sample_rate=48000, block_ms=10))
        async with sink:
            t_enqueue = time.monotonic()
            ticket = await sink.enqueue(x, rate, span=(0, 40))
            started = await ticket.started
            await asyncio.sleep(0.8 - (time.monotonic() - started))
            t_flush = time.monotonic()
            played = sink.flush()
            await asyncio.sleep(0.3)
            return sink, t_enqueue, started, t_flush, played

    sink, t_enqueue, started, t_flush, played = asyncio.run(asyncio.wait_for(run(), 20))
    assert sink.sample_rate == 48000 and sink.device.name == "default"
    assert 0 <= started - t_enqueue < 0.1
    assert not played.complete
    # Played: everything handed to the device, including what sat in its buffer at the flush.
    # (The null device reports no latency while its buffers fill at the start, so its times
    # carry up to a buffer, ~40 ms, of error.)
    assert played.end_t - started == pytest.approx(played.seconds, abs=0.05)
    assert -0.02 <= played.end_t - t_flush < 0.1
    assert played.text_span[0] == 0
    assert played.text_span[1] == pytest.approx(40 * played.seconds / 2.0, abs=1)
    y = alsa_fifo.output()
    win = 480
    env = np.sqrt(np.mean(y[:len(y) // win * win].reshape(-1, win) ** 2, axis=1))
    loud = np.flatnonzero(env > 0.1)
    heard = (loud[-1] + 1 - loud[0]) * win / 48000
    assert heard == pytest.approx(played.seconds, abs=0.011)   # silent within one block
    # What came out is the tone, resampled to 48 kHz.
    seg = y[loud[0] * win + 4800:loud[0] * win + 9600]
    spectrum = np.abs(np.fft.rfft(seg))
    assert np.argmax(spectrum) * 48000 / len(seg) == pytest.approx(440, abs=10)


def test_barge_in_on_live_alsa_streams(alsa_fifo):
    """A reply played to the ALSA output leaks back into the ALSA capture at -20 dB; the echo
    must not interrupt, the user speaking over it must, within 400 ms."""
    tmp = alsa_fifo.infile.parent
    assistant = speech_clip(tmp, "Sure. The weather in Paris tomorrow will be mostly sunny, "
                            "with a high of twenty two degrees and a light breeze.",
                            before_s=0, after_s=0, noise_db=-120).samples
    user = speech_clip(tmp, "No wait, I meant London.", voice="en+f3", before_s=0, after_s=0,
                       noise_db=-120).samples
    alsa_fifo.loop_back(-20.0)

    async def run(user_after_s):
        sink = DeviceSink(PlaybackConfig(device="default", sample_rate=48000))
        interrupts, blocks, user_fed = [], [], False
        async with sink, MicSource(MicConfig(device="default", sample_rate=48000)) as mic:
            canceller = make_echo_canceller(sink.reference)
            detector = BargeInDetector(sink.reference)
            t_open = time.monotonic()
            async for block in mic:       # as in the app, the streams run before the reply
                detector.process(canceller.process(block), block)
                if time.monotonic() > t_open + 1.5:
                    break
            detector.arm(1)
            ticket = await sink.enqueue(assistant, 16000)
            t_start = await ticket.started
            async for block in mic:
                blocks.append(block)
                if user_after_s and not user_fed and time.monotonic() > t_start + user_after_s:
                    user_fed = True
                    alsa_fifo.play_into_mic(resample(user, 16000, 48000))
                interrupts += detector.process(canceller.process(block), block)
                if block.t > max([t_start + len(assistant) / 16000]
                                 + [i.t + len(user) / 16000 for i in interrupts]):
                    break
            sink.flush()
        return interrupts, blocks

    interrupts, _ = asyncio.run(asyncio.wait_for(run(None), 30))
    assert interrupts == []
    interrupts, blocks = asyncio.run(asyncio.wait_for(run(2.0), 30))
    assert len(interrupts) == 1
    # Where the user's voice begins in the captured stream (the FIFO feeder's delay varies,
    # so find it in the capture itself): the best match of the clip.
    mic = np.concatenate([b.samples for b in blocks])
    corr = np.correlate(mic, user, "valid")
    onset = blocks[0].t + int(np.argmax(corr)) / SAMPLE_RATE
    assert 0.3 - 0.031 <= interrupts[0].t - onset <= 0.4


# --- rates --------------------------------------------------------------------------------------


def only_rate(monkeypatch, rate):
    """Make PortAudio's check reject every rate but `rate`, like a picky USB mic."""
    sd = devices_mod.sd()
    real = sd.check_input_settings

    def check(device=None, samplerate=None, **kw):
        if samplerate != rate:
            raise sd.PortAudioError("Invalid sample rate", -9997)
        return real(device=device, samplerate=samplerate, **kw)
    monkeypatch.setattr(sd, "check_input_settings", check)


def test_a_48k_only_mic_asked_for_16k_opens_at_48k(alsa_fifo, monkeypatch):
    # PortAudio's ALSA "default" here takes 48 kHz and up only, like many USB mics.
    sd = devices_mod.sd()
    with pytest.raises(sd.PortAudioError):
        sd.check_input_settings(device="default", samplerate=16000, channels=1, dtype="float32")
    device = resolve_device("default", "input")
    assert choose_stream_format(device, "input", 16000) == (48000, 1)

    async def run():
        async with MicSource(MicConfig(device="default", sample_rate=16000)) as mic:
            blocks = []
            async for block in mic:
                blocks.append(block)
                if len(blocks) == 5:
                    return mic.device_rate, blocks
    rate, blocks = asyncio.run(asyncio.wait_for(run(), 10))
    assert rate == 48000 and all(len(b.samples) == BLOCK for b in blocks)
    # Neither the rate asked for nor the device default: the next common rate that works.
    only_rate(monkeypatch, 96000)
    assert choose_stream_format(device, "input", 16000) == (96000, 1)


def test_no_usable_rate_is_a_clear_error(alsa_fifo, monkeypatch):
    sd = devices_mod.sd()

    def never(**kw):
        raise sd.PortAudioError("Invalid sample rate", -9997)
    monkeypatch.setattr(sd, "check_input_settings", never)
    with pytest.raises(UnsupportedSampleRate,
                       match="accepts none of the rates 48000, 44100, 16000"):
        choose_stream_format(resolve_device("default", "input"), "input")

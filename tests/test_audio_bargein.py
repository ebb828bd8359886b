"""Barge-in on mixed recordings: the assistant's own voice leaking into the mic must not
interrupt it; a second voice over it must, within 400 ms."""
from __future__ import annotations

import numpy as np
import pytest
from audio_kit import normalize_active, piper_speech, speech_clip, speech_extent

from foresay.audio.bargein import BargeInConfig, BargeInDetector
from foresay.audio.blocks import SAMPLE_RATE, AudioBlock, rms_db
from foresay.audio.echo import (EchoCanceller, WebRtcEchoCanceller, make_echo_canceller,
                                webrtc_aec_available)
from foresay.audio.reference import PlaybackReference
from foresay.engine.events import Interrupt

T0 = 2000.0
ASSISTANT = ("Sure. The weather in Paris tomorrow will be mostly sunny, with a high of twenty "
             "two degrees and a light breeze from the west in the afternoon.")
USER = "No wait, I meant the weather in London, not Paris."

CANCELLERS = ["webrtc", "none"]   # the echo canceller with the gate, and the gate alone


@pytest.fixture(scope="module", params=["espeak", "piper"])
def voices(request, tmp_path_factory):
    """The assistant speaks with espeak-ng or Piper; the user is another espeak-ng voice."""
    tmp = tmp_path_factory.mktemp("voices")
    if request.param == "piper":
        assistant = piper_speech(request.getfixturevalue("piper_model"), ASSISTANT, level_db=-20)
    else:
        assistant = speech_clip(tmp, ASSISTANT, before_s=0, after_s=0, noise_db=-120, level_db=-20).samples
    user = speech_clip(tmp, USER, voice="en+f3", before_s=0, after_s=0, noise_db=-120,
                       level_db=-20)
    return assistant, user.samples


def room(x: np.ndarray, delay_ms: float, gain_db: float) -> np.ndarray:
    """The speaker-to-mic path: a delay, two reflections, `gain_db` overall."""
    d = int(delay_ms * SAMPLE_RATE / 1000)
    h = np.zeros(d + 1200)
    h[d], h[d + 400], h[d + 1100] = 1.0, 0.35, 0.15
    y = np.convolve(x, h)[:len(x)]
    scale = 10 ** (gain_db / 20) * np.sqrt(np.mean(x ** 2) / np.mean(y ** 2))
    return (y * scale).astype(np.float32)


def mixed(voices, *, user_at: float | None, echo_db: float = -20.0, delay_ms: float = 40.0,
          seed: int = 0):
    """(what the speaker played, what the mic heard, when the user started)."""
    assistant, user = voices
    n = len(assistant) + SAMPLE_RATE
    played = np.zeros(n, np.float32)
    played[:len(assistant)] = assistant
    mic = room(played, delay_ms, echo_db)
    mic += np.random.default_rng(seed).normal(0, 10 ** (-60 / 20), n).astype(np.float32)
    onset = None
    if user_at is not None:
        s = int(user_at * SAMPLE_RATE)
        m = min(len(user), n - s)
        mic[s:s + m] += user[:m]
        onset = user_at + speech_extent(user)[0]
    return played, mic, onset


def run_detector(played, mic, canceller_kind: str, *, ahead_ms: float = 60.0, block: int = 320):
    """Play `played` (the sink writes the reference `ahead_ms` before it sounds) while feeding
    `mic` block by block through the canceller and the detector."""
    reference = PlaybackReference()
    canceller = make_echo_canceller(reference, canceller_kind)
    detector = BargeInDetector(reference)
    detector.arm(turn_id=7)
    ahead = int(ahead_ms * SAMPLE_RATE / 1000)
    reference.write(played[:ahead], T0)
    events, cleaned = [], []
    for i in range(0, len(mic) - block + 1, block):
        j = i + ahead
        reference.write(played[j:j + block], T0 + j / SAMPLE_RATE)
        raw = AudioBlock(mic[i:i + block], T0 + i / SAMPLE_RATE)
        out = canceller.process(raw)
        cleaned.append(out.samples)
        events += detector.process(out, raw)
    return events, detector, np.concatenate(cleaned)


def test_webrtc_aec_is_installed_and_chosen():
    assert webrtc_aec_available()
    assert isinstance(make_echo_canceller(PlaybackReference()), WebRtcEchoCanceller)
    assert type(make_echo_canceller(PlaybackReference(), "none")) is EchoCanceller


@pytest.mark.parametrize("canceller", CANCELLERS)
@pytest.mark.parametrize("delay_ms", [0, 40, 120])
def test_own_voice_leaking_at_minus_20_db_does_not_interrupt(voices, canceller, delay_ms):
    for seed in range(2):
        played, mic, _ = mixed(voices, user_at=None, delay_ms=delay_ms, seed=seed)
        events, detector, _ = run_detector(played, mic, canceller)
        assert events == [], f"self-interrupt at {[e.t - T0 for e in events]}"
        assert detector.armed


@pytest.mark.parametrize("canceller", CANCELLERS)
@pytest.mark.parametrize("user_at", [1.0, 2.0, 3.5])
def test_second_voice_over_the_assistant_interrupts_within_400_ms(voices, canceller, user_at):
    played, mic, onset = mixed(voices, user_at=user_at)
    events, detector, _ = run_detector(played, mic, canceller)
    assert len(events) == 1
    [event] = events
    assert isinstance(event, Interrupt) and event.turn_id == 7
    latency = event.t - T0 - onset
    assert 0.3 - 0.031 <= latency <= 0.4          # min_speech_ms is 300 ms
    assert abs(detector.onset_t - T0 - onset) <= 0.061
    assert not detector.armed                     # one interrupt per reply


@pytest.mark.parametrize("canceller", CANCELLERS)
def test_the_onset_is_the_first_word_though_a_pause_follows_it(voices, canceller):
    """"No ... wait, I meant": the first word alone is too short to interrupt, and the pause
    after it (longer than `max_gap_ms`) starts the count again; the user's speech still began
    with that word, which the listener must hand to the endpointer."""
    assistant, user = voices
    first, _ = speech_extent(user)
    word = int((first + 0.12) * SAMPLE_RATE)
    split = np.concatenate([user[:word], np.zeros(int(0.35 * SAMPLE_RATE), np.float32), user[word:]])
    played, mic, onset = mixed((assistant, split), user_at=1.0)
    [event] = run_detector(played, mic, canceller)[0]
    assert event.t - T0 - onset > 0.35 + 0.3 - 0.031      # the interrupt waited for the second run
    _, detector, _ = run_detector(played, mic, canceller)
    assert abs(detector.onset_t - T0 - onset) <= 0.061    # ... but dates the speech from its first word
    with pytest.raises(ValueError, match="onset_gap_ms"):
        BargeInConfig(max_gap_ms=200, onset_gap_ms=100)


def test_echo_canceller_removes_the_echo_and_keeps_the_user(voices):
    played, mic, _ = mixed(voices, user_at=None, echo_db=-10)
    _, _, cleaned = run_detector(played, mic, "webrtc")
    s = slice(2 * SAMPLE_RATE, len(voices[0]))    # after it adapted, while the assistant talks
    assert rms_db(mic[s]) - rms_db(cleaned[s]) > 25
    played, mic, onset = mixed(voices, user_at=2.0, echo_db=-10)
    _, _, cleaned = run_detector(played, mic, "webrtc")
    u = slice(int(2.0 * SAMPLE_RATE), int(2.0 * SAMPLE_RATE) + len(voices[1]))
    assert abs(rms_db(cleaned[u]) - rms_db(voices[1])) < 3    # double talk survives


@pytest.mark.parametrize("echo_db,user_at", [(-6, 2.0), (-10, 0.5)])
def test_stronger_echo_is_handled_by_the_canceller(voices, echo_db, user_at):
    # Loud speakers (echo only 6-10 dB below the playback) with the canceller: still no
    # self-interrupt, and the user still gets through, also early in the first reply.
    played, mic, _ = mixed(voices, user_at=None, echo_db=echo_db)
    assert run_detector(played, mic, "webrtc")[0] == []
    played, mic, onset = mixed(voices, user_at=user_at, echo_db=echo_db)
    [event] = run_detector(played, mic, "webrtc")[0]
    assert event.t - T0 - onset <= 0.4


def test_disarmed_detector_is_silent_and_quiet_playback_needs_no_gate(voices):
    _, user = voices
    reference = PlaybackReference()
    detector = BargeInDetector(reference, BargeInConfig(min_speech_ms=200))
    x = np.concatenate([np.zeros(SAMPLE_RATE // 2, np.float32), normalize_active(user, -25)])
    blocks = [AudioBlock(x[i:i + 480], T0 + i / SAMPLE_RATE) for i in range(0, len(x) - 480, 480)]
    assert [e for b in blocks for e in detector.process(b)] == []     # not armed
    detector.arm(3)
    blocks = [AudioBlock(b.samples, b.t + 10) for b in blocks]
    events = [e for b in blocks for e in detector.process(b)]
    assert len(events) == 1 and events[0].turn_id == 3                # nothing played: any voice
    with pytest.raises(ValueError):
        BargeInConfig(min_voiced_ratio=0)


@pytest.mark.parametrize("forget", [True, False])
def test_a_canceller_taking_over_late_does_not_hold_the_user_back(voices, forget, monkeypatch):
    """The canceller's output is used once it finds the echo path, which can be a second into a
    reply: the gate after it then measured the raw echo, and must measure the cleaned audio
    afresh, or a user a little quieter than the reply stays under its margin for seconds."""
    if not forget:   # the same detector with the rule off: the case must show the difference
        monkeypatch.setattr("foresay.audio.echo.EchoGate.forget_echo", lambda self: None)
    played, echo_only, _ = mixed(voices, user_at=None, echo_db=-10)
    _, mic, onset = mixed((voices[0], voices[1] * 0.5), user_at=2.5, echo_db=-10)   # 6 dB under the reply
    switch = int(1.5 * SAMPLE_RATE)
    cleaned = mic.copy()
    cleaned[switch:] -= echo_only[switch:]   # an ideal canceller from 1.5 s on
    cleaned[switch:] += np.random.default_rng(1).normal(0, 1e-3, len(mic) - switch).astype(np.float32)
    reference = PlaybackReference()
    detector = BargeInDetector(reference)
    detector.arm(turn_id=7)
    ahead = int(0.06 * SAMPLE_RATE)
    reference.write(played[:ahead], T0)
    events = []
    for i in range(0, len(mic) - 320 + 1, 320):
        reference.write(played[i + ahead:i + ahead + 320], T0 + (i + ahead) / SAMPLE_RATE)
        t = T0 + i / SAMPLE_RATE
        events += detector.process(AudioBlock(cleaned[i:i + 320], t), AudioBlock(mic[i:i + 320], t))
    if forget:
        [event] = events
        assert event.t - T0 - onset <= 0.4
    else:
        assert not events or events[0].t - T0 - onset > 0.4

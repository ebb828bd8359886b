"""The room's noise as the endpointer hears it: the speech band (hum, rumble and DC out, speech
in, the same filtering however the stream is cut), and turns that digital silence, a DC offset or
mains hum leave where they are."""
import numpy as np
import pytest
from audio_kit import speech_clip
from test_audio_endpoint import EPS, FRAME, T0, feed, turns

from foresay.audio.blocks import SAMPLE_RATE, rms_db
from foresay.audio.endpoint import Endpointer, EndpointerConfig
from foresay.audio.hangover import FixedHangover
from foresay.audio.room_noise import SpeechBand
from foresay.audio.vad import VadConfig, WebRtcVad, make_vad


def through(x: np.ndarray, frame: int = 480) -> np.ndarray:
    band = SpeechBand()
    return np.concatenate([band(x[i:i + frame]) for i in range(0, len(x), frame)])


def gain_db(hz: float) -> float:
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    x = np.sin(2 * np.pi * hz * t) if hz else np.ones(SAMPLE_RATE)
    return rms_db(through(x)[SAMPLE_RATE // 2:]) - rms_db(x[SAMPLE_RATE // 2:])


def test_hum_and_dc_are_taken_out_and_speech_frequencies_kept():
    assert gain_db(0) < -60
    assert gain_db(50) < -20 and gain_db(60) < -15
    assert abs(gain_db(100) + 3.0) < 0.5  # the cutoff
    for hz in (200, 1000, 4000):
        assert abs(gain_db(hz)) < 0.2


def test_the_stream_is_filtered_the_same_however_it_is_cut():
    x = np.random.default_rng(0).normal(0, 0.1, SAMPLE_RATE).astype(np.float32)
    np.testing.assert_allclose(through(x, 160), through(x, 480), atol=1e-12)
    np.testing.assert_allclose(through(x, 480), through(x, 7), atol=1e-12)


def test_a_bad_cutoff_is_refused():
    with pytest.raises(ValueError, match="cutoff_hz"):
        SpeechBand(cutoff_hz=9000)


def test_after_zeros_the_room_is_heard_as_the_room_again(tmp_path):
    """A waking microphone's first blocks, a mute key, a dropout: zeros, then the room, then the
    request. Once the room has sounded steady for 0.3 s the floor is back at it, and the request
    ends where it would without the zeros (a floor left down at the zeros let the room pass as
    voice, and turns ended late or not at all). In those 0.3 s the room may still open a turn:
    it ends with nothing heard, or the request resumes it."""
    from foresay.engine.events import TurnEnded

    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=1.5, after_s=1.5, noise_db=-55.0)

    def last_voiced(zeros_s: float, at_s: float) -> float:
        n, at = (int(round(s / FRAME)) * round(FRAME * SAMPLE_RATE) for s in (zeros_s, at_s))  # whole frames
        x = np.concatenate([clip.samples[:at], np.zeros(n, np.float32), clip.samples[at:]])
        ends = [e for e in feed(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.6)), x)
                if isinstance(e, TurnEnded)]
        return ends[-1].last_voiced_t - T0 - n / SAMPLE_RATE

    reference = last_voiced(0.0, 0.0)
    assert abs(reference - clip.speech_end) <= 2 * FRAME
    for zeros_s, at_s in ((1.5, 0.0), (2.0, 0.3)):
        assert last_voiced(zeros_s, at_s) == pytest.approx(reference, abs=EPS)


def test_a_room_of_digital_silence_still_hears_every_word(tmp_path):
    """A gated microphone: zeros around the speech, opening inside the first word. The turn runs
    from there to the last word, not a frame longer (the speech band's filter rings on after the
    last sound; zeros are still read as zeros)."""
    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=1.0, after_s=1.5)
    x = clip.samples.copy()
    opens = clip.speech_start + 0.05
    t = np.arange(len(x)) / SAMPLE_RATE
    x[(t < opens) | (t > clip.speech_end + 0.02)] = 0.0
    [(start, last, _)] = turns(feed(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.6)), x))
    assert abs(start - opens) <= 2 * FRAME
    last_sound_frame_end = np.ceil((np.flatnonzero(x)[-1] + 1) / (FRAME * SAMPLE_RATE)) * FRAME
    assert clip.speech_end - 2 * FRAME <= last <= last_sound_frame_end + EPS


def test_a_microphones_dc_offset_changes_no_turn(tmp_path):
    """Many microphones add a DC offset (here 1% of full scale, -40 dBFS): the energy check
    measures the sound, not the offset, so the turn starts and ends where it would without it."""
    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=1.0, after_s=1.5, noise_db=-60.0)

    def turn(x):
        [(start, last, _)] = turns(feed(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.6)), x))
        return start, last

    assert turn(clip.samples + np.float32(0.01)) == pytest.approx(turn(clip.samples), abs=EPS)


def test_mains_hum_does_not_end_a_turn_inside_a_request(tmp_path):
    """50 Hz hum at -35 dBFS (a ground loop) under quiet speech (-30 dBFS): the energy check reads
    the speech band, so the speech stands over the floor and the request is one turn where it is
    (read over the whole band, the hum hid all of it)."""
    clip = speech_clip(tmp_path, "Hello there, could you tell me what the weather will be like tomorrow?",
                       before_s=1.0, after_s=1.5, noise_db=-60.0, level_db=-30.0)
    hum = (0.025 * np.sin(2 * np.pi * 50 * np.arange(len(clip.samples)) / SAMPLE_RATE)).astype(np.float32)
    found = turns(feed(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.6)), clip.samples + hum))
    assert len(found) == 1
    [(start, last, _)] = found
    assert abs(start - clip.speech_start) <= 2 * FRAME and abs(last - clip.speech_end) <= 2 * FRAME


def test_zeros_after_a_sound_are_read_as_zeros_not_as_the_filters_ringing():
    """In a room of digital silence (a gated microphone, requests written with silence around
    them) the frame after the last sound is silent; the speech band's filter rings on into it,
    which held every such request's end one frame longer."""
    from foresay.audio.room_noise import RoomNoise

    rng = np.random.default_rng(0)
    room = RoomNoise(0.03)
    room.margin(np.zeros(480, np.float32))  # the floor: digital silence
    room.margin((0.1 * rng.standard_normal(480)).astype(np.float32))  # a word
    assert room.margin(np.zeros(480, np.float32)) <= 0  # silence again, not a sound over the floor


def test_an_uneven_room_after_zeros_is_heard_as_the_room_again(tmp_path):
    """Zeros, then a room whose level swings 8 dB (never steady within 6 dB), then the request:
    after a second of the room the floor is back at it, and the request ends where it would
    without the zeros (a VAD fed the zeros called that room speech, and with the floor left down
    the turn went on as long as the room did)."""
    from foresay.engine.events import SpeechStarted, TurnEnded

    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=1.5, after_s=3.0, noise_db=-130.0)
    t = np.arange(len(clip.samples)) / SAMPLE_RATE
    swing = np.where((t // 0.09) % 2 == 0, 1.0, 10 ** (-8 / 20))
    noise = np.random.default_rng(3).normal(0, 10 ** (-55 / 20), len(t)) * swing
    x = clip.samples + noise.astype(np.float32)

    def last_voiced(zeros_s: float, at_s: float) -> list[float]:
        n, at = (int(round(s / FRAME)) * round(FRAME * SAMPLE_RATE) for s in (zeros_s, at_s))
        y = np.concatenate([x[:at], np.zeros(n, np.float32), x[at:]])
        ends = feed(Endpointer(WebRtcVad(2, 30), EndpointerConfig(), FixedHangover(0.6)), y)
        return [e.last_voiced_t - T0 - n / SAMPLE_RATE for e in ends if isinstance(e, TurnEnded)]

    reference = last_voiced(0.0, 0.0)
    assert len(reference) == 1 and abs(reference[0] - clip.speech_end) <= 2 * FRAME
    for zeros_s, at_s in ((1.5, 0.0), (2.0, 0.3)):
        assert last_voiced(zeros_s, at_s) == [pytest.approx(reference[0], abs=EPS)]
    # the room alone after zeros, through the levelled VAD (the default), which raises the room
    # until it sounds like speech: the turn it opens ends within the second it takes to know it
    ends = feed(Endpointer(make_vad(VadConfig()), EndpointerConfig(), FixedHangover(0.6)),
                np.concatenate([np.zeros(2 * SAMPLE_RATE, np.float32), noise[:6 * SAMPLE_RATE].astype(np.float32)]))
    started = [e.t for e in ends if isinstance(e, SpeechStarted)]
    ended = [e.t for e in ends if isinstance(e, TurnEnded)]
    assert started and len(started) == len(ended) and all(b - a <= 2.0 for a, b in zip(started, ended))


def test_a_request_into_a_gated_microphone_ends_where_it_ends_with_the_room_heard_first(tmp_path):
    """A gated microphone (a headset's noise gate, a waking Bluetooth link) sends zeros until the
    voice opens it: the request comes with no room before it, so its floor is unknown when it ends,
    the VAD (started afresh) calls the room after it speech, and the voice seemed to go on until
    the room had been heard long enough to know it (0.2-0.4 s late on the read sample). Then its
    frames are found to be the room's: the pause is reported then, with the right last voiced
    frame, as soon as the room's level has come back to its quietest between the words
    (ROOM_QUICK_S; ROOM_BACK_S at most), and the request ends where it ends with the room heard
    first. So it does when the gate closes again 0.2 s after the voice, too soon to learn the
    floor from. A gate the room opens just before the request (0.4 s of room after the zeros)
    still gives the request one turn."""
    from foresay.audio.room_noise import ROOM_BACK_S, ROOM_QUICK_S
    from foresay.engine.events import TurnEnded, VoicePaused

    clip = speech_clip(tmp_path, "Please set a timer for twenty minutes.", before_s=1.5, after_s=2.0, noise_db=-60.0)

    def ends(x: np.ndarray, shift_s: float) -> tuple[list[tuple[float, float]], tuple[float, float]]:
        events = feed(Endpointer(make_vad(VadConfig()), EndpointerConfig(), FixedHangover(0.6)), x)
        at = [(e.t - T0 - shift_s, getattr(e, "last_voiced_t", 0.0) - T0 - shift_s) for e in events]
        return ([a for a, e in zip(at, events) if isinstance(e, TurnEnded)],
                [a for a, e in zip(at, events) if isinstance(e, VoicePaused)][-1])

    reference, reference_pause = ends(clip.samples, 0.0)
    assert len(reference) == 1 and abs(reference[0][1] - clip.speech_end) <= 2 * FRAME
    zeros = np.zeros(2 * SAMPLE_RATE, np.float32)
    one_vad_frame = 0.03 + EPS  # the VAD started afresh may hear the last frame otherwise
    # the gate opens on the voice, or on the room just before it; it stays open, or closes 0.2 s
    # after the voice
    for room_before_s, hang_s in ((0.05, None), (0.4, None), (0.05, 0.2)):
        cut = int(round((clip.speech_start - room_before_s) / FRAME)) * round(FRAME * SAMPLE_RATE)
        stop = None if hang_s is None else int(round((clip.speech_end + hang_s) * SAMPLE_RATE))
        got, pause = ends(np.concatenate([zeros, clip.samples[cut:stop], zeros]), 2.0 - cut / SAMPLE_RATE)
        assert len(got) == 1
        assert got[0][1] == pytest.approx(reference[0][1], abs=one_vad_frame)  # the last voiced frame
        assert pause[1] == pytest.approx(reference_pause[1], abs=one_vad_frame)
        if hang_s is None:
            assert got[0][0] == pytest.approx(reference[0][0], abs=one_vad_frame)  # the end itself
            assert pause[0] <= reference_pause[1] + ROOM_BACK_S + one_vad_frame
            # the room's level came back to its quietest between the words: reported as soon as
            # with the room heard first, give or take the quick rule's frames
            assert pause[0] <= reference_pause[0] + ROOM_QUICK_S + one_vad_frame


def test_after_zeros_a_quiet_stretch_as_quiet_as_the_gaps_between_words_is_the_room_at_once():
    """After zeros, 0.1 s of steady quiet sound that comes down to the quietest moments between the
    words before it is the room (a gated microphone's), not 0.3 s later; a synthesized voice's
    near-silence in digital silence (-97 dBFS) is no microphone's room, and waits for the
    ordinary rule."""
    from foresay.audio.room_noise import ROOM_BACK_S, ROOM_QUICK_S, RoomNoise

    frame_s = 0.03
    n = round(frame_s * SAMPLE_RATE)
    rng = np.random.default_rng(3)

    def noise(db: float, seconds: float) -> np.ndarray:
        x = rng.standard_normal(round(seconds * SAMPLE_RATE))
        return (x / np.sqrt(np.mean(x ** 2)) * 10 ** (db / 20)).astype(np.float32)

    def room_back_after(gap_db: float) -> float | None:
        """Seconds of the final quiet stretch before the room was back (None: not in 0.6 s)."""
        words = [noise(-20.0, 0.25) if i % 2 == 0 else noise(gap_db, 0.09) for i in range(9)]
        x = np.concatenate([np.zeros(SAMPLE_RATE, np.float32), *words, noise(gap_db, 0.6)])
        room, quiet_from = RoomNoise(frame_s), SAMPLE_RATE + sum(len(w) for w in words)
        for i in range(0, len(x) - n + 1, n):
            room.margin(x[i:i + n])
            if room.came_back is not None and i >= quiet_from:
                return (i + n - quiet_from) / SAMPLE_RATE
        return None

    assert room_back_after(-65.0) <= ROOM_QUICK_S + 2 * frame_s  # a gated microphone's room
    assert room_back_after(-97.0) >= ROOM_BACK_S - frame_s  # a voice's near-silence

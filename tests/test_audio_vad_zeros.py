"""Digital silence teaches a VAD nothing. A VAD that adapts to what it hears (WebRTC's noise
model) and is fed zeros takes them for the room, and then calls the room speech; after a stretch
of zeros the VAD starts afresh instead, as at the start of a stream."""
import numpy as np
import pytest

from foresay.audio.vad import ZEROS_RESET_S, VadConfig, make_vad

RATE = 16000


def room(seconds: float, db: float, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(int(seconds * RATE))
    x = np.convolve(x, np.ones(8) / 8, mode="same")  # some colour, as a room's noise has
    return (x * 10 ** (db / 20) / np.sqrt(np.mean(x ** 2))).astype(np.float32)


def frames(vad, x: np.ndarray, judge=None) -> list[bool]:
    n = vad.frame_samples
    judge = judge or vad.is_speech
    return [bool(judge(x[i:i + n])) for i in range(0, len(x) - n + 1, n)]


@pytest.mark.parametrize("max_gain_db", [30.0, 0.0])  # levelled (the default) and not
@pytest.mark.parametrize("db", [-55.0, -45.0])
def test_after_zeros_the_vad_hears_the_room_as_a_fresh_one_would(max_gain_db, db):
    config = VadConfig(max_gain_db=max_gain_db)
    loud, quiet = room(1.0, -20.0, seed=1), room(3.0, db, seed=2)
    vad = make_vad(config)
    frames(vad, loud)
    assert not any(frames(vad, np.zeros(2 * RATE, np.float32)))
    assert frames(vad, quiet) == frames(make_vad(config), quiet)


@pytest.mark.parametrize("db", [-55.0, -45.0])
def test_fed_the_zeros_the_vad_would_call_the_room_speech(db):
    config = VadConfig(max_gain_db=0.0)
    loud, quiet = room(1.0, -20.0, seed=1), room(3.0, db, seed=2)
    heard, fed = make_vad(config), make_vad(config)
    for vad in (heard, fed):
        frames(vad, loud)
    frames(heard, np.zeros(2 * RATE, np.float32))
    frames(fed, np.zeros(2 * RATE, np.float32), judge=lambda f: fed.probability(f) >= fed.threshold)
    assert sum(frames(heard, quiet)) < 0.1 * len(quiet) // heard.frame_samples
    assert sum(frames(fed, quiet)) > 0.9 * len(quiet) // fed.frame_samples


def test_a_dropout_shorter_than_the_reset_leaves_the_vad_as_it_was():
    config = VadConfig()
    speech, after = room(1.0, -20.0, seed=1), room(1.0, -30.0, seed=3)
    gap = np.zeros(int(ZEROS_RESET_S * RATE / 2), np.float32)
    one, two = make_vad(config), make_vad(config)
    frames(one, speech)
    frames(two, speech)
    frames(one, gap)
    assert frames(one, after) == frames(two, after)


def test_a_frame_of_zeros_of_the_wrong_size_is_still_refused():
    with pytest.raises(ValueError, match="samples"):
        make_vad(VadConfig()).is_speech(np.zeros(100, np.float32))

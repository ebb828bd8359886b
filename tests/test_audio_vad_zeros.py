"""Digital silence teaches a VAD nothing: a VAD that adapts to what it hears (WebRTC's noise
model) and is fed zeros takes them for the room, and then calls the room speech."""
import numpy as np
import pytest

from foresay.audio.vad import VadConfig, make_vad


def room(seconds: float, db: float, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(int(seconds * 16000))
    x = np.convolve(x, np.ones(8) / 8, mode="same")  # some colour, as a room's noise has
    return (x * 10 ** (db / 20) / np.sqrt(np.mean(x ** 2))).astype(np.float32)


def speech_frames(vad, x: np.ndarray) -> list[bool]:
    n = vad.frame_samples
    return [vad.is_speech(x[i:i + n]) for i in range(0, len(x) - n + 1, n)]


@pytest.mark.parametrize("max_gain_db", [30.0, 0.0])  # levelled (the default) and not
@pytest.mark.parametrize("db", [-55.0, -45.0])
def test_the_room_after_zeros_is_judged_as_without_them(max_gain_db, db):
    config = VadConfig(max_gain_db=max_gain_db)
    loud, quiet = room(1.0, -20.0, seed=1), room(3.0, db, seed=2)
    without = speech_frames(make_vad(config), np.concatenate([loud, quiet]))
    vad = make_vad(config)
    speech_frames(vad, loud)
    zeros = speech_frames(vad, np.zeros(32000, np.float32))
    after = speech_frames(vad, quiet)
    assert not any(zeros)
    assert after == without[-len(after):]
    assert sum(after) < len(after) / 10  # the room is not speech


def test_a_frame_of_zeros_of_the_wrong_size_is_still_refused():
    vad = make_vad(VadConfig())
    with pytest.raises(ValueError, match="samples"):
        vad.is_speech(np.zeros(100, np.float32))

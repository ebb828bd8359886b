"""The encoder window a clip is decoded in, and when a decode counts as looped (pure functions)."""
import pytest

from foresay.engine.asr.errors import InvalidAsrConfig
from foresay.engine.asr.whisper.encoder_window import encoder_windows, looks_looped, token_cap


def test_the_shortest_bucket_the_clip_fills_at_most_half_of_comes_first():
    assert encoder_windows(3.0, 30.0) == (10.0, 12.0, 15.0, 20.0, 30.0)
    assert encoder_windows(5.0, 30.0) == (10.0, 12.0, 15.0, 20.0, 30.0)
    assert encoder_windows(5.01, 30.0) == (12.0, 15.0, 20.0, 30.0)
    assert encoder_windows(6.01, 30.0) == (15.0, 20.0, 30.0)
    assert encoder_windows(7.51, 30.0) == (20.0, 30.0)
    assert encoder_windows(10.5, 30.0) == (30.0,)
    assert encoder_windows(30.0, 30.0) == (30.0,)
    assert encoder_windows(0.0, 30.0) == (10.0, 12.0, 15.0, 20.0, 30.0)


def test_longer_than_the_models_window_is_decoded_in_moving_windows():
    assert encoder_windows(35.0, 30.0) == ()


def test_buckets_at_or_above_the_models_own_window_are_not_used():
    assert encoder_windows(2.0, 6.0) == (6.0,)  # the demo Whisper hears 6 s
    assert encoder_windows(2.0, 30.0, buckets=(30.0, 8.0, 40.0)) == (8.0, 30.0)
    assert encoder_windows(2.0, 30.0, buckets=(8.0,), max_fill=0.2) == (30.0,)


def test_bad_inputs_are_refused():
    with pytest.raises(InvalidAsrConfig, match="negative"):
        encoder_windows(-1.0, 30.0)
    with pytest.raises(InvalidAsrConfig, match="max_fill"):
        encoder_windows(1.0, 30.0, max_fill=0.0)
    with pytest.raises(InvalidAsrConfig, match="positive"):
        encoder_windows(1.0, 30.0, buckets=(0.0,))


def test_a_decode_reaching_the_token_cap_or_repeating_itself_is_looped():
    assert token_cap(2.0) == 24
    assert looks_looped("wake me up", token_cap(2.0), 2.0)
    assert not looks_looped("wake me up at 6.45", 8, 2.0)
    assert looks_looped(" Wake me up at 645." * 4, 20, 2.0)   # below the cap, but it repeats itself
    assert not looks_looped("", 0, 1.0)

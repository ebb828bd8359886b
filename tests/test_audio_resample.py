"""Resampling quality, re-blocking and the capture clock mapping."""
from __future__ import annotations

import numpy as np
import pytest

from foresay.audio.clock import ClockMapper
from foresay.audio.resample import Reblocker, StreamResampler, resample, to_mono


def sine(rate: int, seconds: float, freq: float = 1000.0, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def snr_db(got: np.ndarray, want: np.ndarray) -> float:
    err = got - want
    return 10 * np.log10(np.sum(want.astype(np.float64) ** 2) / np.sum(err.astype(np.float64) ** 2))


@pytest.mark.parametrize("in_rate", [48000, 44100, 96000, 22050])
def test_1khz_sine_to_16k_keeps_snr_above_60_db_streamed_in_odd_blocks(in_rate):
    x = sine(in_rate, 2.0)
    r = StreamResampler(in_rate, 16000)
    parts = [r.process(x[i:i + 1237]) for i in range(0, len(x), 1237)]   # not a divisor
    y = np.concatenate(parts + [r.flush()])
    assert len(y) == 32000                     # no samples lost or added
    want = sine(16000, 2.0)
    s = slice(800, -800)                       # the filter's edges at start and end
    # Timing is kept too: compared against the ideal sine with no delay.
    assert snr_db(y[s], want[s]) > 60
    assert snr_db(resample(x, in_rate, 16000)[s], want[s]) > 60


def test_resampler_rejects_what_would_alias():
    # A 7 kHz tone at 48 kHz would fold to 9 kHz -> 7 kHz at 16 kHz; 10 kHz must be removed.
    y = resample(sine(48000, 1.0, freq=10000.0), 48000, 16000)
    assert 20 * np.log10(np.sqrt(np.mean(y[800:-800] ** 2)) / (0.5 / np.sqrt(2))) < -60


def test_same_rate_is_a_copy_and_mono_mix():
    x = sine(16000, 0.1)
    assert np.array_equal(StreamResampler(16000, 16000).process(x), x)
    stereo = np.stack([x, np.zeros_like(x)], axis=1)
    assert np.allclose(to_mono(stereo), x / 2)
    assert to_mono(stereo[:, :1]).shape == x.shape
    with pytest.raises(ValueError):
        to_mono(np.zeros((2, 2, 2)))


def test_reblocker_cuts_exact_blocks():
    rb = Reblocker(5)
    out = rb.push(np.arange(3)) + rb.push(np.arange(3, 12)) + rb.push(np.arange(12, 13))
    assert [list(b) for b in out] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert rb.held == 3 and list(rb.take_rest()) == [10, 11, 12] and rb.held == 0


def test_clock_mapper_smooths_jitter_and_reanchors_after_lost_audio():
    rng = np.random.default_rng(0)
    clock = ClockMapper(48000)
    true_t0 = 1000.0
    times = []
    for k in range(500):                       # 20 ms callbacks with 0-8 ms scheduling jitter
        n = k * 960
        times.append(clock.update(n, true_t0 + n / 48000 + rng.uniform(0, 0.008)))
    err = np.array(times[100:]) - (true_t0 + np.arange(100, 500) * 0.02)
    assert np.all(np.abs(err - err.mean()) < 0.002)       # jitter mostly smoothed away
    assert 0 <= err.mean() < 0.008
    assert clock.reanchors == 0
    # One callback 100 ms late (the thread was not scheduled): ignored.
    n = 500 * 960
    t = clock.update(n, true_t0 + n / 48000 + 0.1)
    assert clock.reanchors == 0 and t == pytest.approx(true_t0 + n / 48000, abs=0.008)
    # 300 ms of samples lost (overflow): the sample count no longer matches the clock.
    n = 501 * 960
    t = clock.update(n, true_t0 + n / 48000 + 0.3, discontinuity=True)
    assert clock.reanchors == 1 and t == pytest.approx(true_t0 + n / 48000 + 0.3)
    # A lasting offset without a flag (a host API that drops samples silently) re-anchors too.
    for k in range(502, 505):
        t = clock.update(k * 960, true_t0 + k * 0.02 + 0.5)
    assert clock.reanchors == 2 and t == pytest.approx(true_t0 + 504 * 0.02 + 0.5)
    assert clock.time_of(16000, 16000) == pytest.approx(clock.time_of(48000))

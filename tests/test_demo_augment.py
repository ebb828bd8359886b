"""Feature augmentation for the demo Whisper: speech is moved and distorted, never cut off."""
import pytest
import torch

from foresay.engine.demo.augment import AugmentConfig, augment, shift_right, warp_mel

NONE = dict(max_shift=0, warp=0.0, freq_mask=0, time_mask=0, time_masks=0)


def _clips(batch=3, mels=80, frames=300, speech=120):
    gen = torch.Generator().manual_seed(0)
    feats = torch.full((batch, mels, frames), -0.75)  # the padding value
    feats[:, :, :speech] = torch.randn(batch, mels, speech, generator=gen)
    return feats


def test_shift_moves_speech_right_and_fills_with_padding():
    clip = _clips(1)[0]
    moved = shift_right(clip, 25)
    assert torch.equal(moved[:, 25:145], clip[:, :120])
    assert torch.all(moved[:, :25] == -0.75) and moved.shape == clip.shape


def test_warp_by_one_is_identity_and_other_scales_move_bins():
    clip = _clips(1)[0]
    assert torch.allclose(warp_mel(clip, 1.0), clip)
    higher = warp_mel(clip, 1.1)
    assert torch.allclose(higher[10], clip[11])  # bin 10 reads bin 11.0
    assert not torch.allclose(higher, clip)


def test_no_augmentation_configured_changes_nothing():
    feats = _clips()
    out = augment(feats, [120] * 3, AugmentConfig(**NONE), torch.Generator().manual_seed(0))
    assert torch.equal(out, feats)


def test_shift_never_pushes_speech_out_of_the_window():
    feats = _clips(batch=8, speech=290)
    config = AugmentConfig(**{**NONE, "max_shift": 40})
    out = augment(feats, [290] * 8, config, torch.Generator().manual_seed(1))
    for before, after in zip(feats, out):
        shift = int((after[0] != -0.75).nonzero()[0])
        assert shift <= 10 and torch.equal(after[:, shift:shift + 290], before[:, :290])
    full = augment(_clips(speech=300), [300] * 3, config, torch.Generator().manual_seed(1))
    assert torch.equal(full, _clips(speech=300))


def test_masks_blank_one_band_and_spans_with_the_padding_frame():
    feats = _clips(batch=1, speech=299)  # the last frame is padding
    config = AugmentConfig(**{**NONE, "time_mask": 10, "time_masks": 2})
    out = augment(feats, [299], config, torch.Generator().manual_seed(3))
    changed = (out != feats).any(dim=1)[0]
    assert 0 < int(changed.sum()) <= 20 and torch.all(out[0][:, changed] == -0.75)
    band = augment(feats, [299], AugmentConfig(**{**NONE, "freq_mask": 8}), torch.Generator().manual_seed(3))
    rows = (band != feats).any(dim=2)[0]
    assert 0 < int(rows.sum()) <= 8


def test_augmentation_is_seeded():
    feats = _clips()
    one = augment(feats, [120] * 3, AugmentConfig(), torch.Generator().manual_seed(7))
    two = augment(feats, [120] * 3, AugmentConfig(), torch.Generator().manual_seed(7))
    other = augment(feats, [120] * 3, AugmentConfig(), torch.Generator().manual_seed(8))
    assert torch.equal(one, two) and not torch.equal(one, other)


@pytest.mark.parametrize("bad", [{"max_shift": -1}, {"warp": 0.6}, {"time_masks": -2}])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="augmentation"):
        AugmentConfig(**bad)

"""The flow over windows of a sentence's frames (`LatentFrames`) equals the flow over the whole
sentence, and the first reads run it over no more frames than they need."""
import numpy as np
import pytest

from foresay.engine.tts.piper_model import FLOW_CONTEXT_FRAMES, WINDOWED_READS, LatentFrames


class ReachFlow:
    """A stand-in flow whose output frame is the sum of the input frames up to `reach` either side
    (zero past the edges, as convolutions pad), times the mask."""

    def __init__(self, reach: int) -> None:
        self.reach, self.frames_run = reach, []

    def __call__(self, prior: np.ndarray, mask: np.ndarray) -> np.ndarray:
        self.frames_run.append(prior.shape[-1])
        r = self.reach
        padded = np.pad(prior * mask, ((0, 0), (0, 0), (r + 1, r)))
        total = np.cumsum(padded, axis=-1)
        return (total[:, :, 2 * r + 1:] - total[:, :, :-2 * r - 1]) * mask


def _prior(frames: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    return rng.normal(size=(1, 4, frames)), np.ones((1, 1, frames))  # float64: the sums round alike


def test_windows_equal_the_whole_sentence_and_the_first_reads_run_only_what_they_need():
    prior, mask = _prior(300)
    whole = ReachFlow(FLOW_CONTEXT_FRAMES)(prior, mask) * mask
    flow = ReachFlow(FLOW_CONTEXT_FRAMES)
    latent = LatentFrames(prior, mask, flow)
    assert WINDOWED_READS == 2
    first = latent.read(0, 40)
    assert flow.frames_run == [40 + FLOW_CONTEXT_FRAMES]
    second = latent.read(30, 120)  # the second window: its frames and the context either side
    assert flow.frames_run[1:] == [120 - 40 + 2 * FLOW_CONTEXT_FRAMES]
    rest = latent.read(20, 300)
    assert flow.frames_run[2:] == [300 - 120 + FLOW_CONTEXT_FRAMES]  # then the rest at once
    assert np.allclose(first, whole[:, :, :40], atol=1e-6) and np.allclose(second, whole[:, :, 30:120], atol=1e-6)
    assert np.allclose(rest, whole[:, :, 20:], atol=1e-6)
    latent.read(0, 300)
    assert len(flow.frames_run) == 3  # nothing is run twice


def test_without_windows_the_first_read_runs_the_flow_over_the_whole_sentence():
    prior, mask = _prior(300)
    flow = ReachFlow(FLOW_CONTEXT_FRAMES)
    latent = LatentFrames(prior, mask, flow, windows=False)
    latent.read(0, 40)
    latent.read(0, 300)
    assert flow.frames_run == [300]


def test_a_flow_reaching_past_the_context_would_differ_at_the_join():
    prior, mask = _prior(200)
    whole = ReachFlow(FLOW_CONTEXT_FRAMES + 8)(prior, mask)
    latent = LatentFrames(prior, mask, ReachFlow(FLOW_CONTEXT_FRAMES + 8))
    assert not np.allclose(latent.read(0, 40), whole[:, :, :40], atol=1e-6)  # the test's flow has the reach it says


def test_a_short_sentence_runs_the_flow_once_and_reads_are_checked():
    prior, mask = _prior(50)
    flow = ReachFlow(4)
    latent = LatentFrames(prior, mask, flow)
    latent.read(0, 30)
    latent.read(0, 50)
    assert flow.frames_run == [50]
    ready = LatentFrames(prior, mask)  # no flow: the frames are the latent already
    assert ready.read(5, 9) is not None and np.array_equal(ready.read(5, 9), prior[:, :, 5:9])
    with pytest.raises(ValueError, match="outside"):
        latent.read(10, 60)

"""Streamed, cross-faded codec decoding equals decoding everything at once."""
import numpy as np
import pytest

from foresay.engine.tts.codec_stream import StreamDecodeConfig, StreamingDecoder
from foresay.engine.tts.errors import InvalidTtsConfig, SynthesisFailed

HOP = 64
CODES = np.random.default_rng(0).integers(0, 1024, size=400)


def local_decode(codes) -> np.ndarray:
    """Each frame's audio depends on its own code only."""
    t = np.arange(HOP) / HOP
    return np.concatenate([np.sin(2 * np.pi * (1 + c / 64) * t) * (0.1 + c / 2048) for c in codes]) if len(codes) else np.zeros(0)


def context_decode(codes) -> np.ndarray:
    """Each frame's level also depends on its neighbours (like a convolutional decoder), so a window
    decoded without context is wrong at its edges."""
    c = np.asarray(codes, dtype=float)
    padded = np.pad(c, 1, mode="edge")
    levels = (padded[:-2] + padded[1:-1] + padded[2:]) / 3
    return np.repeat(levels / 1024, HOP)


def _stream(decode, config, total=300, step=5):
    decoder = StreamingDecoder(decode, config)
    read = lambda a, b: CODES[a:b]  # noqa: E731
    chunks = []
    for available in range(0, total, step):
        chunks += decoder.advance(available, read)
    return chunks + decoder.finish(total, read)


def test_streaming_equals_batch_for_a_decoder_without_context():
    chunks = _stream(local_decode, StreamDecodeConfig(samples_per_frame=HOP))
    np.testing.assert_allclose(np.concatenate(chunks), local_decode(CODES[:300]), atol=1e-6)


def test_context_and_lookahead_hide_the_window_edges():
    config = StreamDecodeConfig(samples_per_frame=HOP, context_frames=2, lookahead_frames=2)
    streamed = np.concatenate(_stream(context_decode, config))
    np.testing.assert_allclose(streamed, context_decode(CODES[:300]), atol=1e-6)
    naive = StreamDecodeConfig(samples_per_frame=HOP, context_frames=0, lookahead_frames=0, crossfade_frames=0)
    assert np.abs(np.concatenate(_stream(context_decode, naive)) - context_decode(CODES[:300])).max() > 0.01


def test_first_chunk_is_small_and_later_chunks_large():
    config = StreamDecodeConfig(samples_per_frame=HOP, first_chunk_frames=10, chunk_frames=40, crossfade_frames=2)
    sizes = [c.size // HOP for c in _stream(local_decode, config, total=200, step=1)]
    assert sizes[0] == 8 and set(sizes[1:-1]) == {38} and sum(sizes) == 200


def test_growing_chunks_double_from_the_first_and_still_equal_the_batch():
    config = StreamDecodeConfig(samples_per_frame=HOP, first_chunk_frames=10, chunk_frames=64, crossfade_frames=2,
                                context_frames=2, lookahead_frames=2, grow=True)
    chunks = _stream(context_decode, config, total=300, step=1)
    sizes = [c.size // HOP for c in chunks]
    # windows of 10, 20, 40 and 64 frames, each chunk less the 2-frame cross-fade held for the next
    assert sizes[:5] == [8, 18, 38, 62, 62] and sum(sizes) == 300
    np.testing.assert_allclose(np.concatenate(chunks), context_decode(CODES[:300]), atol=1e-6)


def test_nothing_is_decoded_before_enough_frames_exist():
    decoder = StreamingDecoder(local_decode, StreamDecodeConfig(samples_per_frame=HOP, first_chunk_frames=12, lookahead_frames=4))
    assert decoder.advance(15, lambda a, b: CODES[a:b]) == []
    assert len(decoder.advance(16, lambda a, b: CODES[a:b])) == 1


def test_a_short_utterance_is_decoded_whole_on_finish():
    decoder = StreamingDecoder(local_decode, StreamDecodeConfig(samples_per_frame=HOP))
    out = decoder.finish(5, lambda a, b: CODES[a:b])
    np.testing.assert_allclose(np.concatenate(out), local_decode(CODES[:5]), atol=1e-6)
    assert StreamingDecoder(local_decode, StreamDecodeConfig(samples_per_frame=HOP)).finish(0, lambda a, b: CODES[a:b]) == []


def test_wrong_decoder_lengths_and_shrinking_streams_are_errors():
    with pytest.raises(SynthesisFailed, match="expected"):
        StreamingDecoder(lambda c: np.zeros(3), StreamDecodeConfig(samples_per_frame=HOP)).finish(5, lambda a, b: CODES[a:b])
    decoder = StreamingDecoder(local_decode, StreamDecodeConfig(samples_per_frame=HOP))
    decoder.advance(100, lambda a, b: CODES[a:b])
    with pytest.raises(SynthesisFailed, match="shrank"):
        decoder.finish(20, lambda a, b: CODES[a:b])


@pytest.mark.parametrize("bad", [dict(samples_per_frame=0), dict(context_frames=-1),
                                 dict(first_chunk_frames=4, crossfade_frames=2)])
def test_bad_decoding_configs_are_refused(bad):
    with pytest.raises(InvalidTtsConfig):
        StreamDecodeConfig(**bad)


def test_flushing_before_a_pause_keeps_the_stream_equal_to_batch():
    config = StreamDecodeConfig(samples_per_frame=HOP)
    decoder = StreamingDecoder(local_decode, config)
    read = lambda a, b: CODES[a:b]  # noqa: E731
    chunks = decoder.advance(30, read)
    assert decoder.ready_after_flush(30) == 28
    chunks += decoder.flush(30, read)
    assert sum(c.size for c in chunks) == 28 * HOP  # all but the cross-fade tail is ready to hold
    chunks += decoder.advance(120, read) + decoder.finish(150, read)
    np.testing.assert_allclose(np.concatenate(chunks), local_decode(CODES[:150]), atol=1e-6)

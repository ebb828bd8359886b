"""Demo speech: requests (and their word prefixes) spoken by espeak-ng, cached outside the repository."""
import random

import numpy as np

from foresay.engine.demo.speech import TEST_VARIANTS, speech_set, utterances, word_prefix


def test_word_prefixes_drop_at_least_the_last_word():
    rng = random.Random(0)
    text = "Um, what is the capital of Japan?"
    cuts = {word_prefix(text, rng) for _ in range(200)}
    assert cuts == {" ".join(text.split()[:k]) for k in range(1, 7)}
    assert word_prefix("Hello.", rng) == "Hello."


def test_requests_are_rendered_once_then_read_from_the_cache(tmp_path):
    first = speech_set("train", 4, seed=0, cache=tmp_path)
    assert first.texts == utterances("train", 4, seed=0)
    assert all(len(a) > 0.5 * 16_000 and np.abs(a).max() > 0.05 for a in first.audio)
    assert not any(s.voice.endswith(TEST_VARIANTS) for s in first.settings)
    again = speech_set("train", 4, seed=0, cache=tmp_path)
    assert again.texts == first.texts and len(list(tmp_path.glob("*.npz"))) == 1
    assert all(np.array_equal(a, b) for a, b in zip(first.audio, again.audio))  # fresh = cached
    elsewhere = speech_set("train", 4, seed=0, cache=tmp_path / "other")  # rendered again, threads and all
    assert all(np.array_equal(a, b) for a, b in zip(first.audio, elsewhere.audio))


def test_prefix_clips_are_prefixes_of_the_same_requests_spoken_alone(tmp_path):
    whole = speech_set("train", 6, seed=0, cache=tmp_path)
    prefixes = speech_set("train", 6, seed=0, cache=tmp_path, kind="prefixes")
    assert len(list(tmp_path.glob("*.npz"))) == 2
    for request, prefix in zip(whole.texts, prefixes.texts):
        assert request.split()[:len(prefix.split())] == prefix.split()
    assert any(p != r for p, r in zip(prefixes.texts, whole.texts))
    both = whole + prefixes
    assert both.texts == whole.texts + prefixes.texts and len(both.audio) == 12


def test_held_out_splits_speak_in_held_out_voices(tmp_path):
    test = speech_set("test", 4, seed=0, cache=tmp_path)
    assert all(s.voice.endswith(TEST_VARIANTS) for s in test.settings)


def test_fragment_clips_are_requests_cut_at_a_pause_with_the_words_said_so_far(tmp_path):
    whole = speech_set("train", 6, seed=0, cache=tmp_path)
    fragments = speech_set("train", 6, seed=0, cache=tmp_path, kind="fragments")
    assert len(list(tmp_path.glob("*.npz"))) == 2
    for request, fragment, clip in zip(whole.texts, fragments.texts, fragments.audio):
        said = fragment.split()
        assert said == request.split()[:len(said)] and (len(said) < len(request.split()) or len(said) == 1)
        frames = np.sqrt(np.mean(clip[:len(clip) // 160 * 160].reshape(-1, 160) ** 2, axis=1))
        assert frames[-8:].max() < 0.1 * frames.max()  # it ends in the pause, not in a word
    assert speech_set("train", 6, seed=0, cache=tmp_path, kind="fragments").texts == fragments.texts


def test_paused_clips_are_whole_requests_with_a_pause_inside(tmp_path):
    whole = speech_set("train", 6, seed=0, cache=tmp_path)
    paused = speech_set("train", 6, seed=0, cache=tmp_path, kind="paused")
    assert paused.texts == whole.texts
    for text, clip in zip(paused.texts, paused.audio):
        if len(text.split()) > 1:
            frames = np.sqrt(np.mean(clip[:len(clip) // 160 * 160].reshape(-1, 160) ** 2, axis=1))
            loud = np.flatnonzero(frames > 0.1 * frames.max())
            gaps = np.diff(loud)
            assert gaps.max() >= 20  # a quiet run of at least 0.2 s between words
    assert len(paused.at_most(1.0).texts) < len(paused.texts) == len(paused.at_most(30.0).texts)


def test_an_unknown_speech_kind_is_refused(tmp_path):
    import pytest

    from foresay.engine.errors import ForesayError
    with pytest.raises(ForesayError, match="not one of"):
        speech_set("train", 2, seed=0, cache=tmp_path, kind="whispered")


def test_clips_in_the_room_gain_their_own_noise_before_and_after_and_nothing_else():
    import pytest

    from foresay.engine.demo.speech import SpeechSet, VoiceSetting, in_room
    from foresay.engine.errors import ForesayError

    voice = VoiceSetting("en-us", 160, 50, noise=0.02)
    clip = np.sin(np.arange(16_000, dtype=np.float32) / 5) * 0.5  # 1 s, peak 0.5
    framed = in_room(clip, voice, noise_seed=1, lead_s=0.3, tail_s=0.2)
    assert len(framed) == 16_000 + 4_800 + 3_200
    assert np.array_equal(framed[4_800:-3_200], clip)  # the words untouched
    for room in (framed[:4_800], framed[-3_200:]):
        assert 0.5 * 0.01 < np.sqrt(np.mean(room ** 2)) < 0.5 * 0.03  # the setting's noise at the clip's level
    assert np.array_equal(framed, in_room(clip, voice, 1, 0.3, 0.2))  # seeded
    silent_room = in_room(clip, VoiceSetting("en-us", 160, 50, noise=0.0), 1, 0.3, 0.2)
    assert not silent_room[:4_800].any()  # a clip without noise is framed in digital silence
    with pytest.raises(ForesayError, match="must not be negative"):
        in_room(clip, voice, 1, -0.1, 0.0)

    speech = SpeechSet(["a", "b"], [clip, np.concatenate([clip] * 5)], [voice, voice])
    drawn = speech.in_room((0.0, 0.6), (0.0, 0.4), seed=3, limit_s=6.0)
    assert drawn.texts == speech.texts and drawn.settings == speech.settings
    assert 16_000 < len(drawn.audio[0]) <= 16_000 * 2.0
    assert 80_000 < len(drawn.audio[1]) <= 16_000 * 6.0 + 2  # shrunk to the window
    assert [len(a) for a in drawn.audio] == [len(a) for a in speech.in_room((0.0, 0.6), (0.0, 0.4), 3, 6.0).audio]
    fixed = speech.in_room((0.3, 0.3), (0.0, 0.0), seed=0)
    assert [len(a) for a in fixed.audio] == [16_000 + 4_800, 80_000 + 4_800]
    with pytest.raises(ForesayError, match="low <= high"):
        speech.in_room((0.5, 0.2), (0.0, 0.0), seed=0)


def test_a_silent_share_of_the_room_frames_those_clips_in_digital_silence_and_moves_nothing_else():
    import pytest

    from foresay.engine.demo.speech import SpeechSet, VoiceSetting, in_room
    from foresay.engine.errors import ForesayError

    voice = VoiceSetting("en-us", 160, 50, noise=0.02)
    clip = np.sin(np.arange(16_000, dtype=np.float32) / 5) * 0.5
    silent = in_room(clip, voice, 1, 0.3, 0.2, silent=True)
    assert not silent[:4_800].any() and not silent[-3_200:].any() and np.array_equal(silent[4_800:-3_200], clip)

    speech = SpeechSet([str(i) for i in range(40)], [clip] * 40, [voice] * 40)
    noisy = speech.in_room((0.0, 0.6), (0.0, 0.4), seed=3)
    half = speech.in_room((0.0, 0.6), (0.0, 0.4), seed=3, silent_share=0.5)
    assert [len(a) for a in half.audio] == [len(a) for a in noisy.audio]  # the same leads and tails
    in_silence = lambda a: np.count_nonzero(a) == np.count_nonzero(clip)  # noqa: E731  nothing but the words
    assert 5 < sum(map(in_silence, half.audio)) < 35 and not any(map(in_silence, noisy.audio))
    for a, b in zip(half.audio, noisy.audio):  # a clip framed in noise is framed as without the share
        assert in_silence(a) or np.array_equal(a, b)
    assert all(map(in_silence, speech.in_room((0.1, 0.6), (0.0, 0.4), 3, silent_share=1.0).audio))
    with pytest.raises(ForesayError, match="silent share must lie in 0..1"):
        speech.in_room((0.0, 0.6), (0.0, 0.4), seed=3, silent_share=1.5)

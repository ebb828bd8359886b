"""Streaming transcription: stable committed text, forced prefixes, long utterances."""
import numpy as np
import pytest

from foresay.engine.asr.backends import Hypothesis
from foresay.engine.asr.errors import InvalidAsrConfig
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.asr.scripted import ScriptedBackend, SyntheticUtterance
from foresay.engine.asr.streaming import StreamingConfig, StreamingTranscriber, silence_cut

SENTENCE = "I would like to book a table for their family at eight tonight please".split()


def stream(transcriber, audio, hop_ms=250):
    hop = hop_ms * SAMPLE_RATE // 1000
    partials = []
    for at in range(0, len(audio), hop):
        transcriber.append(audio[at: at + hop])
        partials.append(transcriber.hop())
    return partials, transcriber.finish()


def assert_committed_only_grows(partials):
    for before, after in zip(partials, partials[1:]):
        assert after.committed.split()[: len(before.committed.split())] == before.committed.split()
        assert after.revision == before.revision + 1


def test_partials_commit_by_agreement_and_final_is_the_sentence():
    utterance = SyntheticUtterance(tuple(SENTENCE), pause_after=frozenset({5}))
    backend = ScriptedBackend(utterance, confusions={8: "there"})
    transcriber = StreamingTranscriber(backend, turn_id=7, start_time=100.0)
    partials, final = stream(transcriber, utterance.audio())
    assert final.text == " ".join(SENTENCE) and final.turn_id == 7
    assert final.t == pytest.approx(100.0 + len(utterance.audio()) / SAMPLE_RATE)
    assert_committed_only_grows(partials)
    assert partials[-1].committed.split() == SENTENCE[:-1]  # the last word is never committed
    assert any(p.tentative.split()[-1:] == ["there"] for p in partials)  # a correction happened...
    assert all("there" not in p.committed.split() for p in partials)  # ...and was never committed
    assert any(p.tentative and p.tentative.split()[-1] not in SENTENCE for p in partials)  # growing fragments
    # the committed tokens are forced as the decoder prefix of the next hop
    for call, partial in zip(backend.calls[1:-1], partials):
        assert backend.text.decode(call["forced"]).strip() == partial.committed
    assert backend.calls[-1]["forced"] == ()   # the final decodes the whole utterance afresh


def test_history_is_the_bounded_prompt():
    utterance = SyntheticUtterance(("hello", "there"))
    backend = ScriptedBackend(utterance)
    history = " ".join(f"w{i}" for i in range(300))
    stream(StreamingTranscriber(backend, StreamingConfig(prompt_tokens=50, history_prompt=True), history=history),
           utterance.audio())
    assert backend.text.decode(backend.calls[0]["prompt"]).split() == history.split()[-50:]
    backend = ScriptedBackend(utterance)
    stream(StreamingTranscriber(backend, StreamingConfig(prompt_tokens=0), history=history), utterance.audio())
    assert backend.calls[0]["prompt"] == ()


def test_long_utterance_is_trimmed_at_committed_pauses_without_losing_words():
    words = tuple(f"word{i}" for i in range(110))
    utterance = SyntheticUtterance(words, pause_after=frozenset(range(9, 110, 10)))
    assert len(utterance.audio()) / SAMPLE_RATE > 40
    backend = ScriptedBackend(utterance, confusions={i: "oops" for i in range(3, 110, 7)})
    transcriber = StreamingTranscriber(backend, StreamingConfig(trim_after_s=12))
    partials, final = stream(transcriber, utterance.audio())
    assert final.text.split() == list(words)
    assert transcriber.trims >= 3
    assert max(call["samples"] for call in backend.calls) < 30 * SAMPLE_RATE
    assert_committed_only_grows(partials)
    # the trimmed text became the prompt of later windows
    assert backend.text.decode(backend.calls[-1]["prompt"]).split()[-1] in words


def test_hard_limit_without_committed_pause_keeps_the_window_under_30_s():
    words = tuple(f"w{i}" for i in range(100))
    utterance = SyntheticUtterance(words, gap_ms=40)  # no long pause anywhere
    backend = ScriptedBackend(utterance)
    transcriber = StreamingTranscriber(backend, StreamingConfig(hop_ms=1000))
    partials, final = stream(transcriber, utterance.audio(), hop_ms=1000)
    assert transcriber.trims >= 1
    assert max(call["samples"] for call in backend.calls) <= 30 * SAMPLE_RATE
    assert_committed_only_grows(partials)
    # cut at the quietest moment (a 40 ms gap between words), not where the last hypothesis ended
    assert final.text.split() == list(words)


def test_config_is_validated():
    for bad in [dict(hop_ms=10), dict(prompt_tokens=500), dict(trim_after_s=30), dict(min_pause_ms=1),
                dict(silence_rms=0), dict(gap_ms=5), dict(min_segment_s=0), dict(segment_s=0.5)]:
        with pytest.raises(InvalidAsrConfig):
            StreamingConfig(**bad)


def test_a_burst_of_coalesced_audio_past_the_window_is_still_decodable():
    words = tuple(f"w{i}" for i in range(60))
    utterance = SyntheticUtterance(words, pause_after=frozenset(range(7, 60, 8)))
    audio = utterance.audio()
    backend = ScriptedBackend(utterance)
    transcriber = StreamingTranscriber(backend, StreamingConfig(trim_after_s=12))
    transcriber.append(audio[: 8 * SAMPLE_RATE])
    first = transcriber.hop()
    transcriber.append(audio[8 * SAMPLE_RATE: 36 * SAMPLE_RATE])  # 28 s arrive at once: a stalled worker
    second = transcriber.hop()
    transcriber.append(audio[36 * SAMPLE_RATE:])
    final = transcriber.finish()
    assert max(call["samples"] for call in backend.calls) <= 30 * SAMPLE_RATE
    assert second.committed.split()[: len(first.committed.split())] == first.committed.split()
    assert final.text.split() == list(words)  # nothing dropped, nothing repeated


def test_a_short_window_model_is_trimmed_within_its_window():
    """The demo Whisper hears 6 s: a 20 s request is trimmed at its pauses long before 20 s."""
    words = tuple(f"w{i}" for i in range(40))
    utterance = SyntheticUtterance(words, pause_after=frozenset(range(4, 40, 5)))
    assert len(utterance.audio()) / SAMPLE_RATE > 15
    backend = ScriptedBackend(utterance)
    backend.window_seconds = 6.0
    transcriber = StreamingTranscriber(backend)
    assert transcriber.trim_after_s == 5.0
    partials, final = stream(transcriber, utterance.audio())
    assert max(call["samples"] for call in backend.calls) <= 6 * SAMPLE_RATE
    assert final.text.split() == list(words) and transcriber.trims >= 3
    assert_committed_only_grows(partials)


def test_continuous_speech_past_a_short_window_is_cut_at_its_gaps_and_loses_no_word():
    """Sentences 200 ms apart (no pause long enough to commit at) to a model that hears 6 s: each
    full window is cut at a silence between sentences and nothing is dropped or split."""
    words = tuple(f"w{i}" for i in range(60))
    utterance = SyntheticUtterance(words, pause_ms=200, pause_after=frozenset(range(4, 60, 5)))
    assert len(utterance.audio()) / SAMPLE_RATE > 20
    backend = ScriptedBackend(utterance)
    backend.window_seconds = 6.0
    transcriber = StreamingTranscriber(backend)
    partials, final = stream(transcriber, utterance.audio())
    assert final.text.split() == list(words) and transcriber.trims >= 3
    assert max(call["samples"] for call in backend.calls) <= 6 * SAMPLE_RATE
    assert_committed_only_grows(partials)
    # every trim finalized whole sentences: the cuts lie in the gaps after every fifth word
    assert len(backend.text.decode(transcriber.finalized).split()) % 5 == 0


class _HearsAWordInSilence(ScriptedBackend):
    """Like a real model given only silence: it "hears" the first word of the request."""

    def transcribe(self, audio, forced=(), prompt=(), guess=()):
        if np.abs(np.asarray(audio)).max(initial=0.0) <= 0.02 and not forced:
            self.calls.append({"samples": len(audio), "forced": (), "prompt": tuple(prompt)})
            return Hypothesis((self.text.id(self.utterance.words[0]),))
        return super().transcribe(audio, forced, prompt, guess)


def test_a_pause_in_silence_before_any_speech_finalizes_nothing():
    words = tuple(f"w{i}" for i in range(20))
    utterance = SyntheticUtterance(words, lead_ms=600)  # 8 s without a pause after the first word
    backend = _HearsAWordInSilence(utterance)
    backend.window_seconds = 6.0
    partials, final = stream(StreamingTranscriber(backend), utterance.audio())
    assert final.text.split() == list(words)  # no word repeated


def test_silence_left_after_a_cut_is_not_decoded_into_words():
    """Pieces of at most 2 s after the first cut (`segment_s`), then 3 s of silence at the end:
    the silence left after a cut gives no words, not the word a model "hears" in silence."""
    words = tuple(f"w{i}" for i in range(20))
    utterance = SyntheticUtterance(words, pause_ms=3000, pause_after=frozenset(range(4, 20, 5)))
    backend = _HearsAWordInSilence(utterance)
    backend.window_seconds = 6.0
    transcriber = StreamingTranscriber(backend, StreamingConfig(segment_s=2.0))
    partials, final = stream(transcriber, utterance.audio())
    assert final.text.split() == list(words) and transcriber.trims >= 3


class _HearsQuietly(ScriptedBackend):
    """A recognizer that hears a speaker 26 dB quieter (every 10 ms below `silence_rms`)."""

    def transcribe(self, audio, forced=(), prompt=(), guess=()):
        return super().transcribe(np.asarray(audio) * 20, forced, prompt, guess)


def test_a_quiet_speaker_is_not_taken_for_silence():
    words = tuple(f"w{i}" for i in range(60))
    utterance = SyntheticUtterance(words, pause_ms=200, pause_after=frozenset(range(4, 60, 5)))
    backend = _HearsQuietly(utterance)
    backend.window_seconds = 6.0
    quiet = utterance.audio() / 20
    assert np.abs(quiet).max() < StreamingConfig().silence_rms
    partials, final = stream(StreamingTranscriber(backend, StreamingConfig(segment_s=3.0)), quiet)
    assert final.text.split() == list(words)


def test_silence_cut_takes_the_first_long_enough_gap_after_the_minimum_segment():
    audio = np.full(5 * SAMPLE_RATE, 0.1, dtype=np.float32)
    for start_s, length_ms in [(0.5, 300), (1.5, 100), (2.5, 200), (3.5, 400)]:
        at = int(start_s * SAMPLE_RATE)
        audio[at: at + length_ms * SAMPLE_RATE // 1000] = 0.0
    cut = silence_cut(audio, silence_rms=0.01, gap_ms=150, min_segment_s=1.0)
    assert cut == int(2.6 * SAMPLE_RATE)  # not the one before 1 s, not the 100 ms one
    audio[int(0.2 * SAMPLE_RATE):] = 0.1
    audio[int(3.0 * SAMPLE_RATE): int(3.0 * SAMPLE_RATE) + 160] = 0.001  # no gap: the quietest frame
    assert silence_cut(audio, silence_rms=0.01, gap_ms=150, min_segment_s=1.0) == 3 * SAMPLE_RATE


class _CompletingBackend(ScriptedBackend):
    """Like the demo Whisper on a cut-off request: until the third word is heard, it completes the
    request with a guess of its own, the same guess at every hop."""

    def transcribe(self, audio, forced=(), prompt=(), guess=()):
        heard = self._hear(np.asarray(audio))
        words = heard if len(heard) >= 3 else (heard[:2] + ["walk", "the", "dog"])[:5]
        if len(heard) >= 3 and list(forced) != [self.text.id(w) for w in words[:len(forced)]]:
            words = [self.text.pieces[t] for t in forced] + heard[len(forced):]  # forced words stay
        self.calls.append({"samples": len(audio), "forced": tuple(forced), "prompt": tuple(prompt)})
        return Hypothesis(tuple(self.text.id(w) for w in words[len(forced):]))


@pytest.mark.parametrize("redecode", [False, True])
def test_final_redecode_recovers_from_committed_guesses(redecode):
    utterance = SyntheticUtterance(("remind", "me", "water", "the", "plants"), word_ms=400)
    backend = _CompletingBackend(utterance)
    transcriber = StreamingTranscriber(backend, StreamingConfig(final_redecode=redecode))
    partials, final = stream(transcriber, utterance.audio())
    assert any("walk" in p.committed for p in partials)  # two hops agreed on the guess
    if redecode:
        assert final.text == "remind me water the plants" and backend.calls[-1]["forced"] == ()
    else:
        assert "walk" in final.text  # committed words are forced into the final transcript


@pytest.mark.parametrize("redecode", [False, True])
def test_a_previewed_final_is_the_final_without_decoding_again(redecode):
    utterance = SyntheticUtterance(tuple(SENTENCE), pause_after=frozenset({5}))
    audio = utterance.audio()
    hop = 250 * SAMPLE_RATE // 1000

    def partly(transcriber, upto):
        for at in range(0, upto, hop):
            transcriber.append(audio[at: min(at + hop, upto)])
            transcriber.hop()

    # reference: no preview
    plain = StreamingTranscriber(ScriptedBackend(utterance), StreamingConfig(final_redecode=redecode))
    partly(plain, len(audio))
    expected = plain.finish()
    # a preview during the silence, then the end: the same text, and no decode more
    backend = ScriptedBackend(utterance)
    transcriber = StreamingTranscriber(backend, StreamingConfig(final_redecode=redecode))
    partly(transcriber, len(audio))
    state = (transcriber.committed, transcriber.previous, transcriber.revision, len(transcriber.audio))
    preview = transcriber.preview_final()
    assert (transcriber.committed, transcriber.previous, transcriber.revision, len(transcriber.audio)) == state
    assert transcriber.preview_final() is preview  # asked again: nothing decoded
    calls = len(backend.calls)
    final = transcriber.finish()
    assert len(backend.calls) == calls and final == preview == expected
    assert len(transcriber.decodes) == len(plain.decodes)


def test_audio_after_a_preview_is_decoded_into_the_final():
    utterance = SyntheticUtterance(tuple(SENTENCE), pause_after=frozenset({5}))
    audio = utterance.audio()
    backend = ScriptedBackend(utterance)
    transcriber = StreamingTranscriber(backend)
    half = len(audio) // 2
    transcriber.append(audio[:half])
    transcriber.hop()
    early = transcriber.preview_final()
    assert len(early.text.split()) < len(SENTENCE)
    transcriber.append(audio[half:])  # the user went on
    calls = len(backend.calls)
    final = transcriber.finish()
    assert len(backend.calls) == calls + 1 and final.text == " ".join(SENTENCE)
    # a hop after a preview drops it as well
    transcriber = StreamingTranscriber(ScriptedBackend(utterance))
    transcriber.append(audio)
    transcriber.preview_final()
    transcriber.hop()
    assert transcriber._preview is None


class _MakesUpAnEnding(ScriptedBackend):
    """Like the demo Whisper on a fragment of a request: it ends the words it heard with one it did
    not hear, and which word it makes up depends on how the audio falls on its frames."""

    def transcribe(self, audio, forced=(), prompt=(), guess=()):
        heard = self._hear(np.asarray(audio))
        if len(heard) < len(self.utterance.words):
            heard = heard + [("dog", "cat", "milk")[len(audio) // 160 % 3]]
        self.calls.append({"samples": len(audio), "forced": tuple(forced), "prompt": tuple(prompt)})
        return Hypothesis(tuple(self.text.id(w) for w in heard[len(forced):]))


def test_a_made_up_ending_is_not_heard_steadily_and_the_check_changes_nothing_else():
    utterance = SyntheticUtterance(("walk", "the", "dog", "at", "eight"), pause_after=frozenset({2}))
    audio = utterance.audio()
    fragment_end = utterance.timeline()[2][1] + 3200  # 200 ms into the pause after "dog"
    backend = _MakesUpAnEnding(utterance)
    transcriber = StreamingTranscriber(backend)
    transcriber.append(audio[:fragment_end])
    assert transcriber.preview_steadiness() is None  # nothing previewed yet
    preview = transcriber.preview_final()
    assert preview.text.startswith("walk the dog ")  # plus a word it made up
    calls = len(backend.calls)
    assert transcriber.preview_steadiness() is False  # changed 10 ms and 15 ms later in
    assert [c["samples"] for c in backend.calls[calls:]] == [fragment_end - 160, fragment_end - 240]
    assert transcriber.finish() == preview  # the check decoded nothing into the state
    # the whole request is heard again word for word on the shifted audio
    transcriber = StreamingTranscriber(_MakesUpAnEnding(utterance))
    transcriber.append(audio)
    assert transcriber.preview_final().text == "walk the dog at eight"
    calls = len(transcriber.backend.calls)
    assert transcriber.preview_steadiness() is True
    assert len(transcriber.backend.calls) == calls + 1  # the same at the first recheck: no second
    # off: nothing is decoded
    backend = _MakesUpAnEnding(utterance)
    transcriber = StreamingTranscriber(backend, StreamingConfig(recheck_ms=0))
    transcriber.append(audio[:fragment_end])
    transcriber.preview_final()
    assert transcriber.preview_steadiness() is None and len(backend.calls) == 1
    # one recheck only: no second decode
    backend = _MakesUpAnEnding(utterance)
    transcriber = StreamingTranscriber(backend, StreamingConfig(recheck_again_ms=0))
    transcriber.append(audio[:fragment_end])
    transcriber.preview_final()
    assert transcriber.preview_steadiness() is False and len(backend.calls) == 2
    for bad in ({"recheck_ms": 500}, {"recheck_again_ms": -1}):
        with pytest.raises(InvalidAsrConfig):
            StreamingConfig(**bad)

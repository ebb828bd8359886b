"""Whisper's own P(a sentence ended) after its last word: read from the decode's logits at the
right step, carried from the CTranslate2 decode through the streaming transcriber and the ASR
stage to the paused transcript (tests/test_asr_stage.py), and on real speech higher where a request ends than where a
speaker stops mid-request with the voice running on."""
import numpy as np
import pytest

from foresay.engine.asr.streaming import StreamingConfig, StreamingTranscriber
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.asr.whisper.sentence_end import SentenceEnd

VOCAB = {"ĠCall": 0, "Ġmy": 1, "Ġbrother": 2, ".": 3, "?": 4, ",": 5, "...": 6, "Ġ!": 7, "<|endoftext|>": 8}


def _row(**probs):
    row = np.full(len(VOCAB), -30.0, np.float32)
    for token, p in probs.items():
        row[VOCAB[token]] = np.log(p)
    return row


def test_the_probability_is_read_right_after_the_last_word():
    ends = SentenceEnd(VOCAB)
    assert sorted(ends.end_ids.tolist()) == [3, 4, 7] and ends.mark_ids == {3, 4, 5, 6, 7}  # "..." trails off
    steady = _row(ĠCall=1.0)
    after_word = _row(**{".": 0.3, "?": 0.2, ",": 0.1, "...": 0.1, "<|endoftext|>": 0.3})
    ids = [0, 1, 2, 3]   # "Call my brother." : the "." step is the one after the last word
    logits = [steady, steady, steady, after_word, _row(**{"<|endoftext|>": 1.0})]
    # and ", ; : ..." at the same step: the clause goes on
    assert ends.probabilities(ids, logits) == pytest.approx((0.5, 0.2), abs=1e-6)
    # no mark written: the end-of-text step is the one after the last word
    assert ends.probabilities(ids[:3], logits[:3] + [after_word]) == pytest.approx((0.5, 0.2), abs=1e-6)
    # stopped by the length limit: no end-of-text step, no answer
    assert ends.probabilities(ids, logits[:4]) is None


@pytest.fixture(scope="module")
def readings(registry_model):
    """Requests read in one breath by Piper, each with the sample where its phrase break lies."""
    registry_model("piper-en_US-joe-medium")
    from foresay.engine.demo.assistant_requests import break_index, spoken_text
    from foresay.engine.demo.piper_sets import Reading, load_voice, read_aligned

    voice, reading = load_voice(alignments=True), Reading(1.0, 0.667, 0.8)
    out = []
    for request in ("Remind me to call the dentist | tomorrow at nine.",
                    "Book a table for four | at the Thai place on Friday evening.",
                    "Send a message to Laura | saying I will be ten minutes late.",
                    "Read me my unread emails | from this morning.",
                    "Add milk, eggs and a loaf of bread | to the shopping list.",
                    "Pause the podcast | and remind me where I stopped."):
        samples, boundaries = read_aligned(voice, spoken_text(request), reading)
        out.append((samples, boundaries[break_index(request) - 1]))
    return out


def _heard(samples: np.ndarray, until: int) -> np.ndarray:
    """What a pause decode hears: 0.3 s before the voice, the speech up to `until`, 0.1 s of silence."""
    quiet = np.zeros(SAMPLE_RATE // 10, np.float32)
    return np.concatenate([np.zeros(3 * SAMPLE_RATE // 10, np.float32), samples[:until], quiet])


def test_a_request_that_ended_sounds_more_ended_than_one_stopped_at_its_phrase_break(tiny_en, readings):
    ended = [tiny_en.transcribe(_heard(s, len(s))).p_sentence_end for s, _ in readings]
    stopped = [tiny_en.transcribe(_heard(s, cut)).p_sentence_end for s, cut in readings]
    assert all(p is not None and 0.0 <= p <= 1.0 for p in ended + stopped)
    assert np.mean(ended) > 0.8 and np.mean(ended) - np.mean(stopped) > 0.25, (ended, stopped)


def test_a_request_stopped_at_its_phrase_break_sounds_as_if_it_went_on(tiny_en, readings):
    """Whisper's P(", ; : ...") after the last word: under 0.08 after every whole request (the
    decision's `goes_on_p` is 0.1), higher at the phrase break on average."""
    ended = [tiny_en.transcribe(_heard(s, len(s))).p_goes_on for s, _ in readings]
    stopped = [tiny_en.transcribe(_heard(s, cut)).p_goes_on for s, cut in readings]
    assert all(p is not None and 0.0 <= p <= 1.0 for p in ended + stopped)
    assert max(ended) < 0.08 and np.mean(stopped) > 2 * np.mean(ended), (ended, stopped)


def test_a_forced_prefix_leaves_the_probability_as_it_was(tiny_en, readings):
    audio = _heard(*readings[0][:1], len(readings[0][0]))
    whole = tiny_en.transcribe(audio)
    continued = tiny_en.transcribe(audio, forced=whole.tokens[:3])
    assert continued.tokens == whole.tokens[3:]
    assert continued.p_sentence_end == pytest.approx(whole.p_sentence_end, abs=1e-3)


def test_the_streaming_preview_says_what_its_final_decode_said(tiny_en, readings):
    samples, _ = readings[0]
    transcriber = StreamingTranscriber(tiny_en, StreamingConfig())
    assert transcriber.preview_marks() == (None, None)
    transcriber.append(_heard(samples, len(samples)))
    transcriber.preview_final()
    p = transcriber.preview_marks()[0]
    assert p is not None and p == transcriber._preview.decodes[-1].p_sentence_end
    last = transcriber._preview.decodes[-1]
    assert transcriber.preview_marks() == (last.p_sentence_end, last.p_goes_on) and last.p_goes_on is not None
    transcriber.append(np.zeros(1600, np.float32))  # new audio: the preview is gone
    assert transcriber.preview_marks() == (None, None)

"""With the default streaming settings, the final transcript is as accurate as one decode of the
whole utterance: on held-out demo clips (espeak-ng voices never heard in training, the demo
target Whisper) it is that decode, word for word, even with a conversation before it."""
from dataclasses import replace

import pytest

from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.asr.streaming import StreamingConfig, StreamingTranscriber

HISTORY = "What is the capital of France? The capital of France is Paris."


@pytest.fixture(scope="module")
def demo_target():
    from foresay.engine.asr.backends import GreedyBackend
    from foresay.engine.asr.whisper.models import WhisperModelConfig, load_whisper

    return GreedyBackend(load_whisper(WhisperModelConfig("demo")))


def streamed(backend, clip, config=replace(StreamingConfig(), hop_ms=500)):   # fewer hops: a faster test
    transcriber = StreamingTranscriber(backend, config, history=HISTORY)
    hop = config.hop_ms * SAMPLE_RATE // 1000
    for at in range(0, len(clip), hop):
        transcriber.append(clip[at:at + hop])
        transcriber.hop()
    return transcriber.finish().text


def test_default_streaming_equals_one_decode_of_the_whole_utterance(demo_target):
    from foresay.engine.demo.speech import speech_set

    clips = speech_set("test", 4, seed=0)
    batch = [demo_target.text.decode(demo_target.transcribe(c).tokens).strip() for c in clips.audio]
    assert [streamed(demo_target, c) for c in clips.audio] == batch


def test_the_defaults_are_the_ones_reasoned_about():
    c = StreamingConfig()
    assert c.final_redecode and not c.history_prompt and c.commit_after_s >= 1.0


def test_no_word_is_committed_from_less_than_commit_after_s_of_audio():
    from foresay.engine.asr.scripted import ScriptedBackend, SyntheticUtterance

    utterance = SyntheticUtterance(tuple("had he married her the story would be different".split()))
    transcriber = StreamingTranscriber(ScriptedBackend(utterance), StreamingConfig(commit_after_s=1.0))
    audio, hop = utterance.audio(), SAMPLE_RATE // 4
    for at in range(0, len(audio), hop):
        transcriber.append(audio[at:at + hop])
        partial = transcriber.hop()
        if len(transcriber.audio) < SAMPLE_RATE:
            assert partial.committed == ""
    assert partial.committed   # and commits once there is enough audio


def test_requests_with_short_gaps_past_the_window_are_heard_as_each_alone(demo_target):
    """Continuous speech longer than the model's window: four held-out requests with 0.2 s gaps
    (9 s; the demo Whisper hears 6 s and was trained on one request at a time). Streaming hears
    every word that decoding each request on its own hears, with the demo profile's settings:
    windows are cut at the gaps into pieces of about one request, not where a hypothesis of two
    requests ended (which lost 110 of 315 words in the soak)."""
    import random

    import numpy as np

    from foresay.app.bench.demo import held_out_requests
    from foresay.engine.demo.evaluate_whisper import words
    from foresay.engine.demo.speech import speak

    rng = random.Random(2)
    requests = [speak(r.text, r.voice, rng.getrandbits(32)) for r in held_out_requests(4, seed=2)]
    gap = np.zeros(SAMPLE_RATE // 5, np.float32)
    alone = [w for r in requests for w in words(demo_target.text.decode(demo_target.transcribe(
        np.concatenate([r, gap])).tokens))]
    recording = np.concatenate([gap] + [part for r in requests for part in (r, gap)])
    assert len(recording) > 1.5 * demo_target.window_seconds * SAMPLE_RATE
    from foresay.app.config import PROFILES

    config = replace(StreamingConfig(**PROFILES["demo"]["streaming"]), hop_ms=1000)  # fewer hops: faster
    transcriber = StreamingTranscriber(demo_target, config)
    hop = config.hop_ms * SAMPLE_RATE // 1000
    for at in range(0, len(recording), hop):
        transcriber.append(recording[at:at + hop])
        transcriber.hop()
    assert words(transcriber.finish().text) == alone and transcriber.trims >= 2

"""With the default streaming settings, the final transcript is as accurate as one decode of the
whole utterance: on held-out demo clips (espeak-ng voices never heard in training, the demo
target Whisper) it is that decode, word for word, even with a conversation before it."""
from dataclasses import replace

import pytest

from foresay.engine.asr.models import SAMPLE_RATE
from foresay.engine.asr.streaming import StreamingConfig, StreamingTranscriber

HISTORY = "What is the capital of France? The capital of France is Paris."


@pytest.fixture(scope="module")
def demo_target():
    from foresay.engine.asr.backends import GreedyBackend
    from foresay.engine.asr.models import WhisperModelConfig, load_whisper

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

"""The transformers backends stream identically: SpecASR partials equal greedy partials."""
import pytest

from asr_support import noise_audio
from foresay.engine.asr.backends import DecodeLimits, GreedyBackend, SpecAsrBackend
from foresay.engine.asr.errors import IncompatibleModels, InvalidAsrConfig
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.asr.specasr import SpecConfig
from foresay.engine.asr.streaming import StreamingConfig, StreamingTranscriber
from foresay.engine.asr.vocab import WhisperVocab


def stream(backend, audio):
    transcriber = StreamingTranscriber(backend, StreamingConfig(history_prompt=True, commit_after_s=0.0), turn_id=2,
                                       history="Earlier we spoke about trains.")
    hop = SAMPLE_RATE // 4
    partials = []
    for at in range(0, len(audio), hop):
        transcriber.append(audio[at: at + hop])
        partials.append(transcriber.hop())
    return partials, transcriber.finish(), transcriber.decodes


def test_specasr_streams_exactly_like_greedy_and_recycles_the_previous_tail(whisper_models):
    target, draft = whisper_models("tiny-random"), whisper_models("tiny-random-draft")
    limits = DecodeLimits(max_new_tokens=12)
    audio = noise_audio(8, seconds=1.5)
    greedy = stream(GreedyBackend(target, limits), audio)
    spec = stream(SpecAsrBackend(target, draft, SpecConfig(tree_budget=2), limits), audio)
    assert greedy[0] == spec[0] and greedy[1] == spec[1]
    assert sum(d.stats.target_passes for d in spec[2]) < sum(d.stats.target_passes for d in greedy[2])
    assert any(d.stats.recycled for d in spec[2][1:])  # later hops start from the previous tail


def test_mismatched_vocabularies_are_refused(whisper_models):
    target = whisper_models("tiny-random")
    other = type(target)(**{**target.__dict__, "vocab": WhisperVocab(**{**target.vocab.__dict__, "size": 51865})})
    with pytest.raises(IncompatibleModels, match="do not share a vocabulary"):
        SpecAsrBackend(target, other)
    with pytest.raises(InvalidAsrConfig):
        DecodeLimits(max_new_tokens=0)


def test_config_picks_the_backend(asr_fixture_root):
    from foresay.engine.asr import AsrConfig, FasterWhisperBackend, build_backend

    assert AsrConfig(target="tiny-random").chosen_backend == "faster-whisper"
    assert AsrConfig(target="tiny-random", draft="tiny-random-draft").chosen_backend == "specasr"
    assert AsrConfig(device="cuda").torch_dtype_name() == "float16"
    with pytest.raises(InvalidAsrConfig, match="needs a draft"):
        AsrConfig(backend="specasr")
    with pytest.raises(InvalidAsrConfig, match="backend must be"):
        AsrConfig(backend="whisper.cpp")
    short = DecodeLimits(max_new_tokens=24)
    spec = build_backend(AsrConfig(target="tiny-random", draft="tiny-random-draft", limits=short,
                                   fixture_root=asr_fixture_root))
    greedy = build_backend(AsrConfig(target="tiny-random", backend="greedy", limits=short,
                                     fixture_root=asr_fixture_root))
    fast = build_backend(AsrConfig(target="tiny-random", fixture_root=asr_fixture_root))
    assert isinstance(spec, SpecAsrBackend) and isinstance(greedy, GreedyBackend)
    assert isinstance(fast, FasterWhisperBackend)
    audio = noise_audio(9, seconds=0.5)
    assert spec.transcribe(audio).tokens == greedy.transcribe(audio).tokens


def test_a_cpu_whisper_takes_half_the_cores_and_leaves_the_rest_to_the_stages_beside_it(asr_fixture_root):
    """faster-whisper's own default is 4 threads on any machine: on 2 cores that oversubscribes
    them while Smart Turn and the LLM work at the same pause."""
    from foresay.engine.asr import AsrConfig, build_backend
    from foresay.engine.asr.factory import default_cpu_threads

    assert [default_cpu_threads(n) for n in (1, 2, 3, 4, 8, 64)] == [1, 1, 1, 2, 4, 4]
    with pytest.raises(InvalidAsrConfig, match="threads"):
        AsrConfig(threads=-1)
    auto = build_backend(AsrConfig(target="tiny-random", fixture_root=asr_fixture_root))
    chosen = build_backend(AsrConfig(target="tiny-random", threads=3, fixture_root=asr_fixture_root))
    assert auto.config.cpu_threads == default_cpu_threads() and chosen.config.cpu_threads == 3


def test_a_long_prompt_gives_way_to_the_forced_text(whisper_models):
    from foresay.engine.asr.backends import fitted_prefix

    target = whisper_models("tiny-random")
    prompt, forced = list(range(1000, 1223)), list(range(2000, 2150))
    prefix = fitted_prefix(target, prompt, forced, max_new_tokens=96)
    assert len(prefix) == 448 - 96 and prefix[-150:] == forced
    assert prefix[:200] == [target.vocab.sot_prev, *prompt[-199:]]  # the newest prompt tokens stay
    assert fitted_prefix(target, prompt, list(range(2000, 2400)), 96)[:1] == [target.vocab.sot]  # no room: no prompt
    tokens = GreedyBackend(target, DecodeLimits(8)).transcribe(noise_audio(3), forced=forced, prompt=prompt).tokens
    assert len(tokens) == 8

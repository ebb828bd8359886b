"""The offline Whisper fixtures: real vocabulary, deterministic, loadable by name."""
import pytest
from safetensors.torch import load_file

from foresay.engine.asr.errors import AsrError, InvalidAsrConfig
from foresay.engine.asr.whisper.fixtures import VOCAB_FILE, fixture_folder
from foresay.engine.asr.whisper.models import WhisperModelConfig, load_whisper
from foresay.engine.asr.whisper.tiktoken_vocab import build_english_tokenizer, read_ranks
from foresay.engine.errors import ModelUnavailable


def test_tokenizer_matches_whisper_english_ids():
    tokenizer = build_english_tokenizer(VOCAB_FILE)
    assert tokenizer.get_vocab_size() == 51864  # tiny.en ... medium.en
    # GPT-2 ids every English Whisper uses: " Hello" 18435, " world" 995, "," 11
    assert tokenizer.encode(" Hello world,", add_special_tokens=False).ids == [18435, 995, 11]
    expected = {"<|endoftext|>": 50256, "<|startoftranscript|>": 50257, "<|translate|>": 50357,
                "<|transcribe|>": 50358, "<|startofprev|>": 50360, "<|notimestamps|>": 50362,
                "<|0.00|>": 50363, "<|30.00|>": 51863}
    assert {name: tokenizer.token_to_id(name) for name in expected} == expected
    text = " The quick brown fox can't stop: 3.14 €, ünïcode!"
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    assert tokenizer.decode(ids) == text


def test_bad_vocabulary_file_is_reported(tmp_path):
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("not-a-line\n")
    with pytest.raises(AsrError, match="bad.tiktoken:1"):
        read_ranks(bad)
    with pytest.raises(AsrError, match="cannot read"):
        read_ranks(tmp_path / "missing.tiktoken")


def test_fixtures_are_deterministic_and_the_draft_is_a_perturbed_target(asr_fixture_root, tmp_path):
    again = load_file(fixture_folder("tiny-random", tmp_path) / "model.safetensors")
    first = load_file(fixture_folder("tiny-random", asr_fixture_root) / "model.safetensors")
    assert all((again[k] == first[k]).all() for k in first)
    draft = load_file(fixture_folder("tiny-random-draft", asr_fixture_root) / "model.safetensors")
    changed = sorted(k for k in first if not (draft[k] == first[k]).all())
    assert changed and all(k.startswith("model.decoder.layers.1.fc2.") for k in changed)


def test_fixture_loads_by_name_with_whisper_rules(whisper_models):
    whisper = whisper_models("tiny-random")
    for name in ("tokenizer.json", "preprocessor_config.json", "generation_config.json"):
        assert (whisper.folder / name).exists()
    assert whisper.vocab.decoder_prefix() == [50257, 50362]
    assert whisper.vocab.decoder_prefix(prompt=[1, 2], forced=[3]) == [50360, 1, 2, 50257, 50362, 3]
    assert 220 in whisper.rules.at_begin and 50256 in whisper.rules.at_begin
    assert 50256 not in whisper.rules.always and 50257 in whisper.rules.always
    assert whisper.tokenizer.encode(" (", add_special_tokens=False).ids[0] in whisper.rules.always


def test_loading_errors_are_clear(tmp_path):
    with pytest.raises(AsrError, match="unknown ASR fixture"):
        fixture_folder("tiny-nonsense", tmp_path)
    with pytest.raises(ModelUnavailable, match="not a Whisper model folder"):
        load_whisper(WhisperModelConfig(str(tmp_path / "nowhere")))
    with pytest.raises(ModelUnavailable, match="neither a local folder nor downloadable"):
        load_whisper(WhisperModelConfig("openai/whisper-not-a-model"))
    with pytest.raises(InvalidAsrConfig, match="attention"):
        WhisperModelConfig("tiny-random", attention="flash")
    with pytest.raises(InvalidAsrConfig, match="dtype"):
        WhisperModelConfig("tiny-random", dtype="int3")

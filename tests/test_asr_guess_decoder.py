"""The Whisper decoder on a CTranslate2 model's own weights: the file is read as written, the
decoder is Whisper's (its logits follow the reference network's), and a guess only saves steps:
the tokens are the same whatever the guess."""
import struct

import numpy as np
import pytest
import torch

from asr_support import noise_audio
from foresay.engine.asr.backends import GreedyBackend
from foresay.engine.asr.whisper.ct2_weights import UnreadableWeights, read_ct2_weights
from foresay.engine.asr.whisper.faster import FasterWhisperBackend, FasterWhisperConfig
from foresay.engine.asr.whisper.fixtures import ctranslate2_folder
from foresay.engine.asr.whisper.guess_decoder import WhisperGuessDecoder, load_guess_decoder


@pytest.fixture(scope="module")
def float_folder(asr_fixture_root):
    return ctranslate2_folder("tiny-random", asr_fixture_root, quantization="float32")


@pytest.fixture(scope="module")
def reference(whisper_models):
    return whisper_models()


@pytest.fixture(scope="module")
def decoder(float_folder, reference):
    return WhisperGuessDecoder(float_folder / "model.bin", reference.rules.always, ())


def test_the_model_file_is_read_as_written(float_folder, reference):
    weights = read_ct2_weights(float_folder / "model.bin")
    assert weights.spec == "WhisperSpec"
    embeddings = weights.arrays["decoder/embeddings/weight"]
    expected = reference.model.model.decoder.embed_tokens.weight.detach().numpy()
    assert embeddings.shape == expected.shape and np.allclose(embeddings, expected)
    assert weights.arrays["decoder/projection/weight"] is embeddings  # an alias shares the bytes
    assert weights.scalars["decoder/num_heads"] == reference.model.config.decoder_attention_heads


def test_a_file_it_cannot_read_is_refused_with_the_reason(float_folder, asr_fixture_root, tmp_path):
    quantized = ctranslate2_folder("tiny-random", asr_fixture_root, quantization="int8")
    with pytest.raises(UnreadableWeights, match="quantized at conversion"):
        read_ct2_weights(quantized / "model.bin")
    assert load_guess_decoder(quantized, (), ()) is None
    data = (float_folder / "model.bin").read_bytes()
    (tmp_path / "cut.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(UnreadableWeights, match="truncated"):
        read_ct2_weights(tmp_path / "cut.bin")
    (tmp_path / "empty.bin").write_bytes(b"")
    with pytest.raises(UnreadableWeights, match="empty"):
        read_ct2_weights(tmp_path / "empty.bin")
    (tmp_path / "future.bin").write_bytes(struct.pack("<I", 99) + data[4:])
    with pytest.raises(UnreadableWeights, match="format 99"):
        read_ct2_weights(tmp_path / "future.bin")


def test_the_backend_uses_it_only_where_the_weights_are_float(asr_fixture_root):
    quantized = FasterWhisperBackend(FasterWhisperConfig("tiny-random", fixture_root=asr_fixture_root, cpu_threads=1,
                                                         decoder="guess"))
    assert quantized.guess_decoder is None


def test_its_logits_follow_the_reference_network(decoder, reference):
    """Teacher-forced on the reference's own greedy tokens, from the same encoder output, the int8
    decoder's logits follow the float32 reference's (the real tiny.en against CTranslate2's own
    decoder: tests/test_asr_faster_whisper_windows.py)."""
    agree = total = 0
    for seed in range(3):
        audio = noise_audio(seed)
        prefix = reference.vocab.decoder_prefix()
        sequence = prefix + list(GreedyBackend(reference).transcribe(audio).tokens)[:16]
        with torch.inference_mode():
            encoded = reference.encode(audio)
            hidden = reference.model.model.decoder(input_ids=torch.tensor([sequence]),
                                                   encoder_hidden_states=encoded).last_hidden_state
            logits = reference.model.proj_out(hidden)[0]
        out = decoder.decode(encoded[0].numpy(), prefix, forced=sequence[len(prefix):], max_new_tokens=1,
                             eot=reference.vocab.eot)
        ours = out.logits[: len(sequence) - len(prefix)]
        theirs = logits[len(prefix) - 1: len(sequence) - 1].numpy()
        agree += int((ours.argmax(-1) == theirs.argmax(-1)).sum())
        total += len(ours)
        assert np.corrcoef(ours.ravel(), theirs.ravel())[0, 1] > 0.95  # a wrong layout gives well under 0.5
    # int8 against float32 on random weights of std 1, whose top logits often all but tie
    assert total >= 30 and agree >= 0.5 * total


def test_a_guess_never_changes_the_tokens(decoder, reference):
    eot = reference.vocab.eot
    prefix = reference.vocab.decoder_prefix()
    for seed in range(3):
        with torch.inference_mode():
            encoded = reference.encode(noise_audio(seed))[0].numpy()
        plain = decoder.decode(encoded, prefix, max_new_tokens=20, eot=eot)
        tokens = list(plain.tokens)
        assert len(tokens) >= 4 and plain.accepted == 0 and plain.passes == len(tokens) + 1
        guesses = {"right": tokens, "half": tokens[: len(tokens) // 2], "wrong": [tokens[0] + 1] + tokens[1:],
                   "too long": tokens + tokens, "off at the end": tokens[:-1] + [tokens[-1] + 1]}
        for name, guess in guesses.items():
            out = decoder.decode(encoded, prefix, guess=guess, max_new_tokens=20, eot=eot)
            assert out.tokens == plain.tokens, name
            # a position through a pass or a step: the same operations, bit for bit
            assert out.ended == plain.ended and out.avg_logprob == plain.avg_logprob, name
            assert np.array_equal(out.logits, plain.logits), name
        assert decoder.decode(encoded, prefix, guess=tokens, max_new_tokens=20, eot=eot).accepted == len(tokens)
        # a guess wrong in its first word is still checked after it, in one more pass
        wrong = decoder.decode(encoded, prefix, guess=guesses["wrong"], max_new_tokens=20, eot=eot)
        assert wrong.accepted == len(tokens) - 1 and wrong.passes == 2
        forced = decoder.decode(encoded, prefix, forced=tokens[:3], guess=tokens[3:], max_new_tokens=17, eot=eot)
        assert list(forced.tokens) == tokens[3:]


def test_the_budget_and_the_end_of_text_close_a_decode(decoder, reference):
    eot = reference.vocab.eot
    prefix = reference.vocab.decoder_prefix()
    with torch.inference_mode():
        encoded = reference.encode(noise_audio(0))[0].numpy()
    capped = decoder.decode(encoded, prefix, max_new_tokens=3, eot=eot)
    assert (len(capped.tokens) == 3 and len(capped.logits) == 3) or capped.ended
    with pytest.raises(ValueError, match="no room"):
        decoder.decode(encoded, [prefix[0]] * decoder.max_positions, eot=eot)

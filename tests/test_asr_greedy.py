"""Foresay's reference greedy loop: cache-exact, suppression rules applied, prefix forced."""
import pytest
import torch

from asr_support import noise_audio
from foresay.engine.asr.cursor import DecoderCursor
from foresay.engine.asr.errors import AsrError
from foresay.engine.asr.greedy import greedy_decode


def recompute_greedy(whisper, encoder_out, prefix, steps):
    """Greedy without any cache: the whole sequence through the decoder for every token."""
    sequence = list(prefix)
    for _ in range(steps):
        logits = DecoderCursor(whisper.model, encoder_out).extend(sequence)[-1:]
        first = torch.tensor([len(sequence) == len(prefix)])
        token = int(whisper.rules.apply(logits, first).argmax(-1))
        sequence.append(token)
        if token == whisper.vocab.eot:
            break
    return sequence[len(prefix):]


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_cached_loop_equals_recomputation(whisper_models, attention):
    whisper = whisper_models("tiny-random", attention)
    encoder_out = whisper.encode(noise_audio(1))
    prefix = whisper.vocab.decoder_prefix()
    result = greedy_decode(whisper.model, encoder_out, prefix, whisper.rules, whisper.vocab.eot, 20)
    assert list(result.tokens) == recompute_greedy(whisper, encoder_out, prefix, 20)
    assert len(set(result.tokens)) > 5, "the fixture must not be degenerate"
    assert result.stats.target_passes == 20 and not result.ended


def test_suppressed_tokens_never_appear_and_begin_rules_hold(whisper_models):
    whisper = whisper_models()
    banned = set(whisper.rules.always)
    for seed in range(3):
        encoder_out = whisper.encode(noise_audio(seed))
        logits = DecoderCursor(whisper.model, encoder_out).extend(whisper.vocab.decoder_prefix())[-1:]
        first = whisper.rules.apply(logits, torch.tensor([True]))[0]
        assert torch.isinf(first[list(whisper.rules.at_begin)]).all()
        result = greedy_decode(whisper.model, encoder_out, whisper.vocab.decoder_prefix(), whisper.rules,
                               whisper.vocab.eot, 30)
        assert not banned & set(result.tokens)


def test_suppression_masks_logits_on_their_own_device(whisper_models):
    """A GPU decoder's logits with positions counted on the host: the mask goes where the logits
    are ('meta' stands in for a second device on a machine without one)."""
    rules = whisper_models().rules
    logits = torch.zeros(2, rules.size)
    host = rules.apply(logits, torch.tensor([True, False]))
    moved = rules.apply(logits.to("meta"), torch.tensor([True, False]))
    assert moved.device.type == "meta" and moved.shape == host.shape
    assert torch.isinf(host[0, list(rules.at_begin)]).all() and not torch.isinf(host[1, list(rules.at_begin)]).any()


def test_forced_prefix_and_prompt_are_continued(whisper_models):
    whisper = whisper_models()
    encoder_out = whisper.encode(noise_audio(2))
    plain = greedy_decode(whisper.model, encoder_out, whisper.vocab.decoder_prefix(), whisper.rules,
                          whisper.vocab.eot, 12).tokens
    forced = greedy_decode(whisper.model, encoder_out, whisper.vocab.decoder_prefix(forced=plain[:5]),
                           whisper.rules, whisper.vocab.eot, 7).tokens
    assert forced == plain[5:12]  # forcing the model's own tokens changes nothing
    prompt = whisper.tokenizer.encode(" Earlier we talked about trains.", add_special_tokens=False).ids
    prompted = whisper.vocab.decoder_prefix(prompt=prompt, forced=[18435])
    tail = greedy_decode(whisper.model, encoder_out, prompted, whisper.rules, whisper.vocab.eot, 6).tokens
    assert list(tail) == recompute_greedy(whisper, encoder_out, prompted, 6)


def test_bad_prefixes_are_rejected(whisper_models):
    whisper = whisper_models()
    encoder_out = whisper.encode(noise_audio(3))
    with pytest.raises(AsrError, match="at least the start-of-transcript"):
        greedy_decode(whisper.model, encoder_out, [], whisper.rules, whisper.vocab.eot)
    with pytest.raises(AsrError, match="no room"):
        greedy_decode(whisper.model, encoder_out, [50257] * 448, whisper.rules, whisper.vocab.eot)
    with pytest.raises(AsrError, match="max_new_tokens"):
        greedy_decode(whisper.model, encoder_out, [50257], whisper.rules, whisper.vocab.eot, 0)

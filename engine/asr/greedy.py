"""Foresay's own greedy decoding: the reference every other decoder must equal.

`greedy_loop` runs over any `CacheCursor` (a Whisper decoder or an LLM-based recognizer's
decoder); `greedy_decode` is the Whisper entry point.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from foresay.engine.asr.captured import make_cursor
from foresay.engine.asr.cursor import CacheCursor
from foresay.engine.asr.errors import AsrError
from foresay.engine.asr.vocab import SuppressionRules


@dataclass(frozen=True)
class DecodeStats:
    """What a decode cost; speculative decoders fill in the draft-side fields."""
    target_passes: int = 0
    draft_passes: int = 0
    accepted_per_round: tuple[int, ...] = ()  # draft tokens the target accepted, per round
    draft_lengths: tuple[int, ...] = ()  # chain length drafted, per round
    tree_sizes: tuple[int, ...] = ()  # draft nodes verified (chain + branches), per round
    recycled: int = 0  # draft tokens re-used from an earlier rejected tail
    windows: tuple[float, ...] = ()  # CTranslate2 Whisper: encoder windows decoded (s), in order

    @property
    def rounds(self) -> int:
        return len(self.accepted_per_round)


@dataclass(frozen=True)
class DecodeResult:
    tokens: tuple[int, ...]  # generated after the prefix, without the end-of-text token
    ended: bool  # the model emitted end-of-text (else the length limit stopped it)
    stats: DecodeStats = field(default_factory=DecodeStats)


def token_budget(prefix: Sequence[int], max_new_tokens: int, max_positions: int) -> int:
    if not prefix:
        raise AsrError("a Whisper decoder prefix needs at least the start-of-transcript token")
    if max_new_tokens < 1:
        raise AsrError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    room = max_positions - len(prefix)
    if room < 1:
        raise AsrError(f"the decoder prefix ({len(prefix)} tokens) leaves no room in the model's "
                       f"{max_positions}-token context; shorten the prompt or the forced text")
    return min(max_new_tokens, room)


def pick(logits: torch.Tensor, positions: torch.Tensor, start: int, rules: SuppressionRules) -> torch.Tensor:
    """Suppressed logits for rows whose next token sits at `positions + 1`; generation starts
    at sequence index `start` (the first generated token gets the begin rules)."""
    return rules.apply(logits, first_generated=(positions + 1) == start)


def finish(generated: list[int], eot: int, stats: DecodeStats) -> DecodeResult:
    ended = bool(generated) and generated[-1] == eot
    return DecodeResult(tokens=tuple(generated[:-1] if ended else generated), ended=ended, stats=stats)


def greedy_decode(model, encoder_out: torch.Tensor, prefix: Sequence[int], rules: SuppressionRules,
                  eot: int, max_new_tokens: int = 224) -> DecodeResult:
    """Decode one token per pass after the forced `prefix`, until end-of-text or the budget."""
    return greedy_loop(make_cursor(model, encoder_out), prefix, rules, eot, max_new_tokens)


def greedy_loop(cursor: CacheCursor, prefix: Sequence[int], rules, eot: int,
                max_new_tokens: int = 224) -> DecodeResult:
    """Greedy decoding on `cursor` after `prefix`; `rules.apply` masks the logits (Whisper's
    `SuppressionRules` or an LLM recognizer's rules)."""
    budget = token_budget(prefix, max_new_tokens, cursor.max_positions)
    sequence = list(prefix)
    generated: list[int] = []
    while len(generated) < budget:
        pending = cursor.sync(sequence)
        logits = cursor.extend(pending)[-1:]
        position = torch.tensor([len(sequence) - 1])
        token = int(pick(logits, position, len(prefix), rules).argmax(-1))
        generated.append(token)
        sequence.append(token)
        if token == eot:
            break
    return finish(generated, eot, DecodeStats(target_passes=cursor.passes))

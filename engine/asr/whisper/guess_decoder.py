"""Whisper's decoder in torch on a CTranslate2 model's own weights, checking a guess in one pass.

CTranslate2 decodes one token a step, forced tokens too: on 2 CPU cores tiny.en's pause decode
of a 7 s read sentence spends about as long on its 26 tokens with 20 of them forced as without.
Yet most of them are known: the streaming hops heard the same words a moment before. This
decoder reads the model file's float weights (`ct2_weights`), takes CTranslate2's encoder output,
and runs the prompt, the forced tokens and a guess of the continuation (the last hop's words)
through the decoder in one pass. The guess holds up to the first token the model would not have
chosen there; what it says after that is most often still right (Whisper writes "Had" where a hop
forced "had", or adds a comma), so the rest of it is checked in one more pass after the model's
own token, as a word written otherwise, a mark added or a word dropped, up to `MAX_REGAUGES`
times a decode; then one pass a token. Figures: docs/benchmarks.md, "Whisper's decoder on a guess".

The guess only saves passes: `decode` returns this decoder's greedy tokens, and the same logits
bit for bit, whatever the guess. Every linear map runs in int8 with the same quantization whatever
the rows beside (`_Int8Linear`), and the attention runs one position at a time, so a pass computes
each position with the operations and shapes of a step. Its int8 is CTranslate2's: every weight
and the embeddings on the same per-row grid, activations per row, rounded to nearest (in float32
the two decoders agree to 1e-4 in log-prob). What still differs is float rounding, which at a
quantization boundary moves an activation by one step and, through four layers, a log-prob by as
much as a relative 1e-6 nudge of every linear map's input does: near ties may fall either way.

`decode` is pure: the tokens, the step logits the sentence-end and no-speech rules read, the
average log-prob, and how much of the guess held.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from foresay.engine.asr.whisper.ct2_weights import UnreadableWeights, read_ct2_weights

NEG_INF = float("-inf")
MAX_REGAUGES = 4  # passes over the rest of a guess after it went wrong, at most, a decode


@dataclass(frozen=True)
class GuessDecode:
    """One greedy decode. `tokens`: the new tokens (after the forced ones), without the end of
    text; `logits`: one row per forced and new token, then the step that ended the decode (its
    end of text, or the step after the token budget ran out); `ended`: it chose end of text."""
    tokens: tuple[int, ...]
    logits: np.ndarray
    ended: bool
    p_no_speech: float | None
    avg_logprob: float
    guessed: int  # tokens of the guess offered
    accepted: int  # guessed tokens kept without a pass of their own
    passes: int  # decoder passes: the first, then one a token not guessed


class WhisperGuessDecoder:
    """The decoder of one CTranslate2 Whisper (float16 or float32 weights as converted)."""

    def __init__(self, model_file: Path, suppress: Sequence[int], suppress_begin: Sequence[int]):
        weights = read_ct2_weights(model_file)
        if weights.spec != "WhisperSpec":
            raise UnreadableWeights(f"{model_file}: a {weights.spec}, not a Whisper")
        a, s = weights.arrays, weights.scalars
        if s.get("decoder/pre_norm", 1) != 1 or s.get("decoder/scale_embeddings", 0) != 0:
            raise UnreadableWeights(f"{model_file}: not the decoder layout of OpenAI's Whisper")
        self.heads = s["decoder/num_heads"]
        self.layers = sum(1 for k in a if k.startswith("decoder/layer_") and k.endswith("/ffn/linear_0/weight"))
        def tensor(name: str) -> torch.Tensor:  # float32, one variable at a time (a large model's peak)
            return torch.from_numpy(a[name].astype(np.float32))

        embeddings = tensor("decoder/embeddings/weight")
        self.vocab, self.width = embeddings.shape
        # the output projection is tied to the embeddings: CTranslate2 quantizes the shared variable
        # once and gathers the embeddings from its int8 rows
        rows = _int8_rows(embeddings)
        self._vocab = _Int8Linear(rows)
        self._embeddings = rows.dequantize()
        linear = [k[:-len("/weight")] for k in a if k.startswith("decoder/layer_") and k.endswith("/weight")]
        self._linears = {name: _Int8Linear(_int8_rows(tensor(name + "/weight")),
                                           tensor(name + "/bias") if name + "/bias" in a else None)
                         for name in linear}
        self.t = {k: tensor(k) for k in a if k.startswith("decoder/") and k.endswith(("/gamma", "/beta"))}
        self.positions = tensor("decoder/position_encodings/encodings")
        self.max_positions = self.positions.shape[0]
        self.suppress = torch.tensor(sorted({i for i in suppress if 0 <= i < self.vocab}), dtype=torch.long)
        self.suppress_begin = torch.tensor(sorted({i for i in suppress_begin if 0 <= i < self.vocab}),
                                           dtype=torch.long)

    @torch.inference_mode()
    def decode(self, encoder_out: np.ndarray, prefix: Sequence[int], forced: Sequence[int] = (),
               guess: Sequence[int] = (), max_new_tokens: int = 224, eot: int = 50256,
               first_special: int | None = None, no_speech: int | None = None, sot_index: int = 0,
               suppress_blank: bool = True, marks: Collection[int] = frozenset()) -> GuessDecode:
        """Greedy decode after `prefix` (prompt and start-of-transcript sequence) and `forced`,
        checking `guess` first. `encoder_out`: [frames, width] (or [1, frames, width]). A token
        at or above `first_special` (default `eot`) ends the decode as end of text does.
        `no_speech`: the token whose probability right after the start of transcript (at
        `sot_index` of `prefix`) is P(no speech). `suppress_blank`: no blank or end of text as
        the first token when nothing is forced (Whisper's rule). `marks`: punctuation tokens,
        which the model adds to a guess more often than it replaces a word with them."""
        first_special = eot if first_special is None else first_special
        head = list(prefix) + list(forced)
        budget = min(max_new_tokens, self.max_positions - len(head))
        if not prefix or budget < 1:
            raise ValueError(f"a prefix of {len(head)} tokens leaves no room in {self.max_positions} positions")
        guess = list(guess)[:budget]
        state = _State(self, torch.from_numpy(np.asarray(encoder_out, dtype=np.float32)).reshape(-1, self.width))
        hidden = self._forward(state, head + guess)
        p_no_speech = None
        if no_speech is not None and 0 <= sot_index < len(prefix):
            p_no_speech = float(F.softmax(self._projection(hidden[sot_index:sot_index + 1])[0], -1)[no_speech])
        rows = self._projection(hidden[len(prefix) - 1:])  # predicting each forced token, then the rest
        logits = [rows[:len(forced)]]
        rows = rows[len(forced):]  # rows[i] follows pending[:i]
        pending = guess  # guessed tokens in the cache after the decoded ones
        new: list[int] = []
        logprob, accepted, passes, regauged, i = 0.0, 0, 1, 0, 0
        while True:
            row = self._filtered(rows[i], begin=suppress_blank and not new and not forced)
            logits.append(row[None])
            token = int(row.argmax())
            ended = token >= first_special
            if not ended and len(new) == budget:
                logits.pop()  # the budget is spent: this step's token is not decoded
                break
            logprob += float(F.log_softmax(row, -1)[token])
            if ended:
                break
            new.append(token)
            if i < len(pending) and pending[i] == token:
                accepted += 1  # the pass already holds this token and what follows it
                i += 1
                continue
            # The guess went wrong here (or ran out). What it says next is most often still right:
            # a word written otherwise ("Had" for "had"), a mark added (a comma), or a word dropped.
            if i + 1 < len(pending) and pending[i + 1] == token:
                rest = pending[i + 2:]
            elif token in marks and pending[i:i + 1] and pending[i] not in marks:
                rest = pending[i:]
            else:
                rest = pending[i + 1:]
            rest = rest[:max(0, budget - len(new))] if regauged < MAX_REGAUGES else []
            regauged += bool(rest)
            state.crop(len(head) + len(new) - 1)
            rows = self._projection(self._forward(state, [token] + rest))
            pending, i = rest, 0
            passes += 1
        return GuessDecode(tuple(new), torch.cat(logits).numpy(), ended, p_no_speech,
                           logprob / (len(new) + 1) if ended else logprob / max(1, len(new)),
                           len(guess), accepted, passes)

    def _filtered(self, row: torch.Tensor, begin: bool) -> torch.Tensor:
        row = row.clone()
        row[self.suppress] = NEG_INF
        if begin:
            row[self.suppress_begin] = NEG_INF
        return row

    def _forward(self, state: "_State", tokens: list[int]) -> torch.Tensor:
        """The final hidden state at each of `tokens`, appended after what `state` holds."""
        n, start = len(tokens), state.length
        if start + n > self.max_positions:
            raise ValueError(f"{start + n} positions exceed the decoder's {self.max_positions}")
        t, d, h = self.t, self.width, self.heads

        def linear(x, name):
            return self._linears[name](x)

        x = self._embeddings[tokens].float() + self.positions[start:start + n]
        scale = (d // h) ** -0.5
        for i in range(self.layers):
            p = f"decoder/layer_{i}"
            q, k, v = linear(_norm(x, t, f"{p}/self_attention/layer_norm"), f"{p}/self_attention/linear_0").split(d, -1)
            k, v = state.append(i, _heads(k, h), _heads(v, h))
            q = _heads(q, h)
            # Attention one position at a time, each over the keys it sees, so that a pass computes
            # each position with the very operations and shapes a step does.
            attended = torch.cat([F.scaled_dot_product_attention(q[:, r:r + 1], k[:, :start + r + 1].contiguous(),
                                                                 v[:, :start + r + 1].contiguous())
                                  for r in range(n)], 1)
            x = x + linear(_merge(attended), f"{p}/self_attention/linear_1")
            q = _heads(linear(_norm(x, t, f"{p}/attention/layer_norm"), f"{p}/attention/linear_0"), h)
            keys_t, values = state.cross(i)
            attended = torch.cat([torch.softmax(torch.bmm(q[:, r:r + 1], keys_t) * scale, -1) @ values
                                  for r in range(n)], 1)
            x = x + linear(_merge(attended), f"{p}/attention/linear_2")
            x = x + linear(F.gelu(linear(_norm(x, t, f"{p}/ffn/layer_norm"), f"{p}/ffn/linear_0")), f"{p}/ffn/linear_1")
        state.length += n
        return _norm(x, t, "decoder/layer_norm")

    def _projection(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._vocab(hidden)  # tied to the token embeddings


class _State:
    """One decode's self-attention cache and the cross-attention keys and values of its audio."""

    def __init__(self, decoder: WhisperGuessDecoder, encoder_out: torch.Tensor):
        self.decoder, self.encoder_out = decoder, encoder_out
        self._cross: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * decoder.layers
        self.keys: list[torch.Tensor | None] = [None] * decoder.layers
        self.values: list[torch.Tensor | None] = [None] * decoder.layers
        self.length = 0

    def cross(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The audio's keys (transposed: [heads, width, frames]) and values for `layer`."""
        if self._cross[layer] is None:
            d, h = self.decoder.width, self.decoder.heads
            k, v = self.decoder._linears[f"decoder/layer_{layer}/attention/linear_1"](self.encoder_out).split(d, -1)
            self._cross[layer] = (_heads(k, h).transpose(1, 2).contiguous(), _heads(v, h).contiguous())
        return self._cross[layer]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.keys[layer] is not None:
            k, v = torch.cat([self.keys[layer], k], 1), torch.cat([self.values[layer], v], 1)
        self.keys[layer], self.values[layer] = k, v
        return k, v

    def crop(self, length: int) -> None:
        self.keys = [k[:, :length] for k in self.keys]
        self.values = [v[:, :length] for v in self.values]
        self.length = length


class _Int8Linear:
    """A linear map in int8 whose output for a row does not depend on the rows beside it.

    torch's packed int8 kernel (weights per output row) quantizes its whole input with one scale
    and zero point, from the input's minimum and maximum. Each row is divided by its own largest
    magnitude, and a row holding -255/254 and +255/254 goes first: every call then quantizes with
    the same parameters, each row on a grid of 1/127 of its largest magnitude (CTranslate2's own
    int8 grid), and the sums are integers (exact in any order)."""

    def __init__(self, rows: torch.Tensor, bias: torch.Tensor | None = None):
        """`rows`: the weight quantized row by row (`_int8_rows`)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's quantized tensors warn of their future
            self._packed = torch.ops.quantized.linear_prepack(rows, None)
        self.bias = bias
        self._anchor = torch.zeros(1, rows.shape[1])
        self._anchor[0, :2] = torch.tensor([-255 / 254, 255 / 254])

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        magnitudes = x.abs().amax(1, keepdim=True).clamp_min(1e-12)
        y = torch.ops.quantized.linear_dynamic(torch.cat([self._anchor, x / magnitudes]), self._packed)[1:]
        y = y * magnitudes
        return y if self.bias is None else y + self.bias


def _int8_rows(weight: torch.Tensor) -> torch.Tensor:
    """`weight` quantized to int8 row by row, each on a grid of 1/127 of its largest magnitude."""
    scales = weight.abs().amax(1).clamp_min(1e-12) / 127.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's quantized tensors warn of their future
        return torch.quantize_per_channel(weight, scales.double(), torch.zeros(len(scales), dtype=torch.long),
                                          0, torch.qint8)


def _norm(x, t, name):
    return F.layer_norm(x, (x.shape[-1],), t[name + "/gamma"], t[name + "/beta"])


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    return x.view(x.shape[0], heads, -1).transpose(0, 1)


def _merge(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(0, 1).reshape(x.shape[1], -1)


def load_guess_decoder(folder: Path, suppress: Sequence[int], suppress_begin: Sequence[int]) -> WhisperGuessDecoder | None:
    """The guess decoder of a CTranslate2 Whisper folder, or None where its weights are not
    float (quantized at conversion) or not a Whisper's: such a model decodes through
    CTranslate2 alone."""
    try:
        return WhisperGuessDecoder(Path(folder) / "model.bin", suppress, suppress_begin)
    except (UnreadableWeights, KeyError, OSError):
        return None

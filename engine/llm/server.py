"""PredGen over an OpenAI-compatible completions server (vLLM, SGLang, llama.cpp).

`ServerLM` has the text surface of `ChatLM` (a local tokenizer and chat template: the served
model's) and makes a `ServerKVCache`, which implements `engine.llm.cache.KVCache`: `append`
sends the cached tokens plus the new ones to `/v1/completions` with `echo` and `logprobs`, and
returns rows of log-probabilities (the top-k the server returned, -inf elsewhere). Greedy
verification needs only each row's argmax, top-k verification the returned k, P(end of turn) the
end-of-message token's entry. The server's prefix cache keeps the history resident, so `crop`
only moves a length. Each request also asks for a short greedy continuation (`prefetch`): the
decode steps that follow are answered from it without another round trip.
"""
from __future__ import annotations

import logging
import math
import os
import time

import torch

from foresay.engine.errors import ForesayError
from foresay.engine.llm.cache import ForwardStats, PrefixReuse
from foresay.engine.llm.chat_text import ChatText
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.sources import load_tokenizer, resolve_model_source
from foresay.engine.llm.server_http import CompletionsClient, ServerError

log = logging.getLogger(__name__)

__all__ = ["ServerLM", "ServerKVCache", "ServerError", "connect_server_llm"]


class TokenIndex:
    """Token strings as the server writes them (top-logprob keys) back to token ids."""

    def __init__(self, lm: "ServerLM"):
        self.tokenizer = lm.tokenizer
        self.by_text: dict[str, list[int]] | None = None  # built on first use (a pass over the vocabulary)
        self.eos = lm.eos_ids
        self._warned = False

    def ids(self, key: str) -> list[int]:
        if key.startswith("token_id:"):  # vLLM's return_tokens_as_token_ids
            return [int(key[9:])]
        if self.by_text is None:
            self.by_text = {}
            for i in range(len(self.tokenizer)):
                self.by_text.setdefault(self.tokenizer.decode([i], skip_special_tokens=True), []).append(i)
        found = self.by_text.get(key, [])
        if len(found) > 1:  # an empty string stands for special tokens: the end of the reply first
            found = sorted(found, key=lambda i: (i not in self.eos, i))
            if not self._warned:
                self._warned = True
                log.info("the server names tokens by text; %d tokens share the text %r", len(found), key)
        return found[:1]


class ServerLM(ChatText):
    """A model served by an OpenAI-compatible server, with the served model's local tokenizer."""

    def __init__(self, client: CompletionsClient, tokenizer, name: str, max_context: int,
                 top_logprobs: int = 5, prefetch: int = 8, eos_sources=()):
        super().__init__(tokenizer, name, eos_sources)
        self.client = client
        self.max_context = max_context
        # llama-cpp-python names alternatives by text and keeps one of those sharing a text:
        # only the top one is then safe
        self.top_logprobs = 1 if client.server == "llama-cpp-python" else top_logprobs
        self.prefetch = prefetch
        self.stats = ForwardStats()
        self.round_trips: list[tuple[int, float]] = []  # (new tokens sent, seconds) per request
        self.device = client.base_url
        self.dtype = None
        self.vocab_size = len(tokenizer)
        self.index = TokenIndex(self)

    @property
    def description(self) -> str:
        return (f"{self.name} (served by {self.client.server} at {self.client.base_url}, "
                f"context {self.max_context} tokens)")

    def kv_cache(self) -> "ServerKVCache":
        return ServerKVCache(self)

    def token_text(self, ids: list[int]) -> str:
        """The prompt text of `ids`, special tokens written out (servers that take text)."""
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def warmup(self) -> None:
        cache = self.kv_cache()
        cache.append(self.encode("Hello, how are you today?") or [0], keep_logits=1)


class ServerKVCache(PrefixReuse):
    """The tokens the server holds for this conversation (its prefix cache), and rows of
    log-probabilities fetched ahead: `rows[p]` is the distribution after position p."""

    def __init__(self, lm: ServerLM):
        self.lm = lm
        self.tokens: list[int] = []
        self._ahead: dict[int, dict[int, float]] = {}  # position -> {token id: logprob}
        self._ahead_tokens: list[int] = []              # the greedy continuation those rows follow

    def crop(self, length: int) -> None:
        if length > len(self.tokens):
            raise ValueError(f"cannot crop a cache of {len(self.tokens)} tokens to {length}")
        del self.tokens[length:]

    def append(self, ids: list[int], keep_logits: int | None = None) -> torch.Tensor:
        if not ids:
            raise ValueError("append needs at least one token")
        keep = len(ids) if keep_logits is None else keep_logits
        start = len(self.tokens)
        wanted = range(start + len(ids) - keep, start + len(ids))
        if not self._known(ids, wanted):
            self._request(self.tokens + list(ids), start)
        self.tokens.extend(ids)
        return self._rows(wanted)

    def _known(self, ids: list[int], wanted: range) -> bool:
        """Whether rows fetched ahead cover `wanted` and were fetched after these very tokens."""
        end = len(self.tokens) + len(ids)
        if end > len(self._ahead_tokens) or any(p not in self._ahead for p in wanted):
            return False
        return self._ahead_tokens[:end] == self.tokens + list(ids)

    def _rows(self, positions: range) -> torch.Tensor:
        """Log-probability rows: the returned entries exact, the probability left over spread
        evenly over the other tokens (each then weighs no more than the least returned one, so
        argmax and top-k within the returned k are unchanged, and a softmax of the row gives the
        returned tokens their own probability)."""
        vocab = self.lm.vocab_size
        rows = torch.empty((len(positions), vocab))
        for r, p in enumerate(positions):
            entry = self._ahead[p]
            rest = 1.0 - sum(math.exp(v) for v in entry.values())
            others = vocab - len(entry)
            rows[r].fill_(math.log(rest / others) if rest > 1e-9 and others > 0 else -math.inf)
            if entry:
                rows[r, list(entry)] = torch.tensor(list(entry.values()))
        return rows

    def _request(self, ids: list[int], start: int) -> None:
        """One round trip: rows after every position from `start - 1` on, and a greedy
        continuation of `prefetch` tokens with their rows."""
        lm = self.lm
        began = time.perf_counter()
        answer = lm.client.complete(ids, lm.token_text(ids), lm.top_logprobs, max(1, lm.prefetch))
        took = time.perf_counter() - began
        lm.stats.passes += 1
        lm.stats.tokens += len(ids) - start
        lm.stats.seconds += took
        lm.round_trips.append((len(ids) - start, took))
        entries, echoed = answer.entries, answer.tokens
        n = len(ids)
        if answer.shifted:  # entry i is the distribution after token i (llama-cpp-python)
            after = {p: entries[p] for p in range(len(entries)) if entries[p] is not None}
        else:  # entry i is the distribution at token i, i.e. after token i - 1 (OpenAI's layout)
            after = {p - 1: entries[p] for p in range(1, len(entries)) if entries[p] is not None}
        if len(echoed) < n or (answer.check_text and not _same_tokens(lm, ids[start:], echoed[start:n])):
            raise ServerError("the server split the prompt into other tokens than the local tokenizer "
                              f"({len(echoed)} echoed for {n}): llm.tokenizer must be the served model's")
        rows: dict[int, dict[int, float]] = {}
        for p, entry in after.items():
            row: dict[int, float] = {}
            for key, logprob in entry.items():
                for token in lm.index.ids(key):
                    if token < lm.vocab_size:  # a padded vocabulary's ids have no text: never chosen
                        row.setdefault(token, logprob)
            rows[p] = row
        if not answer.shifted:  # the echoed token's own logprob is exact whatever its text
            for p in range(max(1, start), n):
                if answer.token_logprobs[p] is not None and p - 1 in rows:
                    rows[p - 1][ids[p]] = answer.token_logprobs[p]
        missing = [p for p in range(max(start, 1), n) if p not in rows]
        if missing:
            raise ServerError(f"the server returned no log-probabilities after positions {missing[:5]}")
        rows.setdefault(0, {})  # no server gives the distribution after the very first token
        continuation = list(ids)
        p = n - 1
        while p in rows and p + 1 in rows:  # extend by the greedy tokens whose rows came back
            continuation.append(max(rows[p], key=rows[p].get))
            p += 1
        self._ahead, self._ahead_tokens = rows, continuation


def _same_tokens(lm: ServerLM, ids: list[int], echoed: list[str]) -> bool:
    return all(lm.tokenizer.decode([i], skip_special_tokens=True) == text
               for i, text in zip(ids, echoed) if text)


def connect_server_llm(config: LLMConfig) -> ServerLM:
    """Connect to the server named by `config`; its tokenizer comes from `config.tokenizer`
    (default: the served model's name as a hub id, folder, .gguf file or built-in name)."""
    key = None
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise ForesayError(f"llm.api_key_env names {config.api_key_env}, which is not set")
    client = CompletionsClient(config.base_url, config.model, key, config.timeout_s)
    info = client.model_info()
    source, gguf_file = resolve_model_source(config, config.tokenizer or config.model)
    tokenizer = load_tokenizer(config, source, gguf_file, config.tokenizer or config.model)
    eos_sources = []
    try:
        from transformers import AutoConfig
        eos_sources.append(AutoConfig.from_pretrained(source, **({"gguf_file": gguf_file} if gguf_file else {})))
    except (OSError, ValueError):
        pass
    trained = getattr(eos_sources[0], "max_position_embeddings", None) if eos_sources else None
    limit = info.get("max_model_len") or config.max_context or trained or 4096
    lm = ServerLM(client, tokenizer, config.model, min(config.max_context or limit, limit), eos_sources=eos_sources)
    log.info("connected to %s", lm.description)
    return lm

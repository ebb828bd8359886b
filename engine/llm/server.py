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
import struct
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from foresay.engine.errors import ForesayError
from foresay.engine.llm.cache import ForwardStats, PrefixReuse
from foresay.engine.llm.chat_text import ChatText
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.gguf_meta import read_gguf_fields
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
                self.by_text.setdefault(piece(self.tokenizer, i), []).append(i)
        found = self.by_text.get(key.replace(_REPLACED, ""), [])
        if len(found) > 1:  # an empty string stands for special tokens: the end of the reply first
            found = sorted(found, key=lambda i: (i not in self.eos, i))
            if not self._warned:
                self._warned = True
                log.info("the server names tokens by text; %d tokens share the text %r", len(found), key)
        return found[:1]


_REPLACED = "\ufffd"  # what a piece of a multi-byte character decodes to alone


def piece(tokenizer, token: int) -> str:
    """A token's text as servers write it: special tokens empty, the bytes of a character split
    over several tokens left out (llama.cpp decodes each token's bytes ignoring errors)."""
    return tokenizer.decode([token], skip_special_tokens=True).replace(_REPLACED, "")


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
        self.bos_id = tokenizer.bos_token_id
        # a server given text adds the beginning-of-sequence token itself when the model's
        # tokenizer does (llama.cpp, vLLM): the prompt text then leaves the template's out
        # (checked against the count the server reports)
        self.server_adds_bos = bool(getattr(tokenizer, "add_bos_token", False))

    @property
    def description(self) -> str:
        return (f"{self.name} (served by {self.client.server} at {self.client.base_url}, "
                f"context {self.max_context} tokens)")

    def kv_cache(self) -> "ServerKVCache":
        return ServerKVCache(self)

    def token_text(self, ids: list[int]) -> str:
        """The prompt text of `ids`, special tokens written out (servers that take text)."""
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def leads_with_bos(self, ids: list[int]) -> bool:
        return bool(ids) and self.bos_id is not None and ids[0] == self.bos_id

    def prompt_text(self, ids: list[int]) -> str:
        """The text to send for `ids`: without a leading beginning-of-sequence token where the
        server adds one itself (else the model would read two)."""
        skip = 1 if self.server_adds_bos and self.leads_with_bos(ids) else 0
        return self.token_text(ids[skip:])

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

    def _complete(self, ids: list[int]):
        """The server's answer for `ids`; learns on the first text prompt whether the server adds
        the beginning-of-sequence token itself (from the count of prompt tokens it reports)."""
        lm = self.lm
        ask = lambda: lm.client.complete(ids, lm.prompt_text(ids), lm.top_logprobs, max(1, lm.prefetch))
        answer = ask()
        counted = answer.prompt_tokens
        if answer.check_text and counted is not None and lm.leads_with_bos(ids) and counted != len(ids):
            sent_bos = not lm.server_adds_bos
            if counted == len(ids) + (1 if sent_bos else -1):  # one BOS too many or too few
                lm.server_adds_bos = sent_bos
                log.info("the server %s the beginning-of-sequence token to text prompts itself",
                         "adds" if sent_bos else "does not add")
                answer = ask()
        return answer

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
        answer = self._complete(ids)
        took = time.perf_counter() - began
        lm.stats.passes += 1
        lm.stats.tokens += len(ids) - start
        lm.stats.seconds += took
        lm.round_trips.append((len(ids) - start, took))
        entries = answer.entries
        n = len(ids)
        if answer.shifted:  # entry i is the distribution after token i (llama-cpp-python)
            after = {p: entries[p] for p in range(len(entries)) if entries[p] is not None}
        else:  # entry i is the distribution at token i, i.e. after token i - 1 (OpenAI's layout)
            after = {p - 1: entries[p] for p in range(1, len(entries)) if entries[p] is not None}
        if answer.check_text:
            check_echo(lm, ids, start, answer)
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


def check_echo(lm: ServerLM, ids: list[int], start: int, answer) -> None:
    """The tokens the server echoes for a text prompt are `ids` (from `start` on, the earlier
    ones were checked before), else a ServerError names the first that differs."""
    skip = 1 if answer.shifted and lm.leads_with_bos(ids) else 0  # llama-cpp-python echoes no BOS
    echoed, n = answer.tokens, len(ids)
    counted = answer.prompt_tokens
    if counted is not None and counted != n:
        where = f"it read {counted} tokens where the local tokenizer has {n}"
    elif len(echoed) < n - skip:
        where = f"it echoed {len(echoed)} tokens for {n}"
    else:
        where = None
    for p in range(max(start, skip), n):
        text = echoed[p - skip] if p - skip < len(echoed) else None
        if text is None or not _same_piece(lm.tokenizer, ids[p], text):
            shown = "nothing" if text is None else repr(text)
            where = (f"{where + '; ' if where else ''}at position {p} the local tokenizer has token "
                     f"{ids[p]} {lm.tokenizer.decode([ids[p]])!r} where the server has {shown}")
            break
    if where:
        raise ServerError("the server split the prompt into other tokens than the local tokenizer "
                          f"({where}): llm.tokenizer must be the served model's")


def _same_piece(tokenizer, token: int, text: str) -> bool:
    if piece(tokenizer, token) == text.replace(_REPLACED, ""):
        return True  # a special token may be written out or left empty
    return token in tokenizer.all_special_ids and text in ("", tokenizer.convert_ids_to_tokens(token))


def connect_server_llm(config: LLMConfig) -> ServerLM:
    """Connect to the server named by `config`; its tokenizer comes from `config.tokenizer`
    (default: the served model's name as a hub id, folder, .gguf file or built-in name)."""
    key = None
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise ForesayError(f"llm.api_key_env names {config.api_key_env}, which is not set")
    client = CompletionsClient(config.base_url, config.model, key, config.timeout_s)
    info = client.model_info()  # client.model becomes the server's name for the model
    spec = config.tokenizer or (client.model if Path(client.model).expanduser().exists() else config.model)
    source, gguf_file = resolve_model_source(config, spec)
    tokenizer = load_tokenizer(config, source, gguf_file, spec)
    eos_sources, trained, adds_bos = _model_facts(source, gguf_file)
    limit = info.get("max_model_len") or config.max_context or trained or 4096
    lm = ServerLM(client, tokenizer, client.model, min(config.max_context or limit, limit), eos_sources=eos_sources)
    if adds_bos is not None:  # what llama.cpp does with the GGUF it serves
        lm.server_adds_bos = adds_bos
    log.info("connected to %s", lm.description)
    return lm


def _model_facts(source: str, gguf_file: str | None) -> tuple[list, int | None, bool | None]:
    """(objects with the model's end-of-sequence ids, its trained context length, whether its
    tokenizer adds a BOS token if known) from its config; a GGUF file's few fields are read
    directly (transformers would parse it all)."""
    if gguf_file:
        path = Path(source) / gguf_file
        try:
            arch = read_gguf_fields(path, {"general.architecture"}).get("general.architecture")
            fields = read_gguf_fields(path, {f"{arch}.context_length", "tokenizer.ggml.eos_token_id",
                                             "tokenizer.ggml.add_bos_token"})
        except (OSError, ValueError, struct.error) as exc:
            log.warning("could not read %s's metadata: %s", path, exc)
            return [], None, None
        eos = SimpleNamespace(eos_token_id=fields.get("tokenizer.ggml.eos_token_id"))
        return [eos], fields.get(f"{arch}.context_length"), fields.get("tokenizer.ggml.add_bos_token")
    try:
        from transformers import AutoConfig
        config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError):
        return [], None, None
    return [config], getattr(config, "max_position_embeddings", None), None

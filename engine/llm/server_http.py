"""A small client for OpenAI-compatible `/v1/completions` (standard library HTTP, kept-alive
connections, one per thread), and the error every failure of the server becomes."""
from __future__ import annotations

import http.client
import json
import logging
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from foresay.engine.errors import ForesayError

log = logging.getLogger(__name__)


class ServerError(ForesayError):
    """The LLM server failed: unreachable, dropped the connection, answered an error status, was
    slower than the timeout, or answered something unusable. The caller may fall back to a
    reply that does not speculate; nothing the user said is lost."""


@dataclass(frozen=True)
class Answer:
    """Echoed prompt plus continuation: per token its text, its log-probability and the top
    alternatives ({token text or id: logprob}; None where the server gave none)."""
    tokens: list[str]
    token_logprobs: list[float | None]
    entries: list[dict | None]
    shifted: bool      # entry i is the distribution after token i, not at it, and the echo
    #                    leaves out the beginning-of-sequence token (llama-cpp-python)
    check_text: bool   # the prompt went as text: the echoed tokens must be the local ones
    prompt_tokens: int | None = None  # how many tokens the server read the prompt as (its usage)


class CompletionsClient:
    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float):
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ForesayError(f"llm.base_url {base_url!r} is not an http(s) URL")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self._parts = parts
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._local = threading.local()
        self.server = "an OpenAI-compatible server"
        self.shifted = False
        self.send_ids = True

    def __repr__(self) -> str:  # never shows the key
        return f"CompletionsClient({self.base_url!r}, model={self.model!r})"

    # --- transport ------------------------------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
            conn = cls(self._parts.hostname, self._parts.port, timeout=self.timeout_s)
            self._local.conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        url = f"{self.base_url}{path}"
        payload = json.dumps(body).encode() if body is not None else None
        for attempt in (0, 1):
            reused = getattr(self._local, "conn", None) is not None
            conn = self._connection()
            try:
                conn.request(method, self._parts.path + path, body=payload, headers=self._headers)
                response = conn.getresponse()
                data = response.read()
            except TimeoutError:
                self._drop_connection()
                raise ServerError(f"the LLM server at {url} did not answer within {self.timeout_s:g} s") from None
            except (http.client.HTTPException, OSError) as exc:
                self._drop_connection()
                if reused and attempt == 0 and isinstance(exc, (http.client.RemoteDisconnected,
                                                                 ConnectionResetError, BrokenPipeError)):
                    continue  # a kept-alive connection the server had closed: once more, fresh
                raise ServerError(f"the LLM server at {url} cannot be reached or dropped the "
                                  f"connection ({type(exc).__name__}: {exc})") from None
            if response.status >= 400:
                self._drop_connection()
                raise ServerError(f"the LLM server at {url} answered {response.status} "
                                  f"{response.reason}: {data[:300].decode('utf-8', 'replace')}")
            try:
                return json.loads(data)
            except ValueError:
                raise ServerError(f"the LLM server at {url} answered something that is not JSON: "
                                  f"{data[:120]!r}") from None
        raise AssertionError("unreachable")

    # --- the API ------------------------------------------------------------------------------------

    def model_info(self) -> dict:
        """The served model's entry in /models; recognizes the server (its logprob layout) and
        takes the server's name for the model (see `served_entry`)."""
        models = [m for m in self.call("GET", "/models").get("data") or [] if isinstance(m, dict)]
        entry = served_entry(models, self.model, self.base_url)
        if entry["id"] != self.model:
            log.info("llm.model %r: the server at %s names it %r", self.model, self.base_url, entry["id"])
            self.model = str(entry["id"])
        owner = entry.get("owned_by")
        if owner == "me":  # llama-cpp-python: text prompts, logprobs one position ahead
            self.server, self.shifted, self.send_ids = "llama-cpp-python", True, False
        elif owner:
            self.server = str(owner)
        return entry

    def complete(self, ids: list[int], text: str, top_logprobs: int, max_tokens: int) -> Answer:
        body = {"model": self.model, "prompt": ids if self.send_ids else text, "max_tokens": max_tokens,
                "temperature": 0.0, "echo": True, "logprobs": top_logprobs, "stream": False}
        if self.send_ids:
            body["return_tokens_as_token_ids"] = True  # vLLM: exact ids instead of token texts
        try:
            answer = self.call("POST", "/completions", body)
        except ServerError as exc:
            if not self.send_ids or " 4" not in str(exc)[:200]:
                raise
            self.send_ids = False  # a server that takes text prompts only
            body["prompt"] = text
            answer = self.call("POST", "/completions", body)
        try:
            logprobs = answer["choices"][0]["logprobs"]
            tokens, values, entries = logprobs["tokens"], logprobs["token_logprobs"], logprobs["top_logprobs"]
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"the LLM server at {self.base_url} returned no log-probabilities "
                              "(does it support echo with logprobs? llama-cpp-python needs "
                              "--logits_all true)") from None
        usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
        counted = usage.get("prompt_tokens")
        return Answer(tokens, values, entries, self.shifted, not self.send_ids,
                      counted if isinstance(counted, int) else None)

    def greedy_text(self, text: str, max_tokens: int) -> str:
        """The server's own greedy continuation of `text` (the reference for losslessness)."""
        answer = self.call("POST", "/completions", {"model": self.model, "prompt": text,
                                                     "max_tokens": max_tokens, "temperature": 0.0})
        return answer["choices"][0]["text"]


def _loose(name: str) -> str:
    """A model name compared loosely: without folders, a .gguf ending or case."""
    name = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lower()
    return name[:-5] if name.endswith(".gguf") else name


def served_entry(models: list[dict], name: str, base_url: str) -> dict:
    """The entry of /models that `name` means: the one named exactly so, else the one whose name
    matches loosely (a file name without its folder, case or .gguf ending: llama.cpp names a
    model by its file path), else the only one served; a clear error lists what is served."""
    names = [str(m.get("id")) for m in models]
    for match in (lambda m: str(m.get("id")) == name, lambda m: _loose(str(m.get("id"))) == _loose(name)):
        found = [m for m in models if match(m)]
        if len(found) == 1:
            return found[0]
    if len(models) == 1:
        log.warning("the server at %s serves one model, %r; using it for llm.model %r",
                    base_url, names[0], name)
        return models[0]
    raise ForesayError(f"the server at {base_url} does not serve {name!r} "
                       f"(it serves: {', '.join(names) or 'nothing'}); set llm.model to one of those")

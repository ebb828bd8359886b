"""A conversation whose KV cache persists across turns.

The system prompt and history are tokenized once and kept as token ids (the assistant's replies
as the ids the model generated), so every new prompt extends the cached tokens and only the new
turn is computed. The context holds at most as many earlier turns as the model handles (its
declared `max_history_turns`; a small model trained on short dialogues answers nonsense after
longer ones) and never more tokens than its context: the oldest turns leave the context (the saved
history file keeps them).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from importlib import resources

from foresay.engine.errors import EmptyPrompt, PromptTooLong
from foresay.engine.llm.model import ChatLM

log = logging.getLogger(__name__)


def default_system_prompt() -> str:
    """The system prompt telling the model its input may be cut off and not to complain."""
    return resources.files("foresay.assets").joinpath("prompts/system.txt").read_text("utf-8").strip()


@dataclass(frozen=True)
class Prompt:
    """A prompt's token ids; `end_of_message` indexes the token that closes the user's message
    (its probability right before it is P(end of user turn)); None if the template hides it."""
    text: str        # the rendered prompt
    user_text: str   # the user's message as it entered the prompt
    ids: tuple[int, ...]
    end_of_message: int | None


@dataclass(frozen=True)
class _Rendered:
    text: str
    ids: list[int]


class Conversation:
    def __init__(self, lm: ChatLM, system_prompt: str | None = None, reserve_tokens: int = 512,
                 max_history_turns: int | None = None):
        """`reserve_tokens`: room kept free for the reply when fitting history into the context;
        `max_history_turns`: earlier turns kept in the context (None: what the model declares)."""
        self.lm = lm
        self.max_history_turns = (getattr(lm, "max_history_turns", None) if max_history_turns is None
                                  else max_history_turns)
        self.system_prompt = default_system_prompt() if system_prompt is None else system_prompt
        self.reserve_tokens = reserve_tokens
        self.messages: list[dict] = []
        self.cache = lm.kv_cache()
        self.dropped_turns = 0
        self._history = self._render_history()

    # --- prompts ----------------------------------------------------------------------------

    def _system(self) -> list[dict]:
        return [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []

    def _render_history(self) -> _Rendered:
        if not self.messages and not self.system_prompt:
            return _Rendered("", [])
        text = self.lm.render(self._system() + self.messages, add_generation_prompt=False)
        return _Rendered(text, self.lm.encode(text))

    def prompt(self, user_text: str) -> Prompt:
        """The prompt for a (partial or final) user message after the current history."""
        text = " ".join(user_text.split())
        if not text:
            raise EmptyPrompt("the user's message is empty")
        while True:
            prompt = self._build(text)
            if len(prompt.ids) + self.reserve_tokens <= self.lm.max_context:
                return prompt
            if not self.messages:
                raise PromptTooLong(
                    f"the message takes {len(prompt.ids)} tokens; with {self.reserve_tokens} kept for "
                    f"the reply it does not fit the model's context of {self.lm.max_context}")
            self._drop_oldest_turn()

    def _build(self, text: str) -> Prompt:
        messages = self._system() + self.messages + [{"role": "user", "content": text}]
        full = self.lm.render(messages, add_generation_prompt=True)
        head = self._history
        if not full.startswith(head.text):  # a template that rewrites earlier turns
            head = _Rendered("", [])
        tail = full[len(head.text):]
        at = tail.rfind(text)
        if at < 0:
            return Prompt(full, text, tuple(head.ids + self.lm.encode(tail)), None)
        before = head.ids + self.lm.encode(tail[:at + len(text)])
        after = self.lm.encode(tail[at + len(text):])
        return Prompt(full, text, tuple(before + after), len(before) if after else None)

    def _turns(self) -> int:
        return sum(m["role"] == "user" for m in self.messages)

    def _keep_turn_limit(self) -> None:
        limit = self.max_history_turns
        while limit is not None and self.messages and self._turns() > limit:
            self._drop_oldest_turn(reason=f"the model handles {limit} earlier turn(s)")

    # --- history ----------------------------------------------------------------------------

    def commit_turn(self, prompt: Prompt, reply_ids: list[int]) -> str:
        """Add the turn to the history; `reply_ids` is the reply as far as the user heard it.

        The generated ids are kept as they are, so the cache built while generating stays valid.
        Returns the reply text that entered the history.
        """
        reply_ids = [i for i in reply_ids if i not in self.lm.eos_ids]
        reply_text = self.lm.decode(reply_ids)
        self.messages += [{"role": "user", "content": prompt.user_text},
                          {"role": "assistant", "content": reply_text}]
        full = self.lm.render(self._system() + self.messages, add_generation_prompt=False)
        if full.startswith(prompt.text + reply_text):
            rest = full[len(prompt.text) + len(reply_text):]
            self._history = _Rendered(full, list(prompt.ids) + reply_ids + self.lm.encode(rest))
        else:
            self._history = _Rendered(full, self.lm.encode(full))
        self._keep_turn_limit()
        return reply_text

    def _drop_oldest_turn(self, reason: str = "context full") -> None:
        cut = next((i for i, m in enumerate(self.messages[1:], 1) if m["role"] == "user"),
                   len(self.messages))
        self.messages = self.messages[cut:]
        self.dropped_turns += 1
        log.log(logging.WARNING if reason == "context full" else logging.INFO,
                "%s: the oldest turn left the model's context (%d so far)", reason, self.dropped_turns)
        self._history = self._render_history()

    def prefill_history(self) -> None:
        """Compute the cache of system prompt and history ahead of the user's turn."""
        ids = self._history.ids
        if ids and self.cache.tokens[:len(ids)] != ids:
            self.cache.sync(ids)

    @property
    def history_ids(self) -> list[int]:
        return list(self._history.ids)

    def load(self, turns: list[tuple[str, str]]) -> None:
        """Start from a saved history of (user, assistant) texts, e.g. after a restart."""
        self.messages = [m for user, reply in turns
                         for m in ({"role": "user", "content": user}, {"role": "assistant", "content": reply})]
        limit = self.max_history_turns
        if limit is not None:
            self.messages = self.messages[-2 * limit:] if limit else []
        self._history = self._render_history()
        while self.messages and len(self._history.ids) + self.reserve_tokens > self.lm.max_context:
            self._drop_oldest_turn()

    def reset(self) -> None:
        """A new conversation: history gone, the system prompt's cache kept."""
        self.messages = []
        self.dropped_turns = 0
        self._history = self._render_history()

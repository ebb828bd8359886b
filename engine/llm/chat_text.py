"""The text side of a chat model: tokenizer, chat template, end-of-reply tokens."""
from __future__ import annotations

from foresay.engine.llm.chat_format import end_of_message_id, has_system_role, merge_system


class ChatText:
    """The text side of a chat model: its tokenizer, chat template and end-of-reply tokens.

    `eos_sources`: objects with an `eos_token_id` (the model's config and generation config)."""

    def __init__(self, tokenizer, name: str, eos_sources=()):
        self.tokenizer = tokenizer
        self.name = name
        self.system_role = has_system_role(tokenizer)  # False: the system prompt joins the first user message
        self.eos_ids = self._eos_ids(eos_sources)

    def _eos_ids(self, sources) -> frozenset[int]:
        ids = set()
        for source in sources:
            value = getattr(source, "eos_token_id", None)
            if value is not None:
                ids.update(value if isinstance(value, (list, tuple)) else [value])
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        for special in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>"):
            token_id = self.tokenizer.convert_tokens_to_ids(special)
            if isinstance(token_id, int) and token_id != self.tokenizer.unk_token_id and token_id >= 0:
                ids.add(token_id)
        closing = end_of_message_id(self.tokenizer, self.render)
        if closing is not None:  # a supplied template's own end of message
            ids.add(closing)
        return frozenset(ids)

    def render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        if not self.system_role:
            messages = merge_system(messages)
            if not messages:
                return ""
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids) -> str:
        return self.tokenizer.decode([i for i in ids if i not in self.eos_ids],
                                     skip_special_tokens=True)

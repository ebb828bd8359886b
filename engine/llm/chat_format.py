"""Chat templates: a supplied one for models without, and models whose template has no system role.

Gemma's templates, for instance, refuse a system message (or drop it); Foresay's system prompt then
goes into the first user message, as Gemma's own newer templates do.
"""
from __future__ import annotations

from pathlib import Path

from foresay.engine.errors import ForesayError

_SYSTEM_PROBE = "foresay-system-probe"
_USER_PROBE = "foresay-user-probe"
_REPLY_PROBE = "foresay-reply-probe"


def read_chat_template(spec: str) -> str:
    """`spec` is a Jinja template or a file holding one."""
    if "{{" in spec or "{%" in spec:
        return spec
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ForesayError(f"chat template {spec!r} is neither a file nor a Jinja template "
                           "(it has no '{{' or '{%')")
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ForesayError(f"cannot read the chat template file {path}: {exc}") from None
    if "{{" not in text and "{%" not in text:
        raise ForesayError(f"{path} does not look like a Jinja chat template")
    return text


def _render(tokenizer, messages, add_generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False,
                                         add_generation_prompt=add_generation_prompt)


def check_template(tokenizer, name: str) -> None:
    """The template renders a user turn and an assistant turn, or a clear error says why not."""
    try:
        text = _render(tokenizer, [{"role": "user", "content": _USER_PROBE},
                                   {"role": "assistant", "content": _REPLY_PROBE}], False)
    except Exception as exc:  # Jinja errors of every kind: the template is the user's
        raise ForesayError(f"the chat template of {name} fails to render a conversation: {exc}") from None
    if _USER_PROBE not in text or _REPLY_PROBE not in text:
        raise ForesayError(f"the chat template of {name} does not show the messages' content "
                           "(a template needs message['content'] for user and assistant turns)")


def has_system_role(tokenizer) -> bool:
    """Whether the template renders a system message's content (it may raise or drop it)."""
    try:
        text = _render(tokenizer, [{"role": "system", "content": _SYSTEM_PROBE},
                                   {"role": "user", "content": _USER_PROBE}], True)
    except Exception:  # "System role not supported" and the like
        return False
    return _SYSTEM_PROBE in text


def merge_system(messages: list[dict]) -> list[dict]:
    """The system message's content put in front of the first user message (dropped if none)."""
    if not messages or messages[0]["role"] != "system":
        return messages
    system, rest = messages[0]["content"], messages[1:]
    for i, message in enumerate(rest):
        if message["role"] == "user":
            merged = {**message, "content": f"{system}\n\n{message['content']}"}
            return rest[:i] + [merged] + rest[i + 1:]
    return rest


def end_of_message_id(tokenizer, render) -> int | None:
    """The special token the template writes right after an assistant message, if any: where a
    reply ends, even for a base model whose own end-of-sequence token is something else."""
    text = render([{"role": "user", "content": _USER_PROBE},
                   {"role": "assistant", "content": _REPLY_PROBE}], False)
    after = text[text.rfind(_REPLY_PROBE) + len(_REPLY_PROBE):]
    ids = tokenizer.encode(after, add_special_tokens=False) if after else []
    special = set(getattr(tokenizer, "all_special_ids", ())) | set(
        getattr(tokenizer, "added_tokens_decoder", {}) or {})
    return ids[0] if ids and ids[0] in special else None

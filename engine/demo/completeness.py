"""Is a (possibly cut) text a whole request of the demo domain?

A request cut off at a word boundary is sometimes a whole request of its own ("set a timer for 5
minutes for cooking" cut to "set a timer for 5 minutes", or a politeness word dropped). Training
the end of a user message needs to know which: such a cut is complete (the message may end
there), any other cut is not. A text is complete when, with its filler prefix and politeness
suffix taken off, it matches one of the domain's phrasings with one of that slot's values.
"""
from __future__ import annotations

import re
from functools import lru_cache

from foresay.engine.demo.dialogues import PREFIXES, SUFFIXES
from foresay.engine.demo.intents import _OP_WORD, FOLLOW_UPS, INTENTS
from foresay.engine.sequences import words

_SLOT = re.compile(r"\{(\w+)\}")


def normalize(text: str) -> str:
    """Lower case, words only (apostrophes kept), single spaces."""
    return " ".join(words(text))


def _template_pattern(template: str, values: list[dict], extra: dict[str, set[str]]) -> str:
    choices: dict[str, set[str]] = {k: set(v) for k, v in extra.items()}
    for slots in values:
        for name, value in slots.items():
            choices.setdefault(name, set()).add(normalize(str(value)))
    parts, last = [], 0
    norm = template.lower()
    for m in _SLOT.finditer(norm):
        parts.append(re.escape(normalize(norm[last:m.start()])))
        options = sorted(choices.get(m.group(1), ()), key=len, reverse=True)
        parts.append("(?:" + "|".join(re.escape(o) for o in options) + ")")
        last = m.end()
    parts.append(re.escape(normalize(norm[last:])))
    return r"\s*".join(p for p in parts if p)


@lru_cache(maxsize=1)
def _matcher() -> re.Pattern:
    patterns = []
    for intent in INTENTS:
        values = intent.values()
        patterns += [_template_pattern(t, values, {}) for t in intent.templates]
    ops = {"op": {normalize(w) for w in _OP_WORD.values()}}
    for follow in FOLLOW_UPS:
        values = follow.values()
        patterns += [_template_pattern(t, values, ops) for t in follow.templates]
    prefixes = sorted({normalize(p) for p in PREFIXES if p.strip()}, key=len, reverse=True)
    suffixes = sorted({normalize(s) for s in SUFFIXES if s.strip()}, key=len, reverse=True)
    return re.compile("(?:(?:" + "|".join(map(re.escape, prefixes)) + r") )?(?:" + "|".join(patterns) +
                      ")(?: (?:" + "|".join(map(re.escape, suffixes)) + "))?")


def is_complete_request(text: str) -> bool:
    """True when `text` (any case and punctuation) is a whole request of the demo domain."""
    return _matcher().fullmatch(normalize(text)) is not None

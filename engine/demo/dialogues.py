"""Seeded dialogues of the demo domain, in train / val / test splits that never share a request.

Every request (phrasing, fillers and slots together) belongs to one split by a hash of its text,
so a test request combines parts seen in training into a whole never seen there ("phrasing");
for compositional intents, whose replies are built from the slots, whole slot combinations are
held out as well ("slots"). Validation holds out others the same way. Fillers and politeness
words are drawn for every request, so the same request comes in several forms.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from foresay.engine.demo.intents import FOLLOW_UPS, INTENTS, Intent, format_slots, reply_for
from foresay.engine.errors import ForesayError

SPLITS = ("train", "val", "test")
PREFIXES = ("", "", "", "", "um, ", "uh, ", "so ", "hey Foresay, ", "okay so ", "hmm, ", "um, so ")
SUFFIXES = ("", "", "", "", " please", " thanks")


@dataclass(frozen=True)
class DomainConfig:
    """How dialogues are drawn.

    seed: everything follows from it (same seed, same dialogues).
    max_turns: longest dialogue, in user turns (at least 1).
    follow_up_prob: chance that a later turn refers to the previous one (else a fresh request).
    filler_prob: chance that a request gets a filler prefix or a politeness suffix.
    """
    seed: int = 0
    max_turns: int = 3
    follow_up_prob: float = 0.6
    filler_prob: float = 0.5

    def __post_init__(self):
        if self.max_turns < 1:
            raise ForesayError("demo domain: max_turns must be at least 1")
        for name in ("follow_up_prob", "filler_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ForesayError(f"demo domain: {name} must lie in [0, 1]")


@dataclass(frozen=True)
class DialogueTurn:
    user: str
    reply: str
    intent: str     # the intent or follow-up that produced the request
    held_out: str   # "", "phrasing" or "slots": what about it no training request has


@dataclass(frozen=True)
class Dialogue:
    turns: tuple[DialogueTurn, ...]

    def to_json(self) -> dict:
        return {"turns": [t.user for t in self.turns], "replies": [t.reply for t in self.turns],
                "detail": [asdict(t) for t in self.turns]}


def _bucket(key: str) -> str:
    """A stable split for a key: about one in ten to test, one in ten to validation."""
    bucket = int(hashlib.sha256(key.encode()).hexdigest(), 16) % 10
    return {0: "test", 1: "val"}.get(bucket, "train")


def slot_split(intent: str, slots: dict) -> str:
    """The split a slot combination of a compositional intent belongs to."""
    return _bucket(json.dumps([intent, sorted((k, str(v)) for k, v in slots.items())]))


def request_split(text: str) -> str:
    """The split a whole request belongs to: its phrasing, fillers and slots together, so a test
    request is a combination of parts seen in training that training never saw as a whole."""
    return _bucket(" ".join(text.lower().split()))


def intent_weight(n_values: int) -> float:
    """How often an intent is drawn: intents with many facts to learn come up more often."""
    return 1.0 + min(n_values, 144) ** 0.5 / 3


class DialogueGenerator:
    """Draws dialogues of one split; `dialogues(n)` is deterministic for a config and split."""

    def __init__(self, config: DomainConfig, split: str):
        if split not in SPLITS:
            raise ForesayError(f"demo domain: split {split!r} is not one of {', '.join(SPLITS)}")
        self.config = config
        self.split = split
        self.rng = random.Random(f"{config.seed}:{split}")
        self._values = {i.name: i.values() for i in INTENTS}
        self._values.update({f.name: f.values() for f in FOLLOW_UPS})
        self._weights = [intent_weight(len(self._values[i.name])) for i in INTENTS]

    def dialogues(self, n: int) -> list[Dialogue]:
        return [self.dialogue() for _ in range(n)]

    def dialogue(self) -> Dialogue:
        turns: list[DialogueTurn] = []
        prev: tuple[str, dict] | None = None
        for _ in range(self.rng.randint(1, self.config.max_turns)):
            turn, state = None, None
            if prev is not None and self.rng.random() < self.config.follow_up_prob:
                turn, state = self._follow_up(*prev)
            if turn is None:
                turn, state = self._fresh()
            turns.append(turn)
            prev = state
        return Dialogue(tuple(turns))

    # --- drawing ----------------------------------------------------------------------------

    def _fresh(self) -> tuple[DialogueTurn, tuple[str, dict]]:
        while True:
            intent = self.rng.choices(INTENTS, self._weights)[0]
            drawn = self._draw(intent)
            if drawn is not None:
                text, slots, held_out = drawn
                return self._turn(text, intent.name, slots, held_out), (intent.name, slots)

    def _draw(self, intent: Intent):
        """(request, slots, held-out kind) of this split for `intent`, or None to draw again."""
        values = self._values[intent.name]
        if intent.compositional and self.split != "train" and self.rng.random() < 0.15:
            held = [v for v in values if slot_split(intent.name, v) == self.split]
            slots = self.rng.choice(held)
            return self._decorate(format_slots(self.rng.choice(intent.templates), intent.name, slots)), slots, "slots"
        if intent.compositional:
            values = [v for v in values if slot_split(intent.name, v) == "train"]
        slots = self.rng.choice(values)
        text = self._decorate(format_slots(self.rng.choice(intent.templates), intent.name, slots))
        if request_split(text) != self.split:
            return None
        return text, slots, "" if self.split == "train" else "phrasing"

    def _follow_up(self, prev_intent: str, prev_slots: dict):
        candidates = [f for f in FOLLOW_UPS if prev_intent in f.after]
        for _ in range(60 if candidates else 0):
            follow = self.rng.choice(candidates)
            value = self.rng.choice(self._values[follow.name])
            derived = follow.derive(prev_intent, prev_slots, value)
            if derived is None:
                continue
            text = self._decorate(format_slots(self.rng.choice(follow.templates), prev_intent, value))
            if request_split(text) != self.split:
                continue
            intent, slots = derived
            kind = "" if self.split == "train" else "phrasing"
            return self._turn(text, follow.name, slots, kind, reply_intent=intent), (intent, slots)
        return None, None

    def _decorate(self, text: str) -> str:
        """Spoken-style noise: a filler before, a politeness word after (sometimes)."""
        if self.rng.random() < self.config.filler_prob:
            text = self.rng.choice(PREFIXES) + text
            suffix = self.rng.choice(SUFFIXES)
            if suffix and text[-1] in ".?":
                text = text[:-1] + suffix + text[-1]
        return text[:1].upper() + text[1:]

    def _turn(self, text: str, name: str, slots: dict, held_out: str, reply_intent: str | None = None) -> DialogueTurn:
        return DialogueTurn(text, reply_for(reply_intent or name, slots), name, held_out)


def truncate_request(text: str, rng: random.Random, max_dropped: int = 3) -> str:
    """A request cut off as a streaming transcript would be: its last 1..max_dropped words gone
    (at least one word kept), without the final punctuation."""
    words = text.rstrip(".?!").split()
    if len(words) < 2:
        return words[0] if words else text
    dropped = rng.randint(1, min(max_dropped, len(words) - 1))
    return " ".join(words[:-dropped])


def write_jsonl(dialogues: list[Dialogue], path: str | Path) -> None:
    """Dialogues as JSONL with `turns` (what `foresay bench predgen --prompts` reads) and `replies`."""
    with open(path, "w", encoding="utf-8") as out:
        for dialogue in dialogues:
            out.write(json.dumps(dialogue.to_json()) + "\n")


"""The demo domain's intents: phrasings with slots, the slot values, and the one right reply.

Compositional intents (their reply is built from the slots, so a new combination can be answered
without having seen it) hold out whole slot combinations from training; see `dialogues`.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

from foresay.engine.demo import facts

Slots = dict[str, object]


@dataclass(frozen=True)
class Intent:
    """name: unique id; templates: `str.format` phrasings over the slots (ending in ? or .);
    values: every slot combination; reply: the right answer to a combination;
    compositional: held-out slot combinations are answerable (they go to val/test)."""
    name: str
    templates: tuple[str, ...]
    values: Callable[[], list[Slots]]
    reply: Callable[[Slots], str]
    compositional: bool = False


@dataclass(frozen=True)
class FollowUp:
    """A turn that needs the previous one: `derive(prev_intent, prev_slots, value)` gives the
    slots of the answer (or None where it does not apply), `value` ranges over `values()`."""
    name: str
    after: tuple[str, ...]   # intents it may follow
    templates: tuple[str, ...]
    values: Callable[[], list[Slots]]
    derive: Callable[[str, Slots, Slots], tuple[str, Slots] | None]


def _one(name: str, items) -> Callable[[], list[Slots]]:
    return lambda: [{name: v} for v in items]


def _product(**pools) -> Callable[[], list[Slots]]:
    names = list(pools)
    return lambda: [dict(zip(names, combo)) for combo in itertools.product(*pools.values())]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _your(task: str) -> str:
    return " ".join({"my": "your", "me": "you"}.get(w, w) for w in task.split())


def _spelled(word: str) -> str:
    return f"{_cap(word)} is spelled {', '.join(word.upper())}."


def _country_reply(kind: str, country: str) -> str:
    capital, language, currency, continent = facts.COUNTRIES[country]
    return {
        "capital": f"The capital of {country} is {capital}.",
        "language": f"People in {country} mainly speak {language}.",
        "currency": f"{country} uses {currency}.",
        "continent": f"{country} is in {continent}.",
    }[kind]


def _shift(seq, item, step: int):
    return seq[(seq.index(item) + step) % len(seq)]


_COUNTRIES = _one("country", facts.COUNTRIES)
_N = range(1, 60)

INTENTS: tuple[Intent, ...] = (
    Intent("capital", ("what is the capital of {country}?", "what's the capital city of {country}?",
                       "tell me the capital of {country}.", "do you know the capital of {country}?",
                       "which city is the capital of {country}?"),
           _COUNTRIES, lambda s: _country_reply("capital", s["country"])),
    Intent("language", ("what language do they speak in {country}?", "what do people speak in {country}?",
                        "which language is spoken in {country}?", "what's the main language of {country}?"),
           _COUNTRIES, lambda s: _country_reply("language", s["country"])),
    Intent("currency", ("what currency does {country} use?", "what money do they use in {country}?",
                        "what is the currency of {country}?", "which currency do I need in {country}?"),
           _COUNTRIES, lambda s: _country_reply("currency", s["country"])),
    Intent("continent", ("which continent is {country} in?", "where is {country}?",
                         "on what continent is {country}?", "what continent is {country} on?"),
           _COUNTRIES, lambda s: _country_reply("continent", s["country"])),
    Intent("capital_of", ("which country has {capital} as its capital?", "{capital} is the capital of which country?",
                          "where is {capital} the capital?", "what country is {capital} the capital of?"),
           lambda: [{"capital": c[0], "country": k} for k, c in facts.COUNTRIES.items()],
           lambda s: f"{s['capital']} is the capital of {s['country']}."),
    Intent("day_after", ("what day comes after {day}?", "which day is after {day}?",
                         "what's the day after {day}?", "what day follows {day}?"),
           _one("day", facts.DAYS), lambda s: f"The day after {s['day']} is {_shift(facts.DAYS, s['day'], 1)}."),
    Intent("day_before", ("what day comes before {day}?", "which day is before {day}?",
                          "what's the day before {day}?", "what day is just before {day}?"),
           _one("day", facts.DAYS), lambda s: f"The day before {s['day']} is {_shift(facts.DAYS, s['day'], -1)}."),
    Intent("month_after", ("what month comes after {month}?", "which month is after {month}?",
                           "what's the month after {month}?", "what month follows {month}?"),
           _one("month", facts.MONTHS),
           lambda s: f"The month after {s['month']} is {_shift(facts.MONTHS, s['month'], 1)}."),
    Intent("month_days", ("how many days are in {month}?", "how many days does {month} have?",
                          "how long is {month} in days?", "how many days has {month} got?"),
           _one("month", facts.MONTHS),
           lambda s: (f"{s['month']} has {facts.MONTH_DAYS[s['month']]} days."
                      + (" In a leap year it has 29." if s["month"] == "February" else ""))),
    Intent("timer", ("set a timer for {n} {unit}.", "start a timer for {n} {unit}.",
                     "could you set a {n} {unit} timer?", "timer for {n} {unit} please.",
                     "can you time {n} {unit} for me?"),
           _product(n=_N, unit=facts.TIME_UNITS),
           lambda s: f"Okay, a timer for {s['n']} {s['unit']} starts now.", compositional=True),
    Intent("timer_label", ("set a timer for {n} {unit} for {label}.", "start a {n} {unit} timer for {label}.",
                           "could you time {label} for {n} {unit}?", "I need a {n} {unit} timer for {label}."),
           _product(n=range(1, 31), unit=facts.TIME_UNITS[1:], label=facts.TIMER_LABELS),
           lambda s: f"Okay, a timer for {_your(s['label'])}, {s['n']} {s['unit']}, starts now.", compositional=True),
    Intent("alarm", ("wake me up at {time}.", "set an alarm for {time}.", "I need an alarm at {time}.",
                     "could you set an alarm for {time}?", "please wake me at {time}."),
           _one("time", facts.CLOCK_TIMES), lambda s: f"Your alarm is set for {s['time']}.", compositional=True),
    Intent("reminder", ("remind me to {task} at {time}.", "at {time} remind me to {task}.",
                        "can you remind me to {task} at {time}?", "don't let me forget to {task} at {time}.",
                        "please remind me at {time} to {task}."),
           _product(task=facts.TASKS, time=facts.CLOCK_TIMES),
           lambda s: f"Okay, I will remind you to {_your(s['task'])} at {s['time']}.", compositional=True),
    Intent("add", ("what is {a} plus {b}?", "what's {a} plus {b}?", "how much is {a} plus {b}?",
                   "can you add {a} and {b}?", "add {a} and {b} for me."),
           _product(a=range(1, 11), b=range(1, 11)), lambda s: f"{s['a']} plus {s['b']} is {s['a'] + s['b']}."),
    Intent("subtract", ("what is {a} minus {b}?", "what's {a} minus {b}?", "how much is {a} minus {b}?",
                        "take {b} away from {a}."),
           lambda: [{"a": a, "b": b} for a in range(2, 13) for b in range(1, a)],
           lambda s: f"{s['a']} minus {s['b']} is {s['a'] - s['b']}."),
    Intent("multiply", ("what is {a} times {b}?", "what's {a} times {b}?", "how much is {a} times {b}?",
                        "multiply {a} by {b}."),
           _product(a=range(2, 10), b=range(2, 10)), lambda s: f"{s['a']} times {s['b']} is {s['a'] * s['b']}."),
    Intent("convert", ("how many {target} are in {v} {unit}?", "convert {v} {unit} to {target}.",
                       "what is {v} {unit} in {target}?", "{v} {unit} is how many {target}?",
                       "how many {target} is {v} {unit}?"),
           lambda: [{"v": v, "unit": u, "target": t, "factor": f}
                    for u, (t, f) in facts.DECIMAL_CONVERSIONS.items() for v in range(1, 21)],
           lambda s: f"{s['v']} {s['unit']} is {s['v'] * s['factor']} {s['target']}.", compositional=True),
    Intent("convert_time", ("how many {target} are in {v} {unit}?", "convert {v} {unit} to {target}.",
                            "what is {v} {unit} in {target}?", "{v} {unit} is how many {target}?"),
           lambda: [{"v": v, "unit": u, "target": t, "factor": f}
                    for u, (t, f) in facts.TABLE_CONVERSIONS.items() for v in range(2, 11)],
           lambda s: f"{s['v']} {s['unit']} is {s['v'] * s['factor']} {s['target']}."),
    Intent("spell", ("how do you spell {word}?", "spell {word} for me.", "can you spell the word {word}?",
                     "how is {word} spelled?"),
           _one("word", facts.SPELL_WORDS), lambda s: _spelled(s["word"])),
    Intent("opposite", ("what is the opposite of {word}?", "what's the opposite of {word}?",
                        "tell me the opposite of {word}.", "what word means the opposite of {word}?"),
           _one("word", facts.OPPOSITES), lambda s: f"The opposite of {s['word']} is {facts.OPPOSITES[s['word']]}."),
    Intent("animal", ("what sound does a {animal} make?", "what does a {animal} say?",
                      "how does a {animal} sound?", "what noise does a {animal} make?"),
           _one("animal", facts.ANIMAL_SOUNDS), lambda s: f"A {s['animal']} says {facts.ANIMAL_SOUNDS[s['animal']]}."),
    Intent("color", ("what color is {thing}?", "what colour is {thing}?", "which color is {thing}?",
                     "tell me the color of {thing}."),
           _one("thing", facts.COLORS), lambda s: f"{_cap(s['thing'])} is {facts.COLORS[s['thing']]}."),
    Intent("greeting", ("hello.", "hi there.", "good morning.", "hey Foresay.", "hi."),
           lambda: [{}], lambda s: "Hello! How can I help you today?"),
    Intent("how_are_you", ("how are you?", "how are you doing today?", "how's it going?", "are you doing well?"),
           lambda: [{}], lambda s: "I am doing well, thank you. What can I do for you?"),
    Intent("thanks", ("thank you.", "thanks a lot.", "that's great, thanks.", "thanks, that helps."),
           lambda: [{}], lambda s: "You are welcome!"),
    Intent("identity", ("who are you?", "what's your name?", "what are you?", "tell me about yourself."),
           lambda: [{}], lambda s: "I am Foresay, a voice assistant that answers while you speak."),
    Intent("abilities", ("what can you do?", "how can you help me?", "what are you able to do?",
                         "what kind of things can you do?"),
           lambda: [{}], lambda s: ("I can answer questions about countries, set timers and reminders, "
                                    "do simple math, convert units and spell words.")),
    Intent("goodbye", ("goodbye.", "bye for now.", "see you later.", "that's all, bye."),
           lambda: [{}], lambda s: "Goodbye! Talk to you soon."),
    Intent("joke", ("tell me a joke.", "do you know a joke?", "say something funny.", "make me laugh."),
           lambda: [{}], lambda s: "Why did the timer go to school? It wanted to be a little more on time."),
)

INTENT_BY_NAME = {i.name: i for i in INTENTS}
_COUNTRY_KINDS = ("capital", "language", "currency", "continent")


def _same_kind_new_country(prev_intent, prev, value):
    if value["country"] == prev["country"]:
        return None
    return prev_intent, {"country": value["country"]}


def _other_kind_same_country(kind):
    def derive(prev_intent, prev, value):
        return None if prev_intent == kind else (kind, {"country": prev["country"]})
    return derive


def _next_again(prev_intent, prev, value):
    key = "day" if "day" in prev else "month"
    table = facts.DAYS if key == "day" else facts.MONTHS
    step = -1 if prev_intent == "day_before" else 1
    return prev_intent, {key: _shift(table, prev[key], step)}


def _new_operands(prev_intent, prev, value):
    operands = {"a": value["a"], "b": value["b"]}
    if operands == {"a": prev["a"], "b": prev["b"]} or operands not in INTENT_BY_NAME[prev_intent].values():
        return None
    return prev_intent, operands


_OP_WORD = {"add": "plus", "subtract": "minus", "multiply": "times"}


def _same_intent_new(slot):
    def derive(prev_intent, prev, value):
        return None if value[slot] == prev[slot] else (prev_intent, {**prev, slot: value[slot]})
    return derive


FOLLOW_UPS: tuple[FollowUp, ...] = (
    FollowUp("country_again", _COUNTRY_KINDS, ("and {country}?", "what about {country}?", "how about {country}?",
                                               "and for {country}?"),
             _COUNTRIES, _same_kind_new_country),
    FollowUp("ask_capital", _COUNTRY_KINDS, ("and what's its capital?", "what's the capital there?",
                                             "and the capital?"), lambda: [{}], _other_kind_same_country("capital")),
    FollowUp("ask_language", _COUNTRY_KINDS, ("what language do they speak there?", "and the language?",
                                              "what do people speak there?"), lambda: [{}],
             _other_kind_same_country("language")),
    FollowUp("ask_currency", _COUNTRY_KINDS, ("what money do they use there?", "and the currency?",
                                              "which currency do they use there?"), lambda: [{}],
             _other_kind_same_country("currency")),
    FollowUp("next_again", ("day_after", "day_before", "month_after"),
             ("and the one after that?", "and then?", "and the next one?"), lambda: [{}], _next_again),
    FollowUp("operands_again", ("add", "subtract", "multiply"), ("and {a} {op} {b}?", "what about {a} {op} {b}?",
                                                               "how about {a} {op} {b}?"),
             _product(a=range(1, 11), b=range(1, 11)), _new_operands),
    FollowUp("spell_again", ("spell",), ("and {word}?", "now spell {word}.", "what about {word}?"),
             _one("word", facts.SPELL_WORDS), _same_intent_new("word")),
    FollowUp("animal_again", ("animal",), ("and a {animal}?", "what about a {animal}?", "how about a {animal}?"),
             _one("animal", facts.ANIMAL_SOUNDS), _same_intent_new("animal")),
    FollowUp("timer_change", ("timer",), ("actually make it {n} {unit}.", "change it to {n} {unit}.",
                                          "no, {n} {unit} instead.", "make that {n} {unit}."),
             _product(n=_N, unit=facts.TIME_UNITS), lambda pi, p, v: (
                 None if v == {"n": p["n"], "unit": p["unit"]} else ("timer_changed", v))),
    FollowUp("alarm_cancel", ("alarm",), ("cancel it.", "actually cancel that alarm.", "never mind, cancel it."),
             lambda: [{}], lambda pi, p, v: ("alarm_cancelled", {"time": p["time"]})),
)

# Replies of follow-ups that are not intents of their own.
FOLLOW_UP_REPLIES: dict[str, Callable[[Slots], str]] = {
    "timer_changed": lambda s: f"Okay, I changed the timer to {s['n']} {s['unit']}.",
    "alarm_cancelled": lambda s: f"Okay, the alarm for {s['time']} is cancelled.",
}


def reply_for(intent: str, slots: Slots) -> str:
    if intent in FOLLOW_UP_REPLIES:
        return FOLLOW_UP_REPLIES[intent](slots)
    return INTENT_BY_NAME[intent].reply(slots)


def format_slots(template: str, intent: str, slots: Slots) -> str:
    """The template's text for `slots` (follow-ups about operands need the operation's word)."""
    return template.format(**slots, op=_OP_WORD.get(intent, ""))

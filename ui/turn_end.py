"""The end-of-turn meter's view model: the silence being waited and what it rests on, in words.

Plain Python, no Qt. It follows the endpointer's events for the newest turn: `VoicePaused`
starts the silence clock (from the last voiced frame), `VoiceResumed` / `TurnResumed` stop it
(the user goes on), `EndOfTurnEstimate` says how long the decision will wait and why, and
`TurnEnded` freezes it at the silence that was waited.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from foresay.engine.events import (EndOfTurnEstimate, Event, SpeechStarted, TurnEnded, TurnResumed, VoicePaused,
                                   VoiceResumed)

# the decision's verdicts as the meter says them while it waits, and once the turn has ended
WAITING_WORDS = {"sounds finished": "sounds finished", "sounds unfinished": "waiting: sounds unfinished",
                 "unsure": "waiting: not sure it is finished", "listening": "waiting",
                 "unclear words": "waiting: not sure what was said",
                 "checking words": "waiting: checking what was heard",
                 "no sentence end": "waiting: no end of sentence heard",
                 "clause goes on": "waiting: it sounded as if more would follow",
                 "hearing the voice": "waiting: listening to how it was said",
                 "pauses like before": "waiting: you paused this long before"}
ENDED_WORDS = {"sounds finished": "it sounded finished", "sounds unfinished": "it sounded unfinished",
               "unsure": "not sure it was finished", "listening": "no estimate yet",
               "unclear words": "not sure what was said",
               "checking words": "what was heard was still being checked",
               "no sentence end": "no end of sentence was heard",
               "clause goes on": "it had sounded as if more would follow",
               "hearing the voice": "how it was said was still being heard",
               "pauses like before": "you had paused this long before"}


def verdict_words(verdict: str, ended: bool = False) -> str:
    return (ENDED_WORDS if ended else WAITING_WORDS).get(verdict, verdict)


@dataclass
class TurnEndModel:
    clock: Callable[[], float] = time.monotonic
    turn_id: int = -1
    verdict: str = ""              # the newest EndOfTurnEstimate's, "" before one
    wait_s: float | None = None    # the silence that estimate asks for
    silence_from: float | None = None  # last voiced frame of the silence being waited
    ended_after_s: float | None = None  # the silence waited when the end was declared
    resumed: int = 0               # turns the user resumed after an early end, since start

    def apply(self, event: Event) -> bool:
        if event.turn_id < self.turn_id:
            return False
        if isinstance(event, SpeechStarted):
            self.turn_id, self.verdict, self.wait_s = event.turn_id, "", None
            self.silence_from = self.ended_after_s = None
        elif isinstance(event, EndOfTurnEstimate):
            self.turn_id, self.verdict, self.wait_s = event.turn_id, event.verdict, event.wait_s
        elif isinstance(event, VoicePaused):
            self.turn_id, self.silence_from, self.ended_after_s = event.turn_id, event.last_voiced_t, None
        elif isinstance(event, (VoiceResumed, TurnResumed)):
            self.turn_id, self.silence_from, self.ended_after_s = event.turn_id, None, None
            self.resumed += isinstance(event, TurnResumed)
        elif isinstance(event, TurnEnded):
            self.turn_id, self.silence_from = event.turn_id, None
            self.ended_after_s = max(0.0, event.t - event.last_voiced_t)
        else:
            return False
        return True

    @property
    def waiting(self) -> bool:
        """A silence is being waited out now (the meter's figure grows)."""
        return self.silence_from is not None

    def text(self) -> str:
        """The meter's line, e.g. "silence 240 ms of 1000 ms: waiting: sounds unfinished"; "" when
        nothing is known about the current turn's end."""
        if self.ended_after_s is not None:
            why = f" ({verdict_words(self.verdict, ended=True)})" if self.verdict else ""
            return f"turn ended after {1000 * self.ended_after_s:.0f} ms of silence{why}"
        if self.silence_from is None:
            return ""
        silence = max(0.0, self.clock() - self.silence_from)
        of = f" of {1000 * self.wait_s:.0f} ms" if self.wait_s is not None else ""
        return f"silence {1000 * silence:.0f} ms{of}: {verdict_words(self.verdict or 'listening')}"

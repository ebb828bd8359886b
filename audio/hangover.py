"""How long the turn-taking machine waits in silence before it declares the end of a turn.

A policy is a small strategy object the machine (`turn_taking.TurnTaking`) asks on every silent
frame:

    policy.begin_turn(turn_id)      # the machine calls this when a turn starts (or resumes)
    policy.observe(frame, voiced, t)  # the machine: every frame of an open turn
    policy.hangover_s()             # the current hangover, in seconds
    policy.view()                   # what it rests on, for meters (`turn_end.TurnEndView`)
    policy.update(p_end, turn_id, revision=, audio_until_t=)  # from outside: PredGen's estimate
    policy.heard(turn_id, revision, steady)  # from outside: was that transcript heard steadily
    policy.rechecking(turn_id, revision)     # from outside: that answer is on its way
    policy.audio_cue(turn_id, p_end, audio_until_t)  # from outside: an audio model's P(end of turn)
    policy.paused_inside(pause_s)   # the machine: the user went on after an end, saying more

`FixedHangover` always waits the same. `AdaptiveHangover` waits briefly when the words so far
look like a complete utterance (high P(end of turn)) and long when they do not, within
configured bounds. An update may arrive at any moment, also in the middle of a silence: the
machine compares the silence so far against the newest hangover on its next frame, so a turn
that just became "complete" ends at once. Updates tagged with another turn's id are ignored
(a late estimate about the previous turn must not shorten this one). `turn_end.TurnEndDecision`
is the policy that also weighs how current the estimate is and an audio model's cue.
"""
from __future__ import annotations

from dataclasses import dataclass

VERDICTS = ("listening", "sounds finished", "sounds unfinished", "unsure", "unclear words", "checking words",
            "no sentence end", "clause goes on", "hearing the voice", "pauses like before")


@dataclass(frozen=True)
class TurnEndView:
    """What the decision rests on now, for meters: `verdict` is one of VERDICTS."""
    turn_id: int | None
    p_end_of_turn: float | None   # the combined estimate; None: none current
    wait_s: float                 # the silence this estimate asks for
    verdict: str


class HangoverPolicy:
    """Base class and interface; a policy without state may ignore begin_turn, observe and update.

    `update`'s `revision` (of the transcript the estimate belongs to) and `audio_until_t` (capture
    time up to which that transcript heard the audio) are optional; policies may ignore them."""

    def begin_turn(self, turn_id: int) -> None:
        pass

    def observe(self, frame, voiced: bool, t: float) -> None:
        pass

    def voice_ended_by(self, t: float) -> None:
        """No frame observed after `t` was voice after all (`TurnTaking.voice_ended_by`)."""

    def hangover_s(self) -> float:
        raise NotImplementedError

    def update(self, p_end_of_turn: float, turn_id: int | None = None, revision: int | None = None,
               audio_until_t: float | None = None) -> None:
        pass

    def rechecking(self, turn_id: int, revision: int) -> None:
        pass

    def heard(self, turn_id: int, revision: int, steady: bool) -> None:
        pass

    def sentence_ended(self, turn_id: int, revision: int, ended: bool, p: float | None = None,
                       number: bool = False, goes_on: float | None = None) -> None:
        pass

    def audio_cue(self, turn_id: int, p_end_of_turn: float, audio_until_t: float) -> None:
        pass

    def paused_inside(self, pause_s: float) -> None:
        """The user paused `pause_s` inside a request: the turn was ended there, and they went on
        with more words (`TurnTaking` tells this once per such resume)."""

    def view(self):
        """(turn_id, P(end of turn) or None, wait_s, verdict) as a `turn_end.TurnEndView`."""
        return TurnEndView(None, None, self.hangover_s(), "listening")


class FixedHangover(HangoverPolicy):
    def __init__(self, seconds: float = 0.7):
        if seconds <= 0:
            raise ValueError("hangover must be positive")
        self.seconds = float(seconds)

    def hangover_s(self) -> float:
        return self.seconds


@dataclass(frozen=True)
class AdaptiveHangoverConfig:
    min_s: float = 0.25        # hangover when the turn looks complete
    max_s: float = 1.2         # hangover when it looks unfinished
    default_s: float = 0.7     # before any estimate arrives in a turn
    complete_p: float = 0.8    # P(end of turn) at or above this: min_s
    incomplete_p: float = 0.2  # at or below this: max_s; linear in between

    def __post_init__(self):
        if not 0 < self.min_s <= self.default_s <= self.max_s:
            raise ValueError("need 0 < min_s <= default_s <= max_s")
        if not 0.0 <= self.incomplete_p < self.complete_p <= 1.0:
            raise ValueError("need 0 <= incomplete_p < complete_p <= 1")


class AdaptiveHangover(HangoverPolicy):
    """Hangover from the newest P(end of turn) of the current turn, clamped to [min_s, max_s]."""

    def __init__(self, config: AdaptiveHangoverConfig | None = None):
        self.config = config or AdaptiveHangoverConfig()
        self._turn_id: int | None = None
        self._hangover = self.config.default_s
        self.p_end_of_turn: float | None = None

    def begin_turn(self, turn_id: int) -> None:
        self._turn_id = turn_id
        self._hangover = self.config.default_s
        self.p_end_of_turn = None

    def hangover_s(self) -> float:
        return self._hangover

    def view(self):
        c, p = self.config, self.p_end_of_turn
        verdict = ("listening" if p is None else "sounds finished" if p >= c.complete_p
                   else "sounds unfinished" if p <= c.incomplete_p else "unsure")
        return TurnEndView(self._turn_id, p, self._hangover, verdict)

    def update(self, p_end_of_turn: float, turn_id: int | None = None, revision: int | None = None,
               audio_until_t: float | None = None) -> None:
        if turn_id is not None and turn_id != self._turn_id:
            return
        c = self.config
        p = min(1.0, max(0.0, float(p_end_of_turn)))
        self.p_end_of_turn = p
        if p >= c.complete_p:
            h = c.min_s
        elif p <= c.incomplete_p:
            h = c.max_s
        else:
            frac = (p - c.incomplete_p) / (c.complete_p - c.incomplete_p)
            h = c.max_s + frac * (c.min_s - c.max_s)
        self._hangover = min(c.max_s, max(c.min_s, h))

"""The end-of-turn decision: at each silent frame, has the user finished?

`TurnEndDecision` is a hangover policy (see `hangover`) that decides from everything known:

- the newest P(end of turn) for this turn, from PredGen's verification pass over the newest
  transcript (`update(p, turn_id, revision=, audio_until_t=)`). An estimate counts only for the
  turn it names, a newer revision supersedes an older one, and an estimate counts only when its
  transcript heard all the voiced audio so far (`audio_until_t` at or after the last voiced
  frame): the words after it may change the answer, and an estimate that does not say what it
  heard (a partial's, whose prompt leaves out a last word that may still grow) is not known to be
  current. Without a current estimate the decision waits `no_estimate_s`;
- whether the recognizer heard that transcript steadily (`heard(turn_id, revision, steady)`, from
  `PauseRechecked`): a transcript whose last word changes when the same audio is decoded
  a few ms later in was not clearly heard. A recognizer trained on whole requests hears a fragment
  ("What is 15 centimeters in") as a whole one ("... in millimeters?"), and the LLM then finds
  it finished; such an estimate waits at least `unsteady_s`, and so does one whose check is still
  under way (`rechecking`, from `PausedTranscript`): on a busy machine the check's answer may come
  after `complete_s`, and a finished-sounding fragment must not end the turn meanwhile;
- whether the recognizer ended the transcript with a sentence end (`sentence_ended(turn_id,
  revision, ended, p)`, from `PausedTranscript`): a recognizer that punctuates ends a whole
  request with ". ? !" and a fragment with none ("Convert 14 kilometers"), from the voice as much
  as from the words, while the LLM, taught to read unpunctuated requests too, may find the
  fragment whole. A Whisper also says how sure it was (`p`, its P(". ? !") after the last word):
  a speaker who stops mid-request with the voice still running on leaves it unsure even where the
  words would make a whole request ("Call my brother" ... "on his mobile"). A transcript without
  a sentence end, or whose `p` is below `sentence_end_p`, waits at least `open_sentence_s` (0:
  off, for a recognizer that writes no punctuation). When the audio cue (below) heard the same
  pause and hears an end, it lifts this judgment (`cue_sentence_weight`, in log-odds): Whisper
  writes no full stop after a digit string or a card name said with a final fall, where Smart
  Turn hears the end. A cue that hears the voice run on does not lower it: it already lengthens
  the wait through the fused estimate (below), and counted twice it held whole requests that
  Whisper had closed with a sure full stop ("Why is the sky blue?" at 0.93) to `open_sentence_s`.
  After a number in digits (`number=True`: "dial 555-0199", "my PIN is 4729") a Whisper writes no
  sentence end, finished or not (P 0.15-0.34 after every whole request of the turn sets that
  ended in one): there the judgment is not made (`sentence_end_after_number` False), and the
  fused estimate alone sets the wait. A number that may go on ("call 0 7 7 0 0") is the LLM's to
  judge, and the cue's. A sentence end the recognizer was surer of than `sentence_end_p` is also
  evidence for the end of the turn: its log-odds above those of `sentence_end_p`, times
  `sentence_weight`, join the fused estimate (below). A reader's sentence end ("He was not an
  ill-disposed young man.", 0.95) may sound to the audio cue as if the voice ran on (0.06);
  the recognizer's sureness then outweighs it. The same step says whether the clause goes on
  (`goes_on`, its P(", ; : …")): a speaker who pauses inside a request leaves more there than
  one who finished ("How do you marry the more?" 0.14 where whole requests stay under 0.1), so at
  or above `goes_on_p` the turn waits at least `open_sentence_s`, whatever else says it ended,
  after a number too ("33, 4, 6,");
- the silence so far (the endpointer compares it with `hangover_s()` on every frame);
- an audio model's cue (`audio_cue(turn_id, p, audio_until_t)`, from `AudioTurnCue`: Smart Turn
  reading the turn's last 8 s at each voice pause): how the words were said, where the LLM reads
  only what was said. It counts only when it heard the audio through the last voiced frame, and
  never ends a turn alone: without a current LLM estimate it may lengthen the wait beyond
  `no_estimate_s`, not shorten it (alone, Smart Turn cuts most pauses inside real requests). When
  the decision was told that such a cue comes at each pause (`audio_cue=True`), the turn does not
  end before the cue of the current pause has answered, unless the silence reaches `cue_wait_s`;
- the user's own pauses (`paused_inside(pause_s)`, from `TurnTaking`): a turn ended in a pause
  that the user then went on from with more words tells how long this user pauses inside a
  request. Every cue may hear such a pause as an end ("Eight of spades, four of clubs ... seven of
  hearts"), so for the next `learned_pause_turns` turns no wait is shorter than that pause plus
  `learned_pause_margin_s` (at most `incomplete_s`): a user who pauses is not cut off again and
  again, and one who does not pays nothing.

The estimates are fused as independent evidence, in log-odds: the LLM's times `llm_weight`
(clipped to [`incomplete_p`, `complete_p`] when a cue takes part: a small chat model says 0.9999
after a whole request that may still go on), plus the cue's times `cue_weight`, plus the
recognizer's sureness of a sentence end (above) times `sentence_weight`; the sureness joins only
an estimate of the LLM or the cue, never stands for one. A cue of 0.5
changes nothing; below it the wait grows, above it an unsure LLM estimate sounds more finished.

The wait follows the fused probability p: `complete_s` when p >= `complete_p` ("sounds
finished"), `incomplete_s` when p <= `incomplete_p` ("sounds unfinished"), and in between
linear in log-odds. It is never shorter than `min_silence_s` (stop consonants and breaths are
silent for tens of ms inside words).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .blocks import SAMPLE_RATE
from .hangover import HangoverPolicy, TurnEndView

@dataclass(frozen=True)
class TurnEndConfig:
    """Thresholds of the end-of-turn decision (seconds of silence after the last voiced frame).

    complete_p: P(end of turn) at or above this sounds finished: wait `complete_s`.
    incomplete_p: at or below this sounds unfinished: wait `incomplete_s`.
    no_estimate_s: the wait while no current estimate exists for the turn.
    min_silence_s: no wait is shorter (a silence inside a word is not an end).
    llm_weight: weight of the LLM's estimate when cues are combined with it (log-odds).
    unsteady_s: the shortest wait on an estimate whose transcript was not heard steadily
        (verdict "unclear words") or whose check has not answered yet ("checking words"),
        between `complete_s` and `incomplete_s`.
    open_sentence_s: the shortest wait on an estimate whose transcript the recognizer did not end
        with a sentence end (verdict "no sentence end"); 0: off, else between `complete_s` and
        `incomplete_s`. Turn it off for a recognizer that writes no punctuation.
    sentence_end_p: a transcript whose recognizer gave P(sentence end) below this counts as left
        without a sentence end, whatever mark won (0: only the written mark counts).
    cue_weight: weight of the audio cue's log-odds, added to the LLM's (0: the cue is ignored).
    cue_sentence_weight: weight of the audio cue's log-odds, where it hears an end (p > 0.5),
        added to those of the recognizer's P(sentence end) before they are held against
        `sentence_end_p` (0: the recognizer alone says whether the sentence ended).
    cue_wait_s: when an audio cue is expected, the shortest wait while the current pause's cue has
        not answered (verdict "hearing the voice"), between `complete_s` and `incomplete_s`.
    goes_on_p: a transcript after whose last word the recognizer gave P(", ; : …") at or above
        this waits at least `open_sentence_s` (verdict "clause goes on"), whatever else says it
        ended (0: off).
    sentence_end_after_number: judge the sentence end of a transcript that ends in a number in
        digits as any other (False: the recognizer's punctuation says nothing there).
    sentence_weight: weight of the recognizer's sureness of a written sentence end beyond
        `sentence_end_p` (its log-odds above those of `sentence_end_p`), added to the fused
        estimate (0: the recognizer's P(sentence end) only holds a turn back, never hastens it).
    learned_pause_turns: after the user went on from an ended turn with more words, how many of
        the next turns wait at least that pause (verdict "pauses like before"; 0: never).
    learned_pause_margin_s: what that wait adds to the pause the user made.
    """
    complete_p: float = 0.99   # the demo model gives p > 0.9999 after a whole request; between
                               # 0.05 and 0.99 the wait is graded (a p of 0.9 still waits 0.47 s)
    incomplete_p: float = 0.05
    complete_s: float = 0.22    # 8 frames of 30 ms: one frame longer cost a median of 20-30 ms a turn
                                # (docs/benchmarks.md, "Turn-taking: what the decision's defaults buy")
    incomplete_s: float = 1.0
    no_estimate_s: float = 0.8
    min_silence_s: float = 0.1
    llm_weight: float = 1.0
    unsteady_s: float = 0.8   # pauses inside requests last 0.3-0.7 s in the turn sets
    open_sentence_s: float = 0.9  # such a pause measures up to 0.81 s from the last voiced frame;
                                  # 0.75 cut 3 more of 40 paused Piper requests (docs/benchmarks.md)
    sentence_end_p: float = 0.77  # decoded 50 ms into the silence, as live, whole Piper requests often
                                  # sit at 0.76-0.84: at 0.8 one in eight waited 0.9 s; 0.77 cuts 1-2
                                  # more paused ones of 40 (docs/benchmarks.md)
    cue_weight: float = 0.5
    cue_sentence_weight: float = 0.5  # of the cue's log-odds beside Whisper's P(sentence end)
    cue_wait_s: float = 0.3   # Smart Turn answered 0.17-0.19 s into the silence on the 2-core VM
    goes_on_p: float = 0.1  # reached at 20 of 86 Piper pauses and 0 of 167 ends; on real speakers at 7 of 10
                            # pauses and 3 of 27 ends, two of which wait anyway (docs/benchmarks.md)
    sentence_end_after_number: bool = False
    sentence_weight: float = 1.0  # a LibriVox reader's sentence ends, sure full stops where Smart Turn heard
                                  # the voice run on: 240-270 ms instead of 290-370 (docs/benchmarks.md)
    learned_pause_turns: int = 5
    learned_pause_margin_s: float = 0.15

    def __post_init__(self):
        if not 0.0 < self.incomplete_p < self.complete_p < 1.0:
            raise ValueError("turn end: need 0 < incomplete_p < complete_p < 1")
        if not 0.0 < self.min_silence_s <= self.complete_s <= self.no_estimate_s <= self.incomplete_s:
            raise ValueError("turn end: need 0 < min_silence_s <= complete_s <= no_estimate_s <= incomplete_s")
        if self.llm_weight < 0:
            raise ValueError("turn end: llm_weight must not be negative")
        if not self.complete_s <= self.unsteady_s <= self.incomplete_s:
            raise ValueError("turn end: need complete_s <= unsteady_s <= incomplete_s")
        if self.open_sentence_s and not self.complete_s <= self.open_sentence_s <= self.incomplete_s:
            raise ValueError("turn end: need open_sentence_s 0 (off) or complete_s <= open_sentence_s <= incomplete_s")
        if not 0.0 <= self.sentence_end_p < 1.0 or not 0.0 <= self.goes_on_p < 1.0:
            raise ValueError("turn end: sentence_end_p and goes_on_p must be in [0, 1)")
        if self.cue_weight < 0 or self.cue_sentence_weight < 0 or self.sentence_weight < 0:
            raise ValueError("turn end: cue_weight, cue_sentence_weight and sentence_weight must not be negative")
        if not self.complete_s <= self.cue_wait_s <= self.incomplete_s:
            raise ValueError("turn end: need complete_s <= cue_wait_s <= incomplete_s")
        if self.learned_pause_turns < 0 or self.learned_pause_margin_s < 0:
            raise ValueError("turn end: learned_pause_turns and learned_pause_margin_s must not be negative")


def _unit(p: float) -> float:
    return min(1.0, max(0.0, float(p)))


def _logit(p: float) -> float:
    p = min(1 - 1e-6, max(1e-6, p))
    return math.log(p / (1 - p))


class TurnEndDecision(HangoverPolicy):
    def __init__(self, config: TurnEndConfig | None = None, audio_cue: bool = False):
        """`audio_cue`: an audio model answers at each voice pause (`audio_cue()`); the turn
        waits for that answer up to `cue_wait_s`."""
        self.config = config or TurnEndConfig()
        self.expects_cue = audio_cue
        self._turn_id: int | None = None
        self._p_llm: float | None = None
        self._revision = -1
        self._heard_until: float | None = None  # audio time the estimate's transcript covered
        self._last_voiced_t: float | None = None
        self._unsteady: set[int] = set()  # revisions of this turn not heard steadily
        self._checking: set[int] = set()  # revisions of this turn whose steadiness check is under way
        self._sentence: dict[int, tuple] = {}  # revision -> (". ? !" written, its P, ends in a number,
                                               # P(", ; : …"))
        self._cue: tuple[float, float] | None = None  # the audio cue: (p, audio heard until)
        self._learned_wait: float | None = None  # the shortest wait the user's own pauses ask for
        self._learned_turns_left = 0  # new turns after this one that still wait it
        self._learned_in: int | None = None  # the turn it was learned in, which it does not hold back

    # --- inputs -------------------------------------------------------------------------------

    def begin_turn(self, turn_id: int) -> None:
        if turn_id != self._turn_id and self._learned_wait is not None:  # a new turn, not a resumed one
            if self._learned_turns_left:
                self._learned_turns_left -= 1
            else:
                self._learned_wait = None
        self._turn_id = turn_id
        self._p_llm, self._revision, self._heard_until, self._last_voiced_t = None, -1, None, None
        self._unsteady, self._checking, self._sentence = set(), set(), {}
        self._cue = None

    def update(self, p_end_of_turn: float, turn_id: int | None = None, revision: int | None = None,
               audio_until_t: float | None = None) -> None:
        if turn_id is not None and turn_id != self._turn_id:
            return  # a late estimate about another turn
        if revision is not None:
            if revision < self._revision:
                return
            self._revision = revision
        self._p_llm = _unit(p_end_of_turn)
        self._heard_until = audio_until_t

    def rechecking(self, turn_id: int, revision: int) -> None:
        if turn_id == self._turn_id:
            self._checking.add(revision)

    def heard(self, turn_id: int, revision: int, steady: bool) -> None:
        if turn_id != self._turn_id:
            return
        self._checking.discard(revision)
        if steady:
            self._unsteady.discard(revision)
        else:
            self._unsteady.add(revision)

    def sentence_ended(self, turn_id: int, revision: int, ended: bool, p: float | None = None,
                       number: bool = False, goes_on: float | None = None) -> None:
        if turn_id != self._turn_id:
            return
        self._sentence[revision] = (ended, None if p is None else _unit(p), number,
                                    None if goes_on is None else _unit(goes_on))

    def audio_cue(self, turn_id: int, p_end_of_turn: float, audio_until_t: float) -> None:
        if turn_id == self._turn_id:
            self._cue = (_unit(p_end_of_turn), audio_until_t)

    def paused_inside(self, pause_s: float) -> None:
        c = self.config
        if not c.learned_pause_turns or pause_s <= 0:
            return
        wait = min(c.incomplete_s, float(pause_s) + c.learned_pause_margin_s)
        self._learned_wait = max(wait, self._learned_wait or 0.0)
        self._learned_turns_left = c.learned_pause_turns
        self._learned_in = self._turn_id

    def observe(self, frame: np.ndarray, voiced: bool, t: float) -> None:
        if voiced:
            self._last_voiced_t = t + len(frame) / SAMPLE_RATE

    def voice_ended_by(self, t: float) -> None:
        if self._last_voiced_t is not None:
            self._last_voiced_t = min(self._last_voiced_t, t)

    # --- the decision ---------------------------------------------------------------------------

    def _current(self, heard_until: float | None) -> bool:
        """Whether an answer about the audio up to `heard_until` heard the last voiced frame."""
        return heard_until is not None and (self._last_voiced_t is None or heard_until >= self._last_voiced_t - 0.02)

    def _fresh(self) -> bool:
        return self._p_llm is not None and self._current(self._heard_until)

    def _fresh_cue(self) -> float | None:
        return self._cue[0] if self._cue is not None and self._current(self._cue[1]) else None

    def _current_sentence(self) -> tuple[bool, float | None, bool, float | None]:
        """The recognizer's sentence end for the current transcript: (". ? !" written, its P, ends
        in a number, P(", ; : …")); none reported counts as written, of unknown P."""
        return self._sentence.get(self._revision, (True, None, False, None))

    def _goes_on(self) -> bool:
        """Whether the recognizer heard the current transcript's clause go on."""
        c = self.config
        p = self._current_sentence()[3]
        return bool(c.goes_on_p) and p is not None and p >= c.goes_on_p

    def _open_sentence(self) -> bool:
        """Whether the current transcript was left without a sentence end, by the recognizer's
        mark and P(sentence end), lifted by the audio cue's log-odds when it heard an end at this
        pause."""
        c = self.config
        ended, p, number, _ = self._current_sentence()
        if number and not c.sentence_end_after_number:
            return False
        if p is None or c.sentence_end_p <= 0:
            return not ended
        cue = self._fresh_cue() if c.cue_sentence_weight > 0 else None
        if cue is None or cue <= 0.5:
            return not (ended and p >= c.sentence_end_p)
        return _logit(p) + c.cue_sentence_weight * _logit(cue) < _logit(c.sentence_end_p)

    def _fused_logit(self) -> float | None:
        """The log-odds of the fused P(end of turn) of the current LLM estimate and audio cue
        (None: no opinion)."""
        c = self.config
        cue = self._fresh_cue() if c.cue_weight > 0 else None
        terms = []
        if self._fresh() and c.llm_weight > 0:
            x = _logit(self._p_llm)
            if cue is not None:  # beyond the thresholds the LLM's certainty is not evidence
                x = min(_logit(c.complete_p), max(_logit(c.incomplete_p), x))
            terms.append(c.llm_weight * x)
        if cue is not None:
            terms.append(c.cue_weight * _logit(cue))
        if terms and c.sentence_weight > 0:
            terms.append(c.sentence_weight * self._sentence_sureness())
        return sum(terms) if terms else None

    def _sentence_sureness(self) -> float:
        """How much surer than `sentence_end_p` the recognizer was of the current transcript's
        written sentence end, in log-odds (0: not surer, no mark, or a number in digits)."""
        c = self.config
        ended, p, number, _ = self._current_sentence()
        if not ended or p is None or number or c.sentence_end_p <= 0:
            return 0.0
        return max(0.0, _logit(p) - _logit(c.sentence_end_p))

    def view(self) -> TurnEndView:
        c = self.config
        x = self._fused_logit()
        if x is None:
            return TurnEndView(self._turn_id, None, c.no_estimate_s, "listening")
        p = 1 / (1 + math.exp(-x))
        if x >= _logit(c.complete_p) - 1e-9:
            wait, verdict = c.complete_s, "sounds finished"
        elif x <= _logit(c.incomplete_p) + 1e-9:
            wait, verdict = c.incomplete_s, "sounds unfinished"
        else:
            frac = (x - _logit(c.incomplete_p)) / (_logit(c.complete_p) - _logit(c.incomplete_p))
            wait, verdict = c.incomplete_s + frac * (c.complete_s - c.incomplete_s), "unsure"
        if not self._fresh():
            # cues without a current LLM estimate may lengthen the wait, never shorten it: an audio
            # turn model alone ends most pauses inside real requests
            if wait < c.no_estimate_s:
                wait, verdict = c.no_estimate_s, "listening"
        else:
            cue_pending = (self.expects_cue and c.cue_weight > 0 and self._last_voiced_t is not None
                           and self._fresh_cue() is None)
            floors = [(c.unsteady_s, "unclear words", self._revision in self._unsteady),
                      (c.unsteady_s, "checking words", self._revision in self._checking),
                      (c.open_sentence_s, "no sentence end", bool(c.open_sentence_s) and self._open_sentence()),
                      (c.open_sentence_s, "clause goes on", bool(c.open_sentence_s) and self._goes_on()),
                      (c.cue_wait_s, "hearing the voice", cue_pending)]
            for floor, reason, applies in floors:
                if applies and wait < floor:
                    wait, verdict = floor, reason
        if self._learned_wait is not None and self._turn_id != self._learned_in and wait < self._learned_wait:
            wait, verdict = self._learned_wait, "pauses like before"
        return TurnEndView(self._turn_id, p, max(c.min_silence_s, wait), verdict)

    def hangover_s(self) -> float:
        return self.view().wait_s

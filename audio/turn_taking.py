"""Turn-taking: the one owner of when a user's turn starts, ends, goes on, or is a new turn.

`TurnTaking` is a pure state machine: no audio, no threads, no clock of its own. Times come in
with its inputs (capture times of the audio, seconds); decisions come out as events of
`foresay.engine.events`:

    tt = TurnTaking(TurnEndDecision(), TurnTakingConfig())
    tt.onset(first_voiced_t)              # voice began, no turn open -> SpeechStarted | TurnResumed
    tt.hear(t, samples, voiced)           # the audio of it heard before (pre-roll): no decision
    tt.frame(t, t_end, voiced)            # a frame of the open turn -> [VoiceResumed, VoicePaused,
                                          #   EndOfTurnEstimate, TurnEnded] as they happen
    tt.feed(PausedTranscript | DraftUpdated | PauseRechecked | AudioTurnCue)   # what the pipeline learned
    tt.end(t)                             # push-to-talk release, mode switch, end of input

Its inputs, from the endpointer (which keeps the VAD and the audio): voice onsets and every
frame of an open turn, voiced or not (the audio cues of the policy hear the samples too); from
the pipeline: the transcript decoded at each voice pause (`PausedTranscript`: its revision, its
text, the audio it heard, whether a steadiness check follows), PredGen's P(end of turn) for a
transcript (`DraftUpdated`), the check's answer (`PauseRechecked`), and an audio model's P(end of
turn) at the pause (`AudioTurnCue`, Smart Turn).

Its decisions:
- wait: every silent frame of an open turn is compared with the end-of-turn policy's wait
  (`hangover.HangoverPolicy`; the fused one is `turn_end.TurnEndDecision`: the silence, the LLM's
  P(end of turn), the audio cue); `EndOfTurnEstimate` says what the wait rests on when that changes.
- end: `TurnEnded` once the silence reaches the wait; `heard_revision` names the paused transcript
  that heard every voiced frame of the turn, which IS the final transcript (no decode after the
  end), or None when none did.
- pause: `VoicePaused` once `pause_s` of silence follows voice (the moment to decode the whole
  turn), `VoiceResumed` when voice comes back inside the same turn.
- resume or new turn, at the next onset: the turn ended by silence goes on (`TurnResumed`, same
  turn id) when the voice came back within `resume_window_s` of the declared end and within
  `resume_max_gap_s` of the turn's last voiced frame; otherwise the onset starts a new turn
  (`SpeechStarted`), whatever the recognizer's or the reply's latency: two requests are two turns.
- learn: once a resumed turn's transcript holds more words than it did at its end, the pause it
  had ended in was one inside a request, and the policy hears of it (`paused_inside`); a cough or
  a breath that reopens a turn and brings no words teaches nothing. (More words, not the same
  words and more: decoded whole again, the turn's earlier words may come out otherwise.)
"""
from __future__ import annotations

from dataclasses import dataclass

from foresay.engine.events import (AudioTurnCue, DraftUpdated, EndOfTurnEstimate, Event, PausedTranscript,
                                   PauseRechecked, SpeechStarted, TurnEnded, TurnResumed, VoicePaused, VoiceResumed)
from foresay.engine.sentences import ends_in_number, ends_sentence
from foresay.engine.sequences import words

from .blocks import SAMPLE_RATE
from .hangover import FixedHangover, HangoverPolicy

HEARD_SLACK_S = 0.02  # a transcript that heard up to this close to the last voiced frame heard it


@dataclass(frozen=True)
class TurnTakingConfig:
    """When a pause is reported, when a turn goes on, and the longest turn.

    pause_s: silence after voice that makes a `VoicePaused` (once per pause).
    resume_window_s: voice this soon after an end declared by silence reopens that turn (0: never) ...
    resume_max_gap_s: ... unless the silence since the turn's last voiced frame is longer: a pause
        that long ends a request even when its end was declared late (a loaded machine).
    max_turn_s: a turn this long ends at its next unvoiced frame (speech that never pauses: 5 s
        later at any frame).
    """
    pause_s: float = 0.1
    resume_window_s: float = 1.0
    resume_max_gap_s: float = 1.2
    max_turn_s: float = 60.0

    def __post_init__(self):
        if self.pause_s <= 0:
            raise ValueError("turn taking: pause_s must be positive")
        if self.resume_window_s < 0:
            raise ValueError("turn taking: resume_window_s must not be negative")
        if self.resume_max_gap_s <= 0:
            raise ValueError("turn taking: resume_max_gap_s must be positive")
        if self.max_turn_s <= 0:
            raise ValueError("turn taking: max_turn_s must be positive")


class TurnTaking:
    def __init__(self, policy: HangoverPolicy | None = None, config: TurnTakingConfig | None = None,
                 first_turn_id: int = 1):
        self.policy = policy or FixedHangover()
        self.config = config or TurnTakingConfig()
        self._next_id = first_turn_id
        self.turn_id: int | None = None       # the open turn, else the last one
        self.is_open = False
        self.start_t = 0.0
        self.last_voiced_t: float | None = None
        self.end_t: float | None = None
        self._silence_ends = False            # the open turn ends by silence (hands-free)
        self._resumable = False               # the last turn ended by silence and may go on
        self._paused = False                  # VoicePaused sent for the current silence
        self._estimate: tuple | None = None   # the last EndOfTurnEstimate's content
        self._heard: dict[int, float] = {}    # the open turn's paused transcripts: revision -> audio heard until
        self._texts: dict[int, str] = {}      # ... and revision -> text
        self._said_at_end = ""                # the last turn's words when it ended
        self._went_on: tuple[float, str] | None = None  # a resumed turn: (the pause it had ended in, its words then)
        # whether the pipeline's estimates inform the wait (adaptive endpointing); off, a paused
        # transcript still says what it heard (it is the final when it heard the whole turn)
        self.use_estimates = True

    # --- voice, from the endpointer -----------------------------------------------------------

    def resumable(self, t: float) -> bool:
        """Whether voice beginning at `t` would reopen the last turn."""
        c = self.config
        if not self._resumable or self.is_open:
            return False
        last = self.end_t if self.last_voiced_t is None else self.last_voiced_t
        return t - self.end_t <= c.resume_window_s + 1e-9 and t - last <= c.resume_max_gap_s + 1e-9

    def expired(self, t: float) -> bool:
        """Whether no voice beginning at `t` or later can reopen the last turn."""
        return not self._resumable or t - self.end_t > self.config.resume_window_s + 1e-9

    def onset(self, first_voiced_t: float, *, silence_ends: bool = True) -> SpeechStarted | TurnResumed:
        """Voice began at `first_voiced_t` and no turn is open: the last turn goes on, or a new one
        starts. `silence_ends=False`: push-to-talk, the turn ends only by `end()` and never
        resumes. The audio already heard of it follows through `hear`."""
        if self.is_open:
            raise ValueError(f"turn {self.turn_id} is still open")
        if silence_ends and self.resumable(first_voiced_t):
            decision = TurnResumed(turn_id=self.turn_id, t=first_voiced_t, ended_t=self.end_t)
            last = self.end_t if self.last_voiced_t is None else self.last_voiced_t
            self._went_on = (first_voiced_t - last, self._said_at_end)
        else:
            self._went_on = None
            self.turn_id, self._next_id = self._next_id, self._next_id + 1
            self.start_t, self.last_voiced_t = first_voiced_t, None
            decision = SpeechStarted(turn_id=self.turn_id, t=first_voiced_t)
        self.is_open, self.end_t, self._silence_ends, self._resumable = True, None, silence_ends, False
        self._paused, self._estimate, self._heard, self._texts = False, None, {}, {}
        self.policy.begin_turn(self.turn_id)
        return decision

    def hear(self, t: float, samples, voiced: bool) -> None:
        """Audio of the open turn heard before its decision (the pre-roll, the audio since a
        resumed end): for the policy's cues and the last voiced frame; it decides nothing."""
        if self.is_open:
            self.policy.observe(samples, voiced, t)
            if voiced:
                self.last_voiced_t = t + len(samples) / SAMPLE_RATE

    def voice_ended_by(self, t: float) -> None:
        """No frame of the open turn after `t` was voice after all (what the endpointer learns
        when the room's floor comes back after digital silence): its silence is counted from
        there, so a pause and the end come as they would have with the floor known."""
        if self.is_open and self.last_voiced_t is not None and self.last_voiced_t > t:
            self.last_voiced_t = max(t, self.start_t)
            self.policy.voice_ended_by(self.last_voiced_t)

    def frame(self, t: float, t_end: float, voiced: bool, samples=None) -> list[Event]:
        """One frame [t, t_end) of the open turn: what happened at its end."""
        if not self.is_open:
            return []
        events: list[Event] = []
        self.policy.observe(samples, voiced, t)
        if voiced:
            self.last_voiced_t = t_end
            if self._paused:
                self._paused = False
                events.append(VoiceResumed(turn_id=self.turn_id, t=t))
        if self._silence_ends:
            last = self.last_voiced_t if self.last_voiced_t is not None else self.start_t
            silence = t_end - last
            if (not voiced and not self._paused and self.last_voiced_t is not None
                    and silence >= self.config.pause_s - 1e-9):
                self._paused = True
                events.append(VoicePaused(turn_id=self.turn_id, t=t_end, last_voiced_t=last))
            self._report_estimate(t_end, events)
            if not voiced and silence >= self.policy.hangover_s() - 1e-9:
                events.append(self._end(t_end, resumable=True))
                return events
        # A turn past max_turn_s ends between words; only speech that never leaves a gap is cut
        # after a grace of 5 s more.
        length = t_end - self.start_t
        if length >= self.config.max_turn_s and (not voiced or length >= self.config.max_turn_s + 5.0):
            events.append(self._end(t_end))
        return events

    def end(self, t: float) -> TurnEnded | None:
        """End the open turn at `t` (push-to-talk release, a mode switch, the end of input); such
        an end never resumes. None: no turn is open."""
        if not self.is_open:
            return None
        return self._end(max(t, self.start_t))

    def forget(self) -> None:
        """The last turn may no longer go on (a mode switch)."""
        self._resumable = False

    # --- what the pipeline learned --------------------------------------------------------------

    def feed(self, event: Event) -> None:
        """A transcript decoded at a pause, an estimate of P(end of turn), a check's answer, or an
        audio cue."""
        if isinstance(event, PausedTranscript):
            self.paused_transcript(event.turn_id, event.revision, event.text, event.audio_until_t,
                                   event.rechecking, event.p_sentence_end, event.p_goes_on)
        elif not self.use_estimates:
            return
        elif isinstance(event, DraftUpdated):
            self.estimate(event.p_end_of_turn, event.turn_id, event.revision, event.audio_until_t)
        elif isinstance(event, PauseRechecked):
            self.policy.heard(event.turn_id, event.revision, event.steady)
        elif isinstance(event, AudioTurnCue):
            self.policy.audio_cue(event.turn_id, event.p_end_of_turn, event.audio_until_t)

    def paused_transcript(self, turn_id: int, revision: int, text: str, audio_until_t: float,
                          rechecking: bool = False, p_sentence_end: float | None = None,
                          p_goes_on: float | None = None) -> None:
        """The whole turn decoded at a pause, through `audio_until_t`: the final transcript if no
        voice follows; whether it ends a sentence (its punctuation, and the recognizer's
        `p_sentence_end` and `p_goes_on` when it says) and whether its check is under way go to
        the policy."""
        if turn_id == self.turn_id and self.is_open:
            self._heard[revision] = audio_until_t
            self._texts[revision] = text
            if self._went_on is not None and len(words(text)) > len(words(self._went_on[1])):
                self.policy.paused_inside(self._went_on[0])
                self._went_on = None
        if not self.use_estimates:
            return
        if text.strip():
            self.policy.sentence_ended(turn_id, revision, ends_sentence(text), p_sentence_end,
                                       number=ends_in_number(text), goes_on=p_goes_on)
        if rechecking:
            self.policy.rechecking(turn_id, revision)

    def estimate(self, p_end_of_turn: float, turn_id: int, revision: int | None = None,
                 audio_until_t: float | None = None) -> None:
        """P(end of turn) for `turn_id`'s transcript `revision`, which heard the audio up to
        `audio_until_t` (None: not said, e.g. a partial's)."""
        self.policy.update(p_end_of_turn, turn_id, revision=revision, audio_until_t=audio_until_t)

    # --- inside ---------------------------------------------------------------------------------

    def _report_estimate(self, t: float, events: list[Event]) -> None:
        view = self.policy.view()
        p = None if view.p_end_of_turn is None else round(view.p_end_of_turn, 2)
        key = (p, round(view.wait_s, 2), view.verdict)
        if key != self._estimate:
            self._estimate = key
            events.append(EndOfTurnEstimate(turn_id=self.turn_id, t=t, p_end_of_turn=view.p_end_of_turn,
                                            wait_s=view.wait_s, verdict=view.verdict))

    def _end(self, t: float, resumable: bool = False) -> TurnEnded:
        if self.last_voiced_t is not None:
            self.last_voiced_t = min(self.last_voiced_t, t)
        last = self.last_voiced_t if self.last_voiced_t is not None else self.start_t
        heard = [r for r, until in self._heard.items()
                 if self.last_voiced_t is not None and until >= self.last_voiced_t - HEARD_SLACK_S]
        newest = max(heard) if heard else max(self._texts, default=None)
        self._said_at_end = self._texts.get(newest, "") if newest is not None else ""
        self.is_open, self.end_t = False, t
        self._resumable = resumable and self._silence_ends and self.config.resume_window_s > 0
        return TurnEnded(turn_id=self.turn_id, t=t, last_voiced_t=last,
                         heard_revision=max(heard) if heard else None)

"""The typed messages that flow between Foresay's stages.

Every message is a small frozen dataclass. `turn_id` names the user turn it belongs to;
messages that a newer one can supersede carry a `revision`, and stale work is recognised by
comparing `(turn_id, revision)`. Times are seconds on the monotonic clock the metrics use
(`time.monotonic()`); audio timestamps are mapped onto it by the audio stage.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class ListeningMode(str, Enum):
    """How the user's turns are delimited: by the endpointer, or by holding a key."""
    HANDS_FREE = "hands-free"
    PUSH_TO_TALK = "push-to-talk"


@dataclass(frozen=True)
class Event:
    turn_id: int
    t: float  # monotonic time the event refers to


# --- audio / endpointing -------------------------------------------------------------------

@dataclass(frozen=True)
class SpeechStarted(Event):
    """Voiced audio began a user turn; `t` is the first voiced frame's time."""


@dataclass(frozen=True)
class TurnEnded(Event):
    """End of the user's turn was declared at `t`; the last voiced frame was at `last_voiced_t`.
    `heard_revision`: the PausedTranscript of this turn that heard every voiced frame of it: it is
    the final transcript, no decode follows (None: none did, the final is decoded now)."""
    last_voiced_t: float = 0.0
    heard_revision: int | None = None


@dataclass(frozen=True)
class VoicePaused(Event):
    """The voice stopped inside an open turn: `pause` of silence at `t` after the last voiced frame
    at `last_voiced_t`. The turn may go on; a transcript of all audio so far can be made now."""
    last_voiced_t: float = 0.0


@dataclass(frozen=True)
class VoiceResumed(Event):
    """Voice again at `t` inside an open turn after a `VoicePaused`: work on the paused audio is stale."""


@dataclass(frozen=True)
class TurnResumed(Event):
    """The user spoke again at `t` (first voiced frame) within the recovery window after the end
    declared at `ended_t`: the SAME turn goes on, its audio continues without a gap."""
    ended_t: float = 0.0


@dataclass(frozen=True)
class ReplyKept(Event):
    """The voice that reopened `turn_id` (`TurnResumed`) ended without a word beyond the request
    answered: the reply, which was already playing and paused at the resume, plays on from there,
    answering the end declared at `ended_t`. (Had it brought words, it would have stopped:
    `Interrupt`.)"""
    ended_t: float = 0.0


@dataclass(frozen=True)
class AudioTurnCue(Event):
    """An audio end-of-turn model's P(the speaker has finished) for turn `turn_id`, judged from
    its audio up to `audio_until_t` (capture time: the voice pause's `t`); `t` is that pause's,
    `took_ms` what the model's call cost, `source` the model ("smart-turn")."""
    p_end_of_turn: float = 0.0
    audio_until_t: float = 0.0
    took_ms: float = 0.0
    source: str = "smart-turn"


@dataclass(frozen=True)
class EndOfTurnEstimate(Event):
    """What the end-of-turn decision rests on (emitted when it changes inside an open turn):
    `p_end_of_turn` (None: no current estimate), the silence it asks for, and `verdict` in words
    ("listening", "sounds finished", "sounds unfinished", "unsure", "unclear words", "checking words",
    "no sentence end", "hearing the voice")."""
    p_end_of_turn: float | None = None
    wait_s: float = 0.0
    verdict: str = ""


@dataclass(frozen=True)
class Interrupt(Event):
    """Stop the reply to `turn_id`: the user spoke over it (barge-in), pressed stop, or began
    a new turn before it was heard."""


@dataclass(frozen=True)
class UserAudio(Event):
    """New audio of the open user turn, in capture order; `t` is the time of its first sample.
    The turn's first UserAudio follows its SpeechStarted and includes the pre-roll.
    `voiced_until_t`: the end of the turn's last voiced frame so far (None: not known)."""
    samples: object = None  # numpy float32, 16 kHz mono; typed loosely to keep numpy out
    voiced_until_t: float | None = None


# --- ASR -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PartialTranscript(Event):
    """A hypothesis while the user speaks: `committed` never changes, `tentative` may."""
    revision: int = 0
    committed: str = ""
    tentative: str = ""

    @property
    def text(self) -> str:
        return " ".join(s for s in (self.committed.strip(), self.tentative.strip()) if s)


@dataclass(frozen=True)
class FinalTranscript(Event):
    text: str = ""


@dataclass(frozen=True)
class PausedTranscript(Event):
    """The transcript of all audio up to a voice pause, through its last word (nothing is held
    back as still growing): `StreamingTranscriber.preview_final()`, the final transcript if the
    turn ends in this silence. PredGen verifies it speculatively; its P(end of turn) goes to the
    end-of-turn decision with `revision` and `audio_until_t` (capture time of the last sample heard).
    `rechecking`: a PauseRechecked for this revision follows (the decision waits for it).
    `p_sentence_end`: the recognizer's P(a sentence ended) after the last word (None: it does
    not say; the text's punctuation stands for it); `p_goes_on`: its P(", ; : …") there, the
    clause going on (None: not said)."""
    revision: int = 0
    text: str = ""
    audio_until_t: float = 0.0
    rechecking: bool = False
    p_sentence_end: float | None = None
    p_goes_on: float | None = None


@dataclass(frozen=True)
class PauseRechecked(Event):
    """Whether the last word of PausedTranscript `revision` was heard again when the same audio was
    decoded a few ms later in (`StreamingTranscriber.preview_steadiness`). Sent after the
    PausedTranscript, so that the check never delays PredGen's verification; the end-of-turn
    decision does not take an unsteady transcript's P(end of turn) for a finished request."""
    revision: int = 0
    steady: bool = True


# --- LLM / PredGen -------------------------------------------------------------------------

@dataclass(frozen=True)
class DraftUpdated(Event):
    """PredGen's draft after verifying and extending against partial `revision`."""
    revision: int = 0
    draft: str = ""
    accepted_tokens: int = 0
    p_end_of_turn: float = 0.0
    # The draft as text, split by this update's verification: `accepted_text` is the old draft's
    # prefix that survived, `rejected_text` the old tail it threw away, `new_text` what was drafted
    # after it (draft == accepted_text + new_text). All empty: the producer did not split it.
    accepted_text: str = ""
    rejected_text: str = ""
    new_text: str = ""
    # Set when the verified prompt was a PausedTranscript: the estimate then covers all audio up
    # to this capture time (the end-of-turn decision only trusts such estimates).
    audio_until_t: float | None = None


@dataclass(frozen=True)
class FirstSentenceReady(Event):
    """The draft's first sentence became complete or changed: a TTS may prepare it."""
    revision: int = 0
    text: str = ""


@dataclass(frozen=True)
class SentenceReady(Event):
    """A sentence of the final reply, fixed; `index` 0 is the first; `start` is its offset in
    the reply's text (what barge-in maps heard audio back onto)."""
    index: int = 0
    text: str = ""
    start: int = 0


@dataclass(frozen=True)
class ReplyDone(Event):
    """The reply is complete as text (no more SentenceReady for this turn). `outcome` is
    accepted | partial | rejected | baseline, or empty (nothing to answer) or failed."""
    text: str = ""
    outcome: str = ""
    ttfs: float | None = None    # final transcript -> first sentence fixed, seconds
    nfetfs: int | None = None    # forward passes in that window


@dataclass(frozen=True)
class TurnClosed(Event):
    """The last word on a turn: what entered the conversation history (`reply_text` as far as
    it was heard). Every turn that ended gets exactly one; an `outcome` of empty or failed enters
    nothing into the history, and unanswered (a new request began before this one was answered)
    enters the request without a reply."""
    user_text: str = ""
    reply_text: str = ""
    interrupted: bool = False
    outcome: str = ""


# --- TTS / playback ------------------------------------------------------------------------

@dataclass(frozen=True)
class AudioChunk(Event):
    """Synthesized audio; `span` is the (start, end) character span of the text it speaks."""
    samples: object = None  # numpy float32 array; typed loosely to keep numpy out of this module
    sample_rate: int = 0
    span: tuple[int, int] = (0, 0)
    sentence_index: int = 0


@dataclass(frozen=True)
class ReplyStarted(Event):
    """The reply's first audio was handed to playback at `t` (barge-in listens from here)."""


@dataclass(frozen=True)
class ReplyHeard(Event):
    """Playback of the reply ended: the user heard `heard_chars` characters of its text (None:
    all of it); `first_output_t` is when its first sample reached the output (None: never)."""
    heard_chars: int | None = None
    interrupted: bool = False
    first_output_t: float | None = None
    underruns: int = 0


@dataclass(frozen=True)
class TurnMetrics(Event):
    """One turn's latency record (see DESIGN.md section 6); None where not measured."""
    values: dict = field(default_factory=dict)


# --- app status (model loading, errors) -----------------------------------------------------

from foresay.engine.errors import ForesayError  # noqa: E402  (kept with the events that use it)


class BadEvent(ForesayError):
    """An event was built with values it cannot carry."""


STATUS_LEVELS = ("info", "warning", "error")


@dataclass(frozen=True)
class StatusMessage(Event):
    """Something to tell the user that belongs to no turn (use turn_id 0): loading, ready, errors."""
    text: str = ""
    level: str = "info"  # one of STATUS_LEVELS

    def __post_init__(self):
        if self.level not in STATUS_LEVELS:
            raise BadEvent(f"StatusMessage level must be one of {STATUS_LEVELS}, got {self.level!r}")


@dataclass(frozen=True)
class AssistantIntro(Event):
    """What the loaded chat model knows and questions it answers, for a model with a small domain
    (the demo's), shown before the first turn (use turn_id 0). Empty for a general model."""
    knows: str = ""
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoadProgress(Event):
    """Progress of loading or downloading one component's model (use turn_id 0).

    `done` and `total` are in the same unit (bytes, files, steps); `total` None means unknown.
    A component is loaded when `done == total`.
    """
    component: str = ""  # e.g. "asr", "llm", "tts"
    label: str = ""      # what is loading, e.g. the model id
    done: float = 0.0
    total: float | None = None

    def __post_init__(self):
        if not self.component:
            raise BadEvent("LoadProgress needs a component name")
        if self.done < 0 or (self.total is not None and (self.total <= 0 or self.done > self.total)):
            raise BadEvent(f"LoadProgress for {self.component}: need 0 <= done <= total, "
                             f"got done={self.done}, total={self.total}")

    @property
    def fraction(self) -> float | None:
        return None if self.total is None else self.done / self.total

    @property
    def finished(self) -> bool:
        return self.total is not None and self.done >= self.total


# --- the user's controls (turn_id 0: they belong to no turn; `t` is when the user acted) ------

@dataclass(frozen=True)
class TalkPressed(Event):
    """Push-to-talk: the talk key went down at `t`; a turn starts there (and a reply playing stops)."""


@dataclass(frozen=True)
class TalkReleased(Event):
    """Push-to-talk: the talk key came up at `t`; the turn ends there."""


@dataclass(frozen=True)
class ModeChanged(Event):
    """The user switched how turns are delimited, from time `t` of the audio on."""
    mode: ListeningMode = ListeningMode.HANDS_FREE

    def __post_init__(self):
        try:
            object.__setattr__(self, "mode", ListeningMode(self.mode))
        except ValueError:
            raise BadEvent(f"ModeChanged mode must be one of {[m.value for m in ListeningMode]}, "
                           f"got {self.mode!r}") from None


@dataclass(frozen=True)
class MuteChanged(Event):
    """The microphone is muted (silence goes on instead of its audio) or heard again, from `t`."""
    muted: bool = False


@dataclass(frozen=True)
class NewConversation(Event):
    """The user started a new conversation: the history so far is set aside."""

"""The typed messages that flow between Foresay's stages.

Every message is a small frozen dataclass. `turn_id` names the user turn it belongs to;
messages that a newer one can supersede carry a `revision`, and stale work is recognised by
comparing `(turn_id, revision)`. Times are seconds on the monotonic clock the metrics use
(`time.monotonic()`); audio timestamps are mapped onto it by the audio stage.
"""
from __future__ import annotations

from dataclasses import dataclass, field


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
    """End of the user's turn was declared at `t`; the last voiced frame was at `last_voiced_t`."""
    last_voiced_t: float = 0.0


@dataclass(frozen=True)
class Interrupt(Event):
    """The user spoke over the assistant (barge-in)."""


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


# --- LLM / PredGen -------------------------------------------------------------------------

@dataclass(frozen=True)
class DraftUpdated(Event):
    """PredGen's draft after verifying and extending against partial `revision`."""
    revision: int = 0
    draft: str = ""
    accepted_tokens: int = 0
    p_end_of_turn: float = 0.0


@dataclass(frozen=True)
class FirstSentenceReady(Event):
    """The draft's first sentence became complete or changed: a TTS may prepare it."""
    revision: int = 0
    text: str = ""


@dataclass(frozen=True)
class SentenceReady(Event):
    """A sentence of the final reply, fixed; `index` 0 is the first."""
    index: int = 0
    text: str = ""


@dataclass(frozen=True)
class ReplyDone(Event):
    text: str = ""
    outcome: str = ""  # accepted | partial | rejected | baseline


# --- TTS / playback ------------------------------------------------------------------------

@dataclass(frozen=True)
class AudioChunk(Event):
    """Synthesized audio; `span` is the (start, end) character span of the text it speaks."""
    samples: object = None  # numpy float32 array; typed loosely to keep numpy out of this module
    sample_rate: int = 0
    span: tuple[int, int] = (0, 0)
    sentence_index: int = 0


@dataclass(frozen=True)
class TurnMetrics(Event):
    """One turn's latency record (see DESIGN.md section 6); None where not measured."""
    values: dict = field(default_factory=dict)

"""The conversation as the window shows it: finished turns, the live partial, the current draft.

Plain Python, no Qt: the bridge feeds it events in the GUI thread and the window reads it on a
timer. `version` grows on every change, so a reader redraws only when something changed. Stale
events (an older turn, or a revision older than the one shown) are dropped, never shown.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from foresay.engine.events import (
    AssistantIntro, AudioChunk, DraftUpdated, EndOfTurnEstimate, Event, FinalTranscript, FirstSentenceReady,
    Interrupt, PartialTranscript, ReplyDone, ReplyHeard, ReplyKept, SentenceReady, SpeechStarted, TurnEnded,
    TurnResumed,
)
from foresay.engine.sequences import words

LISTENING, USER_SPEAKING, THINKING, SPEAKING = "listening", "user speaking", "thinking", "speaking"


@dataclass(frozen=True)
class ChatTurn:
    role: str          # "user" | "assistant"
    turn_id: int
    text: str
    outcome: str = ""  # assistant turns: accepted | partial | rejected | baseline
    interrupted: bool = False
    done: bool = True  # False while an assistant reply is still arriving sentence by sentence


@dataclass(frozen=True)
class DraftParts:
    """PredGen's current draft split by its latest verification (see DraftUpdated)."""
    turn_id: int = -1
    revision: int = -1
    accepted: str = ""  # the old draft's prefix that survived verification
    rejected: str = ""  # the old draft's tail it threw away
    new: str = ""       # drafted after the accepted prefix
    first_sentence: str = ""  # set once the draft's first sentence is complete (TTS may prepare it)
    p_end_of_turn: float = 0.0
    verdict: str = ""   # the end-of-turn decision's words for this turn ("" before an estimate)

    @property
    def text(self) -> str:
        return self.accepted + self.new


@dataclass(frozen=True)
class Partial:
    turn_id: int = -1
    revision: int = -1
    committed: str = ""
    tentative: str = ""


def split_draft(previous: str, event: DraftUpdated) -> tuple[str, str, str]:
    """(accepted, rejected, new) for a draft update.

    Uses the event's own split when the producer filled it in. Otherwise it reads the split from
    the text alone: the accepted part is the longest common prefix of the old and new draft, cut
    back to the start of the word where they differ (a word that changed counts as redrafted)."""
    if event.accepted_text or event.rejected_text or event.new_text:
        return event.accepted_text, event.rejected_text, event.new_text
    new = event.draft
    n = 0
    for a, b in zip(previous, new):
        if a != b:
            break
        n += 1
    if n < len(previous) and n < len(new):  # diverged inside a word: that whole word is redrafted
        n = previous.rfind(" ", 0, n) + 1
    return new[:n], previous[n:], new[n:]


@dataclass
class ConversationModel:
    turns: list[ChatTurn] = field(default_factory=list)
    partial: Partial = field(default_factory=Partial)
    draft: DraftParts = field(default_factory=DraftParts)
    phase: str = LISTENING
    current_turn: int = -1
    version: int = 0
    final_turn: int = -1  # the latest turn whose final transcript arrived: its partials are stale
    intro: AssistantIntro = field(default_factory=lambda: AssistantIntro(0, 0.0))  # the loaded chat model's
    reopened: int = -1    # a turn the user went on with after its end: its reply may yet be withdrawn
    played_out: int = -1  # the latest turn whose reply finished playing

    def apply(self, event: Event) -> bool:
        """Updates the model from one event; returns whether anything changed."""
        handler = self._handlers.get(type(event))
        if handler is None:
            return False
        changed = handler(self, event)
        if changed:
            self.version += 1
        return changed

    def _enter_turn(self, turn_id: int) -> bool:
        """Moves on to `turn_id` if it is newer; False if it is an older, finished user turn."""
        if turn_id < self.current_turn:
            return False
        if turn_id > self.current_turn:
            self.current_turn = turn_id
            self.partial = Partial(turn_id)
            self.draft = DraftParts(turn_id)
        return True

    def _on_intro(self, e: AssistantIntro) -> bool:
        if e == self.intro:
            return False
        self.intro = e
        return True

    def _on_speech_started(self, e: SpeechStarted) -> bool:
        if not self._enter_turn(e.turn_id):
            return False
        self.phase = USER_SPEAKING
        return True

    def _on_partial(self, e: PartialTranscript) -> bool:
        if not self._enter_turn(e.turn_id):
            return False
        if e.revision <= self.partial.revision or e.turn_id == self.final_turn:
            return False
        self.partial = Partial(e.turn_id, e.revision, e.committed, e.tentative)
        self.phase = USER_SPEAKING
        return True

    def _on_draft(self, e: DraftUpdated) -> bool:
        if not self._enter_turn(e.turn_id):
            return False
        if e.revision < self.draft.revision:
            return False
        accepted, rejected, new = split_draft(self.draft.text, e)
        keep_first = self.draft.first_sentence if (accepted + new).startswith(self.draft.first_sentence) else ""
        self.draft = DraftParts(e.turn_id, e.revision, accepted, rejected, new, keep_first, e.p_end_of_turn,
                                self.draft.verdict)
        return True

    def _on_estimate(self, e: EndOfTurnEstimate) -> bool:
        if not self._enter_turn(e.turn_id):
            return False
        verdict = "" if e.p_end_of_turn is None else e.verdict
        if verdict == self.draft.verdict:
            return False
        self.draft = replace(self.draft, verdict=verdict)
        return True

    def _on_turn_resumed(self, e: TurnResumed) -> bool:
        """The user went on after an end: the same turn continues and its partials count again.
        Its reply stays until it is stopped (`Interrupt`: the user said more) or kept."""
        if not self._enter_turn(e.turn_id):
            return False
        self.reopened = e.turn_id
        if self.final_turn == e.turn_id:
            self.final_turn = -1
        self.phase = USER_SPEAKING
        return True

    def _on_reply_kept(self, e: ReplyKept) -> bool:
        if e.turn_id != self.reopened:
            return False
        self.reopened = -1
        if e.turn_id == self.current_turn:
            self.phase = LISTENING if self.played_out == e.turn_id else SPEAKING
        return True

    def _on_first_sentence(self, e: FirstSentenceReady) -> bool:
        if not self._enter_turn(e.turn_id):
            return False
        if e.revision < self.draft.revision:
            return False
        self.draft = replace(self.draft, first_sentence=e.text)
        return True

    def _on_turn_ended(self, e: TurnEnded) -> bool:
        if not self._enter_turn(e.turn_id):
            return False
        self.phase = THINKING
        return True

    def _on_final(self, e: FinalTranscript) -> bool:
        if not self._enter_turn(e.turn_id):
            return False
        line = ChatTurn("user", e.turn_id, e.text)
        mine = next((i for i, t in enumerate(self.turns) if t.role == "user" and t.turn_id == e.turn_id), None)
        if mine is not None and words(e.text):  # heard again, after its reply's line
            self.turns[mine] = line
        elif mine is not None:
            del self.turns[mine]
        elif words(e.text):  # no words (a breath, room noise): no line in the chat
            self.turns.append(line)
        self.partial = Partial(e.turn_id, self.partial.revision)
        self.final_turn = e.turn_id
        self.phase = THINKING
        return True

    def _assistant_index(self, turn_id: int) -> int | None:
        for i in range(len(self.turns) - 1, -1, -1):
            if self.turns[i].role == "assistant" and self.turns[i].turn_id == turn_id:
                return i
        return None

    def _on_sentence(self, e: SentenceReady) -> bool:
        i = self._assistant_index(e.turn_id)
        if i is None:
            self.turns.append(ChatTurn("assistant", e.turn_id, e.text.strip(), done=False))
        else:
            old = self.turns[i]
            if old.done:
                return False
            self.turns[i] = replace(old, text=f"{old.text} {e.text.strip()}".strip())
        return True

    def _on_reply_done(self, e: ReplyDone) -> bool:
        i = self._assistant_index(e.turn_id)
        interrupted = self.turns[i].interrupted if i is not None else False
        turn = ChatTurn("assistant", e.turn_id, e.text.strip(), e.outcome, interrupted)
        if e.outcome == "empty":  # nothing was said, nothing answered
            if i is not None:
                del self.turns[i]
        elif i is None:
            self.turns.append(turn)
        else:
            self.turns[i] = turn
        if e.turn_id == self.current_turn:
            self.draft = DraftParts(e.turn_id, self.draft.revision)
            if self.phase != USER_SPEAKING:
                self.phase = LISTENING
        return True

    def _on_audio(self, e: AudioChunk) -> bool:
        if self.phase == SPEAKING or e.turn_id != self.current_turn:
            return False
        self.phase = SPEAKING
        return True

    def _on_reply_heard(self, e: ReplyHeard) -> bool:
        """Playback ended. The reply's text is often complete (ReplyDone) before its audio has
        played, so only this ends "speaking"."""
        self.played_out = max(self.played_out, e.turn_id)
        if e.turn_id != self.current_turn or self.phase != SPEAKING:
            return False
        self.phase = LISTENING
        return True

    def _on_interrupt(self, e: Interrupt) -> bool:
        """Marks the reply that was talked over: the one of `turn_id`, else the latest one. A
        reopened turn's reply is withdrawn instead: the turn will be answered again, whole."""
        if e.turn_id == self.reopened:
            self.reopened = -1
            self.turns = [t for t in self.turns if not (t.role == "assistant" and t.turn_id == e.turn_id)]
            self.phase = USER_SPEAKING
            return True
        i = self._assistant_index(e.turn_id)
        if i is None:
            i = next((j for j in range(len(self.turns) - 1, -1, -1) if self.turns[j].role == "assistant"), None)
        if i is not None:
            self.turns[i] = replace(self.turns[i], interrupted=True)
        self.phase = USER_SPEAKING
        return True

    @property
    def live_user_text(self) -> tuple[str, str]:
        """(committed, tentative) of the partial transcript still being spoken; empty when none."""
        if self.phase != USER_SPEAKING:
            return "", ""
        return self.partial.committed, self.partial.tentative

    _handlers = {
        AssistantIntro: _on_intro,
        SpeechStarted: _on_speech_started,
        PartialTranscript: _on_partial,
        DraftUpdated: _on_draft,
        FirstSentenceReady: _on_first_sentence,
        TurnEnded: _on_turn_ended,
        TurnResumed: _on_turn_resumed,
        ReplyKept: _on_reply_kept,
        EndOfTurnEstimate: _on_estimate,
        FinalTranscript: _on_final,
        SentenceReady: _on_sentence,
        ReplyDone: _on_reply_done,
        AudioChunk: _on_audio,
        ReplyHeard: _on_reply_heard,
        Interrupt: _on_interrupt,
    }

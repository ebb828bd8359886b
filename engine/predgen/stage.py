"""The LLM stage of the pipeline: PredGen driven by transcript events, on its own worker thread.

Partial transcripts are coalesced (only the newest waits; an update in flight is told to stop
extending as soon as a newer one arrives); the final transcript finalizes the turn and the reply
is produced sentence by sentence, each a `SentenceReady` event, then `ReplyDone`. When the
reply's playback ends (`ReplyHeard`), the turn enters the history as far as the user heard it
and `TurnClosed` says what entered. All model work runs on the stage's worker thread, in order;
no model is touched on the event loop. Speculation yields to urgent work on the shared compute
gate (an ASR decode, Smart Turn): it stops extending its draft, and goes on once the gate is free
or with the next partial, whichever comes first. After the voice pauses no partial may come for
the rest of the silence: a draft left unfinished there would meet the end of the turn without its
first sentence, whose audio is then synthesized after the end.

Two requests are two turns, and nothing the user said is dropped. Whether new voice goes on
with a turn (`TurnResumed`: the same turn speculates again) or starts a new one (`SpeechStarted`)
is the turn-taking machine's decision, not this stage's. A reply the user has not heard yet stops
at the resume. One already playing is held (the voice stage pauses its audio): a breath or a
laugh after a request must not cost the answer. It stops (`Interrupt`) once a transcript of the
turn says more than the request answered, and plays on from where it paused (`ReplyKept`) when
the turn ends again without that. A new turn closes the
earlier one: its reply is interrupted if the user has not heard any of it yet (the request and
the reply as far as heard enter the history), and a request whose final transcript comes only
after the next turn began is not answered; its words enter the history (outcome "unanswered").
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from foresay.engine.compute_gate import ComputeGate
from foresay.engine.errors import ForesayError
from foresay.engine.events import (DraftUpdated, Event, FinalTranscript, FirstSentenceReady, Interrupt,
                                   NewConversation, PartialTranscript, PausedTranscript, ReplyDone, ReplyHeard,
                                   ReplyKept, ReplyStarted, SentenceReady, SpeechStarted, StatusMessage, TurnClosed,
                                   TurnResumed)
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn, TurnRecord, UpdateRecord
from foresay.engine.predgen.verifiers import Verifier
from foresay.engine.sequences import words
from foresay.engine.stage import Stage

log = logging.getLogger(__name__)


def partial_prompt(event: PartialTranscript | PausedTranscript) -> str:
    """The committed words plus the tentative ones, without a last word that may still grow;
    all of a paused transcript (the voice stopped: its last word is whole)."""
    if isinstance(event, PausedTranscript):
        return " ".join(event.text.split())
    tentative = event.tentative.split()
    return " ".join(event.committed.split() + tentative[:-1])


def says_more(transcript: str, answered: str) -> bool:
    """Whether a transcript of a resumed turn holds words the answered request did not: anything
    but the request's own words, from the first, or fewer of them."""
    heard, request = words(transcript), words(answered)
    return heard != request[:len(heard)]


CLOSE_WAIT_STEPS = 200  # of 10 ms: how long a new answer waits for an earlier reply's playback to stop
GATE_POLL_S = 0.005     # how often yielded speculation looks whether urgent work is done


class PredGenStage(Stage):
    consumes = (SpeechStarted, PartialTranscript, PausedTranscript, FinalTranscript, ReplyStarted, ReplyHeard,
                Interrupt, TurnResumed, NewConversation)
    name = "language model"
    worker = "llm"

    def __init__(self, conv: Conversation, emit: Callable[[Event], None],
                 config: PredGenConfig = PredGenConfig(), verifier: Verifier | None = None,
                 speculate: bool = True, clock: Callable[[], float] = time.monotonic,
                 gate: ComputeGate | None = None):
        """`speculate=False` gives the baseline: nothing happens before the final transcript.
        `gate`: the processor shared with urgent work (the ASR's decodes); while that holds or
        waits for it, speculation stops extending its draft."""
        super().__init__(emit)
        self.conv = conv
        self.config = config
        self.verifier = verifier
        self.speculate = speculate
        self.clock = clock
        self.gate = gate
        self.turn: PredGenTurn | None = None   # created and used on the worker thread only
        self._newest: PartialTranscript | PausedTranscript | None = None
        self._speculation: asyncio.Task | None = None
        self._reply: asyncio.Task | None = None
        self._reply_turn: int | None = None   # the turn being answered, until it is closed
        self._reply_text = ""                 # what it answers
        self._answering: PredGenTurn | None = None  # its state once finalized
        self._heard_from: set[int] = set()    # turns whose reply reached playback
        self._closing: dict[int, asyncio.Task] = {}  # turns being entered into the history
        self._latest_turn = 0                 # newest turn the user started
        self._restart: int | None = None      # a resumed turn: its state is rebuilt before use
        self._unspeculated: int | None = None  # a turn whose speculation failed (answered plainly)
        self._held: TurnResumed | None = None  # a resumed turn whose playing reply waits on its words
        self._held_heard: ReplyHeard | None = None  # its playback's end, closed once the hold resolves
        self._finals: dict[int, int] = {}     # turn -> final transcripts received (yielded speculation stops at one)

    # --- the stage contract ------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        if isinstance(event, SpeechStarted):
            self._latest_turn = max(self._latest_turn, event.turn_id)
            if self._reply_turn is not None and self._reply_turn < event.turn_id \
                    and self._reply_turn not in self._heard_from:
                self.emit(Interrupt(self._reply_turn, event.t))  # a new request: the unheard reply stops
        elif isinstance(event, (PartialTranscript, PausedTranscript)):
            if self._is_held(event.turn_id) and says_more(partial_prompt(event), self._reply_text):
                self._stop_held(event.t)
            self._on_partial(event)
        elif isinstance(event, FinalTranscript):
            self._finals[event.turn_id] = self._finals.get(event.turn_id, 0) + 1
            if self._is_held(event.turn_id):
                if not says_more(event.text, self._reply_text):
                    self._keep_held()
                    return
                self._stop_held(event.t)
            self.spawn(self._answer(event))
        elif isinstance(event, ReplyStarted):
            self._heard_from.add(event.turn_id)
        elif isinstance(event, ReplyHeard):
            if self._is_held(event.turn_id):
                self._held_heard = event
            elif event.turn_id == self._reply_turn:
                self._on_heard(event)
        elif isinstance(event, Interrupt):
            if self._is_held(event.turn_id):  # the user stopped it, or talked over it: as if the turn said more
                self._stop_held(event.t, announce=False)
            self._interrupt(event.turn_id)
        elif isinstance(event, TurnResumed):
            self._resume(event)
        elif isinstance(event, NewConversation):  # history gone (the system prompt's cache is kept)
            self.spawn(self.run_in_worker(self.conv.reset))

    async def start(self) -> None:
        await self.run_in_worker(self.conv.lm.warmup)
        await self.run_in_worker(self.conv.prefill_history)

    # --- speculation ----------------------------------------------------------------------------

    def _turn_for(self, turn_id: int) -> PredGenTurn:
        """The turn's PredGen state (worker thread: building it may prefill the history)."""
        if self.turn is not None and self.turn.turn_id == turn_id and self._restart == turn_id:
            self._restart = None
            old = self.turn
            self.turn = None
            new = self._turn_for(turn_id)
            if old.prompt is not None and old.draft:
                new.adopt_draft(old.prompt.user_text, old.draft)  # a finished turn cannot go on itself
            return new
        if self.turn is None or self.turn.turn_id != turn_id:
            def first_sentence(text: str, revision: int) -> None:  # called on the worker thread
                self.emit_from_worker(FirstSentenceReady(turn_id, self.clock(), revision, text))
            self.turn = PredGenTurn(self.conv, self.config, self.verifier, on_first_sentence=first_sentence,
                                    clock=self.clock, turn_id=turn_id)
        return self.turn

    def _on_partial(self, event: PartialTranscript | PausedTranscript) -> None:
        if not self.speculate or event.turn_id < self._latest_turn:
            return
        if self.turn is not None and self.turn.turn_id == event.turn_id:
            self.turn.announce(event.revision)  # an update in flight stops extending
        self._newest = event
        if self._speculation is None or self._speculation.done():
            self._speculation = self.spawn(self._speculate())

    async def _speculate(self) -> None:
        while self._newest is not None:
            event, self._newest = self._newest, None
            text = partial_prompt(event)
            if not text or event.turn_id == self._reply_turn and not self._is_held(event.turn_id):
                continue
            should_stop = self.gate.should_yield if self.gate is not None else None
            verified: list[UpdateRecord] = []

            def on_verified(record: UpdateRecord, event=event) -> None:  # the worker thread
                verified.append(record)
                self.emit_from_worker(self._draft_updated(event, record))

            def update():
                return self._turn_for(event.turn_id).update(text, event.revision, should_stop=should_stop,
                                                            on_verified=on_verified)
            if self._unspeculated == event.turn_id:
                continue
            finals = self._finals.get(event.turn_id, 0)
            try:
                record = await self.run_in_worker(update)
            except ForesayError as exc:  # e.g. the LLM server failed: this turn replies without speculating
                self._unspeculated = event.turn_id
                self.emit(StatusMessage(0, self.clock(), f"speculation stopped for this turn: {exc}", "warning"))
                continue
            paused = isinstance(event, PausedTranscript)  # its estimate matters even when no pass ran
            drafted = record.passes > (verified[0].passes if verified else 0)  # beyond what was sent
            if not record.stale and (drafted or paused and not verified and record.p_end_of_turn is not None):
                self.emit(self._draft_updated(event, record))
            if record.yielded and await self._gate_freed(event.turn_id, finals):
                self._newest = event  # nothing newer came: go on drafting on the same transcript

    def _draft_updated(self, event: PartialTranscript | PausedTranscript, record: UpdateRecord) -> DraftUpdated:
        until = event.audio_until_t if isinstance(event, PausedTranscript) else None
        return DraftUpdated(event.turn_id, self.clock(), event.revision, record.draft_text, record.accepted,
                            record.p_end_of_turn or 0.0, record.accepted_text, record.rejected_text,
                            record.new_text, until)

    async def _gate_freed(self, turn_id: int, finals: int) -> bool:
        """Wait while urgent work holds the shared processor; True once it is free, False as soon
        as a newer transcript or a final transcript makes going on with the old draft moot."""
        while True:
            if self._newest is not None or self._finals.get(turn_id, 0) != finals:
                return False
            if self.gate is None or not self.gate.should_yield():
                return True
            await asyncio.sleep(GATE_POLL_S)

    async def _speculated(self) -> None:
        """Wait until every partial received so far has been processed (or dropped as stale)."""
        while self._speculation is not None and not self._speculation.done():
            await asyncio.shield(self._speculation)

    # --- the reply ------------------------------------------------------------------------------

    async def _answer(self, final: FinalTranscript) -> None:
        turn_id, text = final.turn_id, " ".join(final.text.split())
        if not words(text):  # only marks (". . ."): nothing was said
            text = ""
        if turn_id < self._latest_turn and text:  # a newer request began: this one is not answered
            await self._enter_unanswered(turn_id, text)
            return
        if not text:
            self.emit(ReplyDone(turn_id, self.clock(), "", "empty"))
            self._emit_closed(turn_id, "empty", "")
            return
        await self._close_earlier(turn_id)
        self._reply_turn, self._reply_text, self._answering = turn_id, text, None
        self._reply = asyncio.current_task()
        try:
            await self._reply_to(FinalTranscript(turn_id, final.t, text))
        except asyncio.CancelledError:
            pass  # interrupted: the turn is closed by _interrupt or by ReplyHeard
        except ForesayError as exc:
            self._fail(turn_id, str(exc))
        except Exception as exc:  # reported; the next turn still works
            log.exception("the reply to turn %d failed", turn_id)
            self._fail(turn_id, f"the reply to turn {turn_id} failed: {exc}")

    async def _close_earlier(self, turn_id: int) -> None:
        """Every earlier turn is closed before this one takes the reply's place (closing reads
        the reply state this turn is about to replace). A reply still playing (the user heard
        some of it, so the new request did not stop it, and did not talk over it loudly enough to
        interrupt) stops now, and its turn closes as far as heard."""
        earlier = self._reply_turn
        if earlier is not None and earlier < turn_id:
            if self._is_held(earlier):  # its turn never ended again: its words stand as answered
                self._keep_held()
            self.emit(Interrupt(earlier, self.clock()))
            for _ in range(CLOSE_WAIT_STEPS):  # the speaker answers with ReplyHeard
                if self._reply_turn != earlier:
                    break
                await asyncio.sleep(0.01)
            else:  # no speaker said how much was heard: all of it was
                self._start_closing(earlier, None, True)
        for closing in [task for closed, task in self._closing.items() if closed < turn_id]:
            await asyncio.shield(closing)

    def _fail(self, turn_id: int, text: str) -> None:
        self.emit(StatusMessage(0, self.clock(), text, "error"))
        self.emit(ReplyDone(turn_id, self.clock(), "", "failed"))
        self._reply_turn = None
        self._emit_closed(turn_id, "failed", "")

    async def _reply_to(self, event: FinalTranscript) -> TurnRecord:
        """Finish the turn: first sentence as soon as it is fixed, then the rest of the reply.
        Latencies count from the moment the final transcript arrived here."""
        arrived_at = self.clock()
        self._newest = None
        await self._speculated()

        def finalize():
            if self._unspeculated == event.turn_id:  # its state may be half-made: start it afresh
                self.turn = None
            turn = self._turn_for(event.turn_id)
            return turn, turn.finalize(event.text, arrived_at=arrived_at,
                                       baseline=not self.speculate or self._unspeculated == event.turn_id)
        turn, record = await self.run_in_worker(finalize)
        self._answering = turn  # the next turn's speculation may take `self.turn` meanwhile
        if turn.sentences:
            first = turn.sentences[0]
            self.emit(SentenceReady(event.turn_id, self.clock(), 0, first.text, first.start))
        while (sentence := await self.run_in_worker(turn.next_sentence)) is not None:
            self.emit(SentenceReady(event.turn_id, self.clock(), len(turn.sentences) - 1,
                                    sentence.text, sentence.start))
        self.emit(ReplyDone(event.turn_id, self.clock(), self.conv.lm.decode(turn.reply_ids()),
                            record.outcome, record.ttfs, record.nfetfs))
        return record

    def _resume(self, event: TurnResumed) -> None:
        """The user went on speaking: the turn speculates again from where its draft was. A reply
        not yet heard stops (nothing enters the history); one already playing is held until the
        turn's words say whether the user went on with the request."""
        self._restart = event.turn_id
        if self._reply_turn != event.turn_id or self._is_held(event.turn_id):
            return
        if event.turn_id in self._heard_from:
            self._held = event
            return
        self._stop_reply(event.turn_id, event.t)

    def _is_held(self, turn_id: int) -> bool:
        return self._held is not None and self._held.turn_id == turn_id

    def _stop_held(self, t: float, announce: bool = True) -> None:
        """The resumed turn said more than its request: the held reply stops and is not kept;
        the turn is answered again, with all its words, when it ends."""
        turn_id, self._held, self._held_heard = self._held.turn_id, None, None
        self._stop_reply(turn_id, t, announce)

    def _keep_held(self) -> None:
        """The resumed turn ended with no new words: its reply answered it, and plays on."""
        held, heard = self._held, self._held_heard
        self._held = self._held_heard = None
        self.emit(ReplyKept(held.turn_id, self.clock(), held.ended_t))
        if heard is not None:
            self._on_heard(heard)

    def _stop_reply(self, turn_id: int, t: float, announce: bool = True) -> None:
        """The reply to a turn that goes on stops unheard-of: nothing of it enters the history."""
        self._reply_turn = None
        if self._reply is not None and not self._reply.done():
            self._reply.cancel()
        self._heard_from.discard(turn_id)
        if announce:
            self.emit(Interrupt(turn_id, t))

    def _on_heard(self, event: ReplyHeard) -> None:
        self._start_closing(event.turn_id, event.heard_chars if event.interrupted else None, event.interrupted)

    def _interrupt(self, turn_id: int) -> None:
        if turn_id != self._reply_turn:
            return
        if self._reply is not None and not self._reply.done():
            self._reply.cancel()
        if turn_id not in self._heard_from:  # nothing reached the user: its request and no reply enter the history
            self._start_closing(turn_id, 0, True)

    def _start_closing(self, turn_id: int, heard_chars: int | None, interrupted: bool) -> None:
        self._closing = {k: task for k, task in self._closing.items() if not task.done()}
        self._closing[turn_id] = self.spawn(self._close(turn_id, heard_chars, interrupted))

    async def _close(self, turn_id: int, heard_chars: int | None, interrupted: bool) -> None:
        """Enter the turn into the history, the reply as far as it was heard."""
        if self._reply_turn != turn_id:
            return
        self._reply_turn = None
        if self._reply is not None and not self._reply.done():
            await asyncio.gather(self._reply, return_exceptions=True)
        turn = self._answering
        if turn is None or turn.turn_id != turn_id or turn.record is None:
            if interrupted and self._reply_text:  # stopped before its reply was made
                await self._enter_unanswered(turn_id, self._reply_text)
            else:
                self._emit_closed(turn_id, "failed", "")
            return
        reply = await asyncio.shield(self.run_in_worker(turn.commit, heard_chars))
        self.emit(TurnClosed(turn_id, self.clock(), turn.prompt.user_text, reply, interrupted,
                             turn.record.outcome))

    async def _enter_unanswered(self, turn_id: int, text: str) -> None:
        """A request the user followed with a new one before it was answered: its words enter the
        history (the next reply knows them), without a reply."""
        def enter() -> None:
            self.conv.commit_turn(self.conv.prompt(text), [])
        await asyncio.shield(self.run_in_worker(enter))
        self.emit(TurnClosed(turn_id, self.clock(), text, "", True, "unanswered"))

    def _emit_closed(self, turn_id: int, outcome: str, user_text: str) -> None:
        self.emit(TurnClosed(turn_id, self.clock(), user_text, "", False, outcome))

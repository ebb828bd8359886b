"""The LLM stage of the pipeline: PredGen driven by transcript events, on its own worker thread.

Partial transcripts are coalesced (only the newest waits; an update in flight is told to stop
extending as soon as a newer one arrives); the final transcript finalizes the turn and the reply
is produced sentence by sentence, each a `SentenceReady` event. Cancelling the task that awaits
`on_final` stops the reply between sentences (barge-in); `commit` then enters into the history
only what the user heard. All model work runs on one dedicated thread, in order.
"""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from foresay.engine.events import (DraftUpdated, Event, FinalTranscript, FirstSentenceReady,
                                   PartialTranscript, ReplyDone, SentenceReady)
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn, TurnRecord
from foresay.engine.predgen.verifiers import Verifier


def partial_prompt(event: PartialTranscript) -> str:
    """The committed words plus the tentative ones, without a last word that may still grow."""
    tentative = event.tentative.split()
    return " ".join(event.committed.split() + tentative[:-1])


class PredGenStage:
    def __init__(self, conv: Conversation, emit: Callable[[Event], None],
                 config: PredGenConfig = PredGenConfig(), verifier: Verifier | None = None,
                 speculate: bool = True, clock: Callable[[], float] = time.monotonic,
                 yield_to: Callable[[], bool] | None = None):
        """`speculate=False` gives the baseline: nothing happens before the final transcript.
        `yield_to()`: while it is true (e.g. the ASR is decoding on the same cores or GPU),
        speculation stops extending its draft; the next partial resumes it."""
        self.conv = conv
        self.emit = emit
        self.config = config
        self.verifier = verifier
        self.speculate = speculate
        self.clock = clock
        self.yield_to = yield_to
        self.turn: PredGenTurn | None = None
        self.records: list[TurnRecord] = []
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="foresay-llm")
        self._newest: PartialTranscript | None = None
        self._speculation: asyncio.Task | None = None

    async def _run(self, fn, *args, **kwargs):
        return await asyncio.get_running_loop().run_in_executor(self._executor, lambda: fn(*args, **kwargs))

    def _turn_for(self, turn_id: int) -> PredGenTurn:
        if self.turn is None or self.turn.turn_id != turn_id:
            loop = asyncio.get_running_loop()

            def first_sentence(text: str, revision: int) -> None:  # called on the worker thread
                loop.call_soon_threadsafe(self.emit, FirstSentenceReady(turn_id, self.clock(), revision, text))
            self.turn = PredGenTurn(self.conv, self.config, self.verifier, on_first_sentence=first_sentence,
                                    clock=self.clock, turn_id=turn_id)
        return self.turn

    async def warmup(self) -> None:
        await self._run(self.conv.lm.warmup)
        await self._run(self.conv.prefill_history)

    def on_partial(self, event: PartialTranscript) -> None:
        if not self.speculate:
            return
        turn = self._turn_for(event.turn_id)
        turn.announce(event.revision)
        self._newest = event
        if self._speculation is None or self._speculation.done():
            self._speculation = asyncio.get_running_loop().create_task(self._speculate())

    async def _speculate(self) -> None:
        while self._newest is not None:
            event, self._newest = self._newest, None
            text = partial_prompt(event)
            turn = self.turn
            if not text or turn is None or turn.turn_id != event.turn_id:
                continue
            record = await self._run(turn.update, text, event.revision, should_stop=self.yield_to)
            if not record.stale and record.passes:
                self.emit(DraftUpdated(event.turn_id, self.clock(), event.revision, record.draft_text,
                                       record.accepted, record.p_end_of_turn or 0.0,
                                       record.accepted_text, record.rejected_text, record.new_text))

    async def settled(self) -> None:
        """Wait until every partial received so far has been processed (or dropped as stale)."""
        while self._speculation is not None and not self._speculation.done():
            await asyncio.shield(self._speculation)

    async def on_final(self, event: FinalTranscript) -> TurnRecord:
        """Finish the turn: first sentence as soon as it is fixed, then the rest of the reply.
        Latencies count from the moment the final transcript arrived here."""
        arrived_at = self.clock()
        self._newest = None
        await self.settled()
        turn = self._turn_for(event.turn_id)
        record = await self._run(turn.finalize, event.text, arrived_at=arrived_at,
                                 baseline=not self.speculate)
        self.records.append(record)
        if turn.sentences:
            first = turn.sentences[0]
            self.emit(SentenceReady(event.turn_id, self.clock(), 0, first.text, first.start))
        while (sentence := await self._run(turn.next_sentence)) is not None:
            self.emit(SentenceReady(event.turn_id, self.clock(), len(turn.sentences) - 1,
                                    sentence.text, sentence.start))
        self.emit(ReplyDone(event.turn_id, self.clock(), self.conv.lm.decode(turn.reply_ids()),
                            record.outcome))
        return record

    async def commit(self, heard_chars: int | None = None) -> str:
        """Enter the finished (or interrupted) turn into the history; returns the reply text kept."""
        if self.turn is None or self.turn.record is None:
            return ""
        return await self._run(self.turn.commit, heard_chars)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

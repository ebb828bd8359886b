"""One user turn of PredGen: speculate on partial transcripts, then finish on the final one.

The pipeline drives it from a worker thread: `update()` on each partial transcript, `finalize()`
at the end of the turn, then `next_sentence()` until it returns None. Between calls the state is
explicit: the prompt the draft belongs to, the draft tokens whose KV is cached after that prompt
(`tokens`), and the next draft token, known but not yet run through the model (`pending`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from foresay.engine.errors import ForesayError
from foresay.engine.predgen.continuation import Continuation, ContinuationConfig, ContinuationStats
from foresay.engine.predgen.strategies import make_continuation, prepare_continuation
from foresay.engine.predgen.conversation import Conversation, Prompt
from foresay.engine.predgen.verifiers import GreedyVerifier, Verifier, VerifyInput
from foresay.engine.sentences import Sentence, SentenceSplitter, SplitterConfig, first_sentence

import torch


@dataclass(frozen=True)
class PredGenConfig:
    """
    max_new_tokens: the reply is cut after this many tokens.
    max_draft_tokens: speculation stops extending a draft at this length.
    margin_tokens: tokens drafted past the end of the draft's first sentence. The sentence is
        announced as soon as its end is confirmed (a sentence ends only once the next word is
        seen); the margin gives the next verification more of the reply to keep.
    tts_latency_s: time a TTS needs for the first sentence's first audio, used for the
        audio-latency figure when no TTS is attached.
    splitter: sentence splitting rules.
    continuation: how the reply goes on after the final verification (plain steps, Jacobi
        iteration seeded with the stale draft, or SpecBound early-exit drafting); lossless.
    """
    max_new_tokens: int = 256
    max_draft_tokens: int = 96
    margin_tokens: int = 4
    tts_latency_s: float = 0.15
    splitter: SplitterConfig = SplitterConfig()
    continuation: ContinuationConfig = ContinuationConfig()

    def __post_init__(self):
        if self.max_new_tokens < 1 or self.max_draft_tokens < 1 or self.margin_tokens < 0:
            raise ForesayError("PredGen config: token limits must be positive")
        if self.tts_latency_s < 0:
            raise ForesayError("PredGen config: tts_latency_s must be >= 0")


@dataclass(frozen=True)
class UpdateRecord:
    """What one partial transcript did to the draft."""
    revision: int
    verified: bool          # a verification pass ran (False: prompt unchanged, or stale)
    stale: bool             # superseded before it started: nothing was done
    accepted: int           # draft tokens kept by verification
    draft_before: int       # draft length before
    draft_after: int        # draft length after extension
    passes: int             # forward passes spent
    p_end_of_turn: float | None
    draft_text: str
    accepted_text: str = ""  # the kept part of the old draft (draft_text starts with it)
    rejected_text: str = ""  # the old draft's tail that verification dropped
    new_text: str = ""       # what was drafted after the kept part
    yielded: bool = False    # extension stopped for urgent work before the draft was ready


@dataclass(frozen=True)
class TurnRecord:
    """The turn's measurements (DESIGN.md section 6); times in seconds."""
    outcome: str            # accepted | partial | rejected | baseline
    ttfs: float             # final transcript -> first sentence fixed
    nfetfs: int             # forward passes in that window
    audio_latency: float    # final transcript -> first audio (modelled unless a TTS measured it)
    first_sentence: str
    final_accepted: int     # draft tokens kept by the final verification
    overhead_share: float   # share of the final step's wall time spent outside forward passes
    updates: tuple[UpdateRecord, ...] = field(default_factory=tuple)
    continuation: ContinuationStats | None = None  # the continuation's work up to the first sentence


@dataclass
class TurnState:
    """Everything one turn has speculated and decided, in one place: `reset()` forgets it (the
    conversation's cache is the caller's to crop). Between calls the draft is explicit: the
    prompt it belongs to, the draft tokens whose KV is cached after that prompt (`tokens`), and
    the next draft token, known but not yet run through the model (`pending`)."""
    prompt: Prompt | None = None
    tokens: list[int] = field(default_factory=list)
    pending: int | None = None
    p_end_of_turn: float | None = None
    newest_revision: int = -1
    updates: list[UpdateRecord] = field(default_factory=list)
    record: TurnRecord | None = None
    announced: tuple[str, float] | None = None   # (first sentence, clock time) last announced
    splitter: SentenceSplitter | None = None      # the reply's, from finalize() on
    unsent: list[Sentence] = field(default_factory=list)     # split, not yet handed out
    sentences: list[Sentence] = field(default_factory=list)  # handed out, spans in the reply's text
    continuation: Continuation | None = None      # set by finalize()

    def reset(self) -> None:
        self.__init__()


class PredGenTurn:
    def __init__(self, conv: Conversation, config: PredGenConfig = PredGenConfig(),
                 verifier: Verifier | None = None,
                 on_first_sentence: Callable[[str, int], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, turn_id: int = 0,
                 continuation_factory: Callable[..., Continuation] = make_continuation):
        """`continuation_factory(config, stale, lm)` builds the strategy that continues the reply
        after the final verification (benchmarks wrap it to measure a best case)."""
        self.conv = conv
        self.lm = conv.lm
        self.cache = conv.cache
        self.config = config
        self.verifier = verifier or GreedyVerifier()
        self.on_first_sentence = on_first_sentence
        self.clock = clock
        self.turn_id = turn_id
        self.continuation_factory = continuation_factory
        self.state = TurnState()
        prepare_continuation(config.continuation, self.lm)
        conv.prefill_history()

    # --- draft state --------------------------------------------------------------------------

    @property
    def prompt(self) -> Prompt | None:
        return self.state.prompt

    @property
    def record(self) -> TurnRecord | None:
        return self.state.record

    @property
    def sentences(self) -> list[Sentence]:
        return self.state.sentences

    @property
    def tokens(self) -> list[int]:
        return self.state.tokens

    @property
    def updates(self) -> list[UpdateRecord]:
        return self.state.updates

    @property
    def continuation(self) -> Continuation | None:
        return self.state.continuation

    @property
    def draft(self) -> list[int]:
        return self.state.tokens + ([self.state.pending] if self.state.pending is not None else [])

    @property
    def complete(self) -> bool:
        """The reply has ended (end-of-message drafted, or the length limit reached)."""
        return self.state.pending in self.lm.eos_ids or len(self.draft) >= self.config.max_new_tokens

    def draft_text(self) -> str:
        return self.lm.decode(self.draft)

    def _first_sentence(self, ids: list[int], final: bool) -> tuple[Sentence | None, int | None]:
        """The first complete sentence of `ids` and how many tokens it takes."""
        sentence = first_sentence(self.lm.decode(ids), final, self.config.splitter)
        if sentence is None:
            return None, None
        return sentence, self._tokens_covering(ids, sentence.end)

    def _tokens_covering(self, ids: list[int], chars: int) -> int:
        """Fewest leading tokens of `ids` whose text is at least `chars` long (all if none)."""
        lo, hi = 0, len(ids)
        while lo < hi:
            mid = (lo + hi) // 2
            if len(self.lm.decode(ids[:mid])) >= chars:
                hi = mid
            else:
                lo = mid + 1
        return lo

    # --- model steps --------------------------------------------------------------------------

    def _verify(self, prompt: Prompt) -> int:
        """One forward pass over the changed prompt tail plus the draft; returns tokens kept."""
        draft = self.draft
        ids = list(prompt.ids) + draft
        first_draft_row = len(prompt.ids) - 1
        need_from = first_draft_row
        if prompt.end_of_message is not None:
            need_from = min(need_from, prompt.end_of_message - 1)
        start = min(self.cache.sync_start(ids), need_from)
        self.cache.crop(start)
        logits = self.cache.append(ids[start:])
        rows = logits[first_draft_row - start:]
        if prompt.end_of_message is not None:
            self._read_p_end_of_turn(prompt, logits[prompt.end_of_message - 1 - start])
        sentence, n_sentence = self._first_sentence(draft, final=self.complete) if draft else (None, None)
        kept = self.verifier.accept(VerifyInput(
            draft, rows, prompt.user_text, sentence.text if sentence else None, n_sentence))
        self.state.prompt = prompt
        if kept == len(draft) and draft and draft[-1] in self.lm.eos_ids:
            self.state.tokens, self.state.pending = draft[:-1], draft[-1]
        elif kept == len(draft):
            self.state.tokens, self.state.pending = draft, int(rows[kept].argmax())
        else:
            self.state.tokens, self.state.pending = draft[:kept], int(rows[kept].argmax())
        self.cache.crop(len(prompt.ids) + len(self.state.tokens))
        return kept

    def _step(self) -> None:
        """Run the pending token; the argmax after it becomes the new pending token."""
        logits = self.cache.append([self.state.pending], keep_logits=1)
        self.state.tokens.append(self.state.pending)
        self.state.pending = int(logits[-1].argmax())

    def _speculation_done(self) -> bool:
        if self.complete or len(self.draft) >= self.config.max_draft_tokens:
            return True
        _, n = self._first_sentence(self.draft, final=False)
        return n is not None and len(self.draft) - n >= self.config.margin_tokens

    def _announce_first_sentence(self, revision: int, final: bool = False) -> Sentence | None:
        sentence, _ = self._first_sentence(self.draft, final=final or self.complete)
        if sentence and (self.state.announced is None or self.state.announced[0] != sentence.text):
            self.state.announced = (sentence.text, self.clock())
            if self.on_first_sentence:
                self.on_first_sentence(sentence.text, revision)
        return sentence

    # --- the pipeline's calls -------------------------------------------------------------------

    def announce(self, revision: int) -> None:
        """A newer partial exists (safe from another thread): work on older ones stops early."""
        if revision > self.state.newest_revision:
            self.state.newest_revision = revision

    def adopt_draft(self, partial_text: str, draft_ids: list[int]) -> None:
        """Take a draft made elsewhere (another engine, an earlier turn) as the draft for
        `partial_text`, computing its cache in one pass; later calls verify it as usual. The pass
        also reads P(end of turn) for `partial_text`: an update with the same text runs no pass,
        and a resumed turn that adds no words still needs the estimate to end."""
        if not draft_ids:
            raise ForesayError("adopt_draft needs at least one token")
        prompt = self.conv.prompt(partial_text)
        ids = list(prompt.ids) + list(draft_ids[:-1])
        need_from = len(ids) if prompt.end_of_message is None else prompt.end_of_message - 1
        start = min(self.cache.sync_start(ids), need_from)
        self.cache.crop(start)
        if start < len(ids):
            logits = self.cache.append(ids[start:], keep_logits=max(1, len(ids) - need_from))
            if prompt.end_of_message is not None:
                self._read_p_end_of_turn(prompt, logits[0])
        self.state.prompt, self.state.tokens, self.state.pending = prompt, list(draft_ids[:-1]), draft_ids[-1]

    def _read_p_end_of_turn(self, prompt: Prompt, row: torch.Tensor) -> None:
        """P(end of turn): the probability, at the row before it, of the token closing the message."""
        self.state.p_end_of_turn = torch.softmax(row, -1)[prompt.ids[prompt.end_of_message]].item()

    def update(self, partial_text: str, revision: int,
               should_stop: Callable[[], bool] | None = None,
               on_verified: Callable[[UpdateRecord], None] | None = None) -> UpdateRecord:
        """Verify the draft against a partial transcript, then extend it in bounded steps.

        `on_verified(record)` is called once the verification pass has read P(end of turn), before
        any extension step: the end-of-turn decision need not wait for the draft. The first
        sentence is announced as soon as its end is confirmed, not after the margin past it.
        Extension stops between steps once `should_stop()` says so or a newer revision was
        announced.
        """
        passes0 = self.lm.stats.passes
        old = self.draft
        before = len(old)
        if revision < self.state.newest_revision or not partial_text.strip():
            record = UpdateRecord(revision, False, revision < self.state.newest_revision, 0, before, before,
                                  0, self.state.p_end_of_turn, self.draft_text())
            self.state.updates.append(record)
            return record
        self.announce(revision)
        prompt = self.conv.prompt(partial_text)
        verified = self.state.prompt is None or prompt.ids != self.state.prompt.ids
        accepted = self._verify(prompt) if verified else before
        if verified and on_verified is not None:
            on_verified(self._update_record(revision, verified, accepted, old, passes0, yielded=False))
        stop = should_stop or (lambda: False)
        while not self._speculation_done() and not stop() and self.state.newest_revision == revision:
            self._step()
            self._announce_first_sentence(revision)
        yielded = not self._speculation_done() and self.state.newest_revision == revision
        self._announce_first_sentence(revision)
        record = self._update_record(revision, verified, accepted, old, passes0, yielded)
        self.state.updates.append(record)
        return record

    def _update_record(self, revision: int, verified: bool, accepted: int, old: list[int], passes0: int,
                       yielded: bool) -> UpdateRecord:
        draft, decode = self.draft, self.lm.decode
        return UpdateRecord(revision, verified, False, accepted, len(old), len(draft),
                            self.lm.stats.passes - passes0, self.state.p_end_of_turn, decode(draft),
                            decode(old[:accepted]), decode(old[accepted:]), decode(draft[accepted:]), yielded)

    def finalize(self, final_text: str, arrived_at: float | None = None,
                 baseline: bool = False) -> TurnRecord:
        """Verify against the final transcript and decode until the first sentence is fixed.

        `arrived_at`: clock time the final transcript arrived (default: now). `baseline` marks a
        turn that never speculated (its outcome is reported as "baseline").
        """
        arrived_at = self.clock() if arrived_at is None else arrived_at
        wall0, fwd0, passes0 = time.perf_counter(), self.lm.stats.seconds, self.lm.stats.passes
        prompt = self.conv.prompt(final_text)
        old_sentence, old_n = self._first_sentence(self.draft, final=self.complete) \
            if self.draft else (None, None)
        old = self.draft
        if self.state.prompt is None or prompt.ids != self.state.prompt.ids:
            kept = self._verify(prompt)
        else:
            kept = len(self.draft)
        # the rejected tail, past the token the verification corrected: guesses for what follows
        stale = old[kept + 1:] if kept < len(old) else []
        self.state.continuation = self.continuation_factory(self.config.continuation, stale, self.lm)
        if baseline:
            outcome = "baseline"
        elif old_n is not None and kept >= old_n:
            outcome = "accepted"
        else:
            outcome = "partial" if kept > 0 else "rejected"
        self.state.splitter = SentenceSplitter(self.config.splitter)
        first = self._decode_until_sentence()
        fixed_at = self.clock()
        wall = time.perf_counter() - wall0
        ttfs = fixed_at - arrived_at
        first_text = first.text if first else ""
        if first:
            self._announce_first_sentence(self.state.newest_revision, final=True)
        if self.state.announced and self.state.announced[0] == first_text:
            audio_ready = self.state.announced[1] + self.config.tts_latency_s
            audio_latency = max(ttfs, audio_ready - arrived_at)
        else:
            audio_latency = ttfs + self.config.tts_latency_s
        self.state.record = TurnRecord(
            outcome=outcome, ttfs=ttfs, nfetfs=self.lm.stats.passes - passes0,
            audio_latency=audio_latency, first_sentence=first_text, final_accepted=kept,
            overhead_share=max(0.0, (wall - (self.lm.stats.seconds - fwd0)) / wall) if wall > 0 else 0.0,
            updates=tuple(self.state.updates), continuation=self.state.continuation.stats)
        return self.state.record

    def _decode_until_sentence(self) -> Sentence | None:
        while True:
            if not self.state.unsent:
                text = self.lm.decode(self.reply_ids())
                if not self.complete:
                    text = text.rstrip("\ufffd")  # a character whose bytes are still arriving
                self.state.unsent.extend(self.state.splitter.feed(text, final=self.complete))
            if self.state.unsent:
                self.state.sentences.append(self.state.unsent.pop(0))
                return self.state.sentences[-1]
            if self.complete:
                return None
            self._continue()

    def _continue(self) -> None:
        """Advance with the turn's continuation strategy (which keeps the cache at prompt + tokens)."""
        budget = self.config.max_new_tokens - len(self.state.tokens) - 1
        step = self.state.continuation.advance(self.cache, self.state.tokens, self.state.pending, budget)
        self.state.tokens.extend(step.accepted)
        self.state.pending = step.pending

    def next_sentence(self) -> Sentence | None:
        """The reply's next sentence (decoding as needed), or None when the reply is done."""
        if self.state.splitter is None:
            raise ForesayError("next_sentence() needs finalize() first")
        return self._decode_until_sentence()

    def reply_ids(self) -> list[int]:
        return [t for t in self.draft[:self.config.max_new_tokens] if t not in self.lm.eos_ids]

    def finish(self) -> list[Sentence]:
        """Decode the rest of the reply; its remaining sentences."""
        rest = []
        while (sentence := self.next_sentence()) is not None:
            rest.append(sentence)
        return rest

    def commit(self, heard_chars: int | None = None) -> str:
        """Enter the turn into the conversation history, the reply only as far as it was heard."""
        if self.state.prompt is None:
            raise ForesayError("commit() needs finalize() first")
        ids = self.reply_ids()
        if heard_chars is not None:
            ids = ids[:self._tokens_covering(ids, heard_chars)]
        return self.conv.commit_turn(self.state.prompt, ids)

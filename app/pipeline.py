"""The composition root: the stages of one conversation, joined by events.

    microphone/file block
      -> Listener     (echo canceller, endpointing, barge-in)  SpeechStarted, UserAudio, TurnEnded
      -> StreamingAsr (partials on a cadence, the final)        PartialTranscript, FinalTranscript
      -> PredGenStage (speculate, finalize, the reply)          DraftUpdated, SentenceReady, ReplyDone
      -> Speaker      (pre-synthesized first sentence, playback) AudioChunk, ReplyStarted, ReplyHeard
      -> PredGenStage (the heard part enters the history)       TurnClosed
      -> TurnLog, HistoryWriter                                 TurnMetrics

Every stage follows `engine.stage.Stage`: the bus hands it the event types it declared and it
emits through the bus; this class never reaches into a stage. The microphone's blocks go to the
listener, and the user's controls (push-to-talk, mode, mute, stop, new conversation) go out as
events, so the stages that act on them, the observers and a replay's log all see them.
Observers (the UI bridge, the console, a metrics file) see every event. Everything here runs on
the event loop; model work runs in the stages' worker threads.
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable, Sequence

from foresay.app.turn_log import TurnLog
from foresay.audio.listener import Listener
from foresay.engine.asr.stage import StreamingAsr
from foresay.engine.events import (Interrupt, ModeChanged, MuteChanged, NewConversation, StatusMessage, TalkPressed,
                                   TalkReleased, TurnClosed, TurnEnded)
from foresay.engine.predgen.stage import PredGenStage
from foresay.engine.stage import EventBus, Stage
from foresay.engine.tts.speaker import Speaker


class Pipeline:
    def __init__(self, *, bus: EventBus, source, listener: Listener, asr: StreamingAsr, llm: PredGenStage,
                 speaker: Speaker, sink, turn_log: TurnLog, more: Sequence[Stage] = (),
                 clock: Callable[[], float] = time.monotonic, wait_for_replies: bool = False):
        """`source`: an async iterable of audio blocks (microphone or file); `sink`: the
        PlaybackSink the speaker plays into; `more`: further stages (e.g. the history writer).
        `wait_for_replies`: finish each reply before reading more audio (a file replayed faster
        than real time, whose next turn would otherwise barge in)."""
        self.bus = bus
        self.source, self.sink = source, sink
        self.listener, self.asr, self.llm, self.speaker = listener, asr, llm, speaker
        self.turn_log = turn_log
        self.stages: tuple[Stage, ...] = (listener, asr, llm, speaker, turn_log, *more)
        self.clock = clock
        self.wait_for_replies = wait_for_replies
        self._open_turns: set[int] = set()
        self._all_closed = asyncio.Event()
        self._all_closed.set()
        for stage in self.stages:
            bus.connect(stage)
        bus.subscribe(TurnEnded, self._turn_opened)
        bus.subscribe(TurnClosed, self._turn_closed)

    @property
    def metrics(self) -> list[dict]:
        return self.turn_log.metrics

    def dispatch(self, event) -> None:
        self.bus.emit(event)

    def status(self, text: str, level: str = "info") -> None:
        self.dispatch(StatusMessage(0, self.clock(), text, level))

    # --- running ------------------------------------------------------------------------------

    async def warmup(self) -> None:
        """Load and warm every model before saying ready."""
        for stage in (self.asr, self.llm, self.speaker):
            self.status(f"warming up the {stage.name}")
            await stage.start()
        self.status("ready")

    async def run(self) -> None:
        """Until the source ends (a file) or the task is cancelled (live)."""
        await self.sink.start()
        try:
            async with self.source:
                async for block in self.source:
                    self.listener.on_block(block)
                    if self.wait_for_replies:
                        for stage in self.stages:
                            await stage.caught_up()
                        await self._all_closed.wait()
            self.listener.finish()
            await self.settle()
        finally:
            await self.sink.close()

    async def settle(self) -> None:
        """Wait until every turn that ended has been answered (or merged, or failed), and every
        stage has finished the work it took on."""
        await self._all_closed.wait()
        for stage in self.stages:
            await stage.settle()

    def close(self) -> None:
        for stage in self.stages:
            stage.close()

    def _turn_opened(self, event: TurnEnded) -> None:
        self._open_turns.add(event.turn_id)
        self._all_closed.clear()

    def _turn_closed(self, event: TurnClosed) -> None:
        self._open_turns.discard(event.turn_id)
        if not self._open_turns:
            self._all_closed.set()

    # --- the user's controls (from the UI or the terminal; event loop thread) -----------------

    def press_ptt(self) -> None:
        t = self.clock()
        self.stop_reply()  # pressing to talk over the assistant interrupts it
        self.dispatch(TalkPressed(0, t))

    def release_ptt(self) -> None:
        self.dispatch(TalkReleased(0, self.clock()))

    def set_mode(self, mode: str) -> None:
        self.dispatch(ModeChanged(0, self.clock(), mode))

    def set_muted(self, muted: bool) -> None:
        self.dispatch(MuteChanged(0, self.clock(), bool(muted)))

    def stop_reply(self) -> None:
        if self._open_turns:
            self.dispatch(Interrupt(max(self._open_turns), self.clock()))

    def new_conversation(self) -> None:
        self.dispatch(NewConversation(0, self.clock()))

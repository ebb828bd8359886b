"""The Smart Turn stage: at each voice pause, how the voice of the turn sounded (`AudioTurnCue`).

It keeps the open turn's audio (the last `window_s` and a second more) as `UserAudio` brings it.
At a `VoicePaused` it judges the turn's audio through the pause's `t` (the voice and the first
`pause_ms` of silence) once that audio has arrived: one Smart Turn call on the stage's worker
thread, never on the event loop. The call does not claim the compute gate the ASR's decodes
claim: PredGen's draft goes on beside it on the other core, so the first sentence and its voice
are readier when the turn ends (paced, Piper complete: 14 of 40 replies 10-81 ms sooner, 3 later,
the call 52-55 ms either way; docs/benchmarks.md). The answer goes to the turn-taking machine as
`AudioTurnCue`, which the decision takes only while no voice came after the audio it heard. A
pause superseded by a newer one before its call began is not judged; a new turn drops the audio
kept.
"""
from __future__ import annotations

import collections
import time
from typing import Callable

import numpy as np

from foresay.engine.events import AudioTurnCue, Event, UserAudio, VoicePaused
from foresay.engine.stage import Stage

from .blocks import SAMPLE_RATE
from .smart_turn import SmartTurnModel

KEEP_EXTRA_S = 1.0  # kept beyond the model's window: the pause's silence, blocks in flight


class SmartTurnStage(Stage):
    consumes = (UserAudio, VoicePaused)
    name = "end-of-turn voice model"
    worker = "smart-turn"

    def __init__(self, model: SmartTurnModel, emit: Callable[[Event], None]):
        super().__init__(emit)
        self.model = model
        self._keep = int((model.config.window_s + KEEP_EXTRA_S) * SAMPLE_RATE)
        self._turn_id: int | None = None
        self._blocks: collections.deque[np.ndarray] = collections.deque()
        self._start_t = 0.0        # capture time of the first sample kept
        self._kept = 0             # samples kept
        self._asked: VoicePaused | None = None  # a pause whose audio has not all arrived
        self._newest: tuple[int, float] | None = None  # (turn, t) of the newest pause asked
        self.calls = 0

    def handle(self, event: Event) -> None:
        if isinstance(event, UserAudio):
            self._add(event)
        elif isinstance(event, VoicePaused):
            self._asked, self._newest = event, (event.turn_id, event.t)
        if self._asked is not None and self._asked.turn_id == self._turn_id and self._until() >= self._asked.t - 1e-3:
            pause, self._asked = self._asked, None
            self.spawn(self._judge(pause, self._audio_until(pause.t)))

    async def cancel(self) -> None:
        """A new conversation: the audio kept and the pause asked for are dropped."""
        self._turn_id, self._asked, self._newest = None, None, None
        self._blocks.clear()
        self._kept = 0
        await super().cancel()

    # --- inside ---------------------------------------------------------------------------------

    def _add(self, audio: UserAudio) -> None:
        samples = np.asarray(audio.samples, np.float32).reshape(-1)
        if audio.turn_id != self._turn_id:
            self._turn_id, self._start_t, self._kept = audio.turn_id, audio.t, 0
            self._blocks.clear()
        self._blocks.append(samples)
        self._kept += len(samples)
        while self._blocks and self._kept - len(self._blocks[0]) >= self._keep:
            first = self._blocks.popleft()
            self._kept -= len(first)
            self._start_t += len(first) / SAMPLE_RATE

    def _until(self) -> float:
        """Capture time of the end of the audio kept."""
        return self._start_t + self._kept / SAMPLE_RATE

    def _audio_until(self, t: float) -> np.ndarray:
        audio = np.concatenate(self._blocks) if self._blocks else np.zeros(0, np.float32)
        return audio[:max(0, round((t - self._start_t) * SAMPLE_RATE))]

    async def _judge(self, pause: VoicePaused, audio: np.ndarray) -> None:
        def work() -> tuple[float, float] | None:
            if self._newest != (pause.turn_id, pause.t):
                return None  # a newer pause came before this call could begin
            started = time.perf_counter()
            p = self.model.predict(audio)
            return p, 1000 * (time.perf_counter() - started)

        answer = await self.run_in_worker(work)
        if answer is not None:
            self.calls += 1
            self.emit(AudioTurnCue(pause.turn_id, pause.t, p_end_of_turn=answer[0], audio_until_t=pause.t,
                                   took_ms=answer[1]))

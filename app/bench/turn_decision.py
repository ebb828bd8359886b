"""`foresay bench turns --decision-only`: the end-of-turn decision as the pipeline feeds it.

Each recording goes through the endpointer with the configured policy, and at every voice pause
the work the pipeline is to do in the silence is done here, in the same order:

    VoicePaused   -> append the turn's audio as far as the live pause decode hears it (through
                     the first block `pause_decode_after_ms` past the last voiced frame, as it
                     begins before the pause is confirmed), `preview_final()` (the transcript
                     through the last word), one PredGen verification of it -> P(end of turn),
                     handed to the policy with its revision and `audio_until_t` once that work
                     would be done (its measured wall time, or `--estimate-ms`, later in audio
                     time, less the head start the live decode gets); beside
                     the verification, `preview_steadiness()` (`PauseRechecked`), handed over
                     after the preview and its own time; audio in the silence is held back;
                     with Smart Turn on ([audio.smart_turn]), its P(end of turn) for the turn's
                     audio through the pause (`AudioTurnCue`), handed over after its own time
                     (live it runs beside the recognizer, on its own thread)
    silence goes on -> at `late_look_ms` past the pause decode, the second look: the turn decoded
                     again with the silence's audio; if it heard more words, a new revision
                     and its verification, handed over like the pause's
    VoiceResumed / TurnResumed -> the held audio and what follows are appended again
    TurnEnded     -> the newest paused transcript, without decoding again, unless voice came since
                     (then `finish()`)

No partial-transcript hops and no drafting run (they do not change the decision here), so the
figures are the decision's and its inputs' own: endpoint delays and cut-offs against the truth,
the compute time of the speculative final (`speculative_ms`: preview + verification), of the
audio cue (`cue_ms`), of the second looks (`late_look_ms`, and how many: `late_looks`) and of the
final after the end (`asr_final_ms`). Voice-to-voice needs the whole pipeline: not reported.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from foresay.app.assemble import load_smart_turn
from foresay.app.bench.turn_records import Observed
from foresay.app.config import Settings
from foresay.audio.blocks import BLOCK_MS, SAMPLE_RATE, AudioBlock
from foresay.engine.events import (AudioTurnCue, PauseRechecked, SpeechStarted, TurnEnded, TurnResumed, VoicePaused,
                                   VoiceResumed)

BLOCK = SAMPLE_RATE * BLOCK_MS // 1000  # the file source's blocks


def _audio_through(ep, t: float) -> np.ndarray:
    """The open turn's untrimmed audio up to capture time `t`."""
    audio = ep.turn.audio(trimmed=False)
    return audio[:max(0, round((t - ep.turn.audio_start_t(trimmed=False)) * SAMPLE_RATE))]


class PausedTurnDriver:
    """Runs recordings through endpointer + decision, doing the silence's work at each pause."""

    def __init__(self, settings: Settings, lm, backend, estimate_s: float | None = None):
        """`estimate_s`: audio time the silence's work is taken to need before its estimate reaches
        the policy (None: as long as it took here, which on a busy machine is longer than live)."""
        from foresay.engine.predgen.conversation import Conversation

        self.settings, self.lm, self.backend, self.estimate_s = settings, lm, backend, estimate_s
        self.conv = Conversation(lm, reserve_tokens=settings.predgen.max_new_tokens)
        self.speculative_ms: list[float] = []
        self.recheck_ms: list[float] = []  # preview + recheck, the time until PauseRechecked
        self.final_ms: list[float] = []
        self.cue_ms: list[float] = []
        self.look_ms: list[float] = []  # the second looks in long silences
        self.smart_turn = load_smart_turn(settings)

    def warmup(self) -> None:
        """One speculative final and verification on a short noise clip, untimed (first calls
        pay for lazy initialisation)."""
        from foresay.engine.asr.streaming import StreamingTranscriber
        from foresay.engine.predgen.turn import PredGenTurn

        asr = StreamingTranscriber(self.backend, self.settings.streaming)
        asr.append(np.random.default_rng(0).normal(0, 0.01, 16000).astype(np.float32))
        asr.preview_final()
        PredGenTurn(self.conv).update("hello", 0, should_stop=lambda: True)
        self.conv.reset()

    def run(self, samples: np.ndarray, t0: float = 0.0):
        """Returns the `Observed` of one recording (times from its first sample)."""
        from foresay.audio.endpoint import Endpointer
        from foresay.audio.vad import make_vad

        s = self.settings
        policy = s.audio.turn_policy(s.app.adaptive_endpointing, audio_cue=self.smart_turn is not None)
        ep = Endpointer(make_vad(s.audio.vad), replace(s.audio.endpointer, mode="hands-free"), policy=policy)
        self.conv.reset()
        obs, self._pending, self._state = Observed(), [], None
        pad = np.zeros(int((s.audio.longest_wait_s() + 0.5) * SAMPLE_RATE), np.float32)
        x = np.concatenate([samples.astype(np.float32), pad])
        for i in range(0, len(x), BLOCK):
            block = AudioBlock(x[i:i + BLOCK], t0 + i / SAMPLE_RATE)
            self._apply_due(ep.turns, block.t)
            for event in ep.push(block):
                self._on_event(event, ep, obs, t0)
            self._feed(ep)
            self._look_again(ep, block.t)
        for event in ep.finish():
            self._on_event(event, ep, obs, t0)
        return obs

    # --- the silence's work ---------------------------------------------------------------------

    def _apply_due(self, turns, t: float) -> None:
        """What the pipeline learned, handed to the turn-taking machine when it would arrive."""
        due = [u for u in self._pending if u[0] <= t]
        self._pending = [u for u in self._pending if u[0] > t]
        for _, kind, turn_id, revision, value, heard in due:
            if kind == "paused":
                text, rechecking, (p_sentence_end, p_goes_on) = value
                turns.paused_transcript(turn_id, revision, text, heard, rechecking, p_sentence_end, p_goes_on)
            elif kind == "heard":
                turns.feed(PauseRechecked(turn_id, t, revision, value))
            elif kind == "cue":
                turns.feed(AudioTurnCue(turn_id, t, p_end_of_turn=value, audio_until_t=heard))
            else:
                turns.estimate(value, turn_id, revision, heard)

    def _feed(self, ep, force: bool = False, until_t: float | None = None) -> None:
        """The turn's audio so far (through capture time `until_t`) to its transcriber."""
        state = self._state
        if state is None or (state["held"] and not force):
            return
        audio = ep.turn.audio(trimmed=False) if until_t is None else _audio_through(ep, until_t)
        if len(audio) > state["fed"]:
            state["asr"].append(audio[state["fed"]:])
            state["fed"] = len(audio)

    def _look_again(self, ep, t: float) -> None:
        """The second look in a long silence, as the ASR stage makes it (`late_look_ms`)."""
        from foresay.engine.asr.turn_decodes import LOOK_AFTER_ANSWER_S
        from foresay.engine.sequences import extends

        state, late_ms = self._state, self.settings.streaming.late_look_ms
        if (not late_ms or state is None or not state["held"] or state.get("paused_at") is None or state["looked"]
                or len(ep.turn.audio(trimmed=False)) - state["paused_at"] < late_ms * SAMPLE_RATE // 1000
                or t < state["answered_t"] + LOOK_AFTER_ANSWER_S):
            return
        state["looked"] = True
        started = time.perf_counter()
        self._feed(ep, force=True)
        final = state["asr"].preview_final()
        decoded = time.perf_counter() - started
        self.look_ms.append(1000 * decoded)
        if not extends(state["text"], final.text):
            return
        state["revision"] += 1
        state["text"] = final.text
        p = state["predgen"].update(final.text, state["revision"], should_stop=lambda: True).p_end_of_turn
        spent = time.perf_counter() - started
        delay, told = (spent, decoded) if self.estimate_s is None else (self.estimate_s, 0.0)
        paused = (final.text, False, state["asr"].preview_marks())
        self._pending.append((t + told, "paused", ep.turn.turn_id, state["revision"], paused, final.t))
        if p is not None:
            self._pending.append((t + delay, "estimate", ep.turn.turn_id, state["revision"], p, final.t))

    def _pause_decode_until(self, pause: VoicePaused, t0: float) -> float | None:
        """The capture time the live pause decode's audio runs to: the end of the first block
        `pause_decode_after_ms` past the last voiced frame, when it begins before the pause is
        confirmed (None: all audio so far). Whisper's P(sentence end) moves with the silence it
        hears after the last word: decoded 50 ms later, the decision's inputs would not be the
        pipeline's."""
        if not self._head_start_s():
            return None
        block_s = BLOCK / SAMPLE_RATE
        after = pause.last_voiced_t + self.settings.streaming.pause_decode_after_ms / 1000
        return min(pause.t, t0 + math.ceil(round((after - t0) / block_s, 6)) * block_s)

    def _head_start_s(self) -> float:
        """How long before the confirmed pause the ASR stage begins the pause decode."""
        after = self.settings.streaming.pause_decode_after_ms
        pause = self.settings.audio.endpointer.pause_ms
        return max(0, pause - after) / 1000 if after else 0.0

    def _judge_voice(self, pause: VoicePaused, ep) -> None:
        """Smart Turn on the turn's audio through the pause, handed over after the time it took."""
        audio = _audio_through(ep, pause.t)
        started = time.perf_counter()
        p = self.smart_turn.predict(audio)
        took = time.perf_counter() - started
        self.cue_ms.append(1000 * took)
        self._pending.append((pause.t + took, "cue", pause.turn_id, None, p, pause.t))

    def _on_event(self, event, ep, obs, t0: float) -> None:
        from foresay.engine.asr.streaming import StreamingTranscriber
        from foresay.engine.predgen.turn import PredGenTurn

        if isinstance(event, SpeechStarted):
            obs.started[event.turn_id] = event.t - t0
            asr = StreamingTranscriber(self.backend, self.settings.streaming, turn_id=event.turn_id,
                                       start_time=ep.turn.audio_start_t(trimmed=False))
            predgen = PredGenTurn(self.conv, self.settings.predgen.engine_config(), turn_id=event.turn_id)
            self._state = {"asr": asr, "predgen": predgen, "fed": 0, "held": False, "revision": 0}
        elif isinstance(event, VoicePaused) and self._state is not None:
            state = self._state
            self._feed(ep, force=True, until_t=self._pause_decode_until(event, t0))
            state["held"] = True
            started = time.perf_counter()
            final = state["asr"].preview_final()
            previewed = time.perf_counter()
            state["revision"] += 1
            p = None
            if final.text.strip():
                p = state["predgen"].update(final.text, state["revision"], should_stop=lambda: True).p_end_of_turn
            spent = time.perf_counter() - started
            self.speculative_ms.append(1000 * spent)
            rechecked = time.perf_counter()
            cheap = 1000 * (previewed - started) <= self.settings.streaming.recheck_max_ms  # as the ASR stage decides
            steady = state["asr"].preview_steadiness() if cheap else None  # live: beside the verification
            recheck = previewed - started + time.perf_counter() - rechecked
            self.recheck_ms.append(1000 * recheck)
            delay, recheck = (spent, recheck) if self.estimate_s is None else (self.estimate_s, self.estimate_s)
            revision = state["revision"]
            told = previewed - started if self.estimate_s is None else 0.0
            # live, the decode began `pause_decode_after_ms` into the silence; it is told at the pause at the soonest
            head = self._head_start_s()
            told, delay, recheck = (max(0.0, x - head) for x in (told, delay, recheck))
            # the paused transcript, as the ASR stage sends it (it says whether a check follows)
            paused = (final.text, steady is not None, state["asr"].preview_marks())
            state.update(paused_at=len(ep.turn.audio(trimmed=False)), looked=False, text=final.text,
                         answered_t=event.t + told)
            self._pending.append((event.t + told, "paused", event.turn_id, revision, paused, final.t))
            if steady is not None:
                self._pending.append((event.t + recheck, "heard", event.turn_id, revision, steady, final.t))
            if p is not None:
                self._pending.append((event.t + delay, "estimate", event.turn_id, revision, p, final.t))
            if self.smart_turn is not None:
                self._judge_voice(event, ep)
        elif isinstance(event, (VoiceResumed, TurnResumed)) and self._state is not None:
            self._state["held"] = False
            self._state["paused_at"] = None
            if isinstance(event, TurnResumed):
                obs.resumed.append((event.turn_id, event.t - t0))
        elif isinstance(event, TurnEnded) and self._state is not None:
            obs.ends.append((event.turn_id, event.t - t0, event.last_voiced_t - t0))
            if not self._state["held"]:
                self._feed(ep, force=True)
            started = time.perf_counter()
            text = self._state["asr"].finish().text
            self.final_ms.append(1000 * (time.perf_counter() - started))
            if self._state["held"] and self._state.get("paused_at") is not None:
                text = self._state["text"]  # the newest paused transcript heard every voiced frame
            obs.finals.append((event.turn_id, text))
            self._state["held"] = True  # until the user resumes the turn
            self._state["paused_at"] = None

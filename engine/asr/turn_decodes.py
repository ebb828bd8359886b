"""The ASR stage's decodes in a turn's silences: what it keeps of them across a voice pause, an
end and a resume (`PauseDecode`, `EndedTurn`), and the work it does while the voice is quiet
(`SilenceDecodes`: the pause decode, begun early, its steadiness check and its second look)."""
from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import numpy as np

from foresay.engine.asr.streaming import StreamingTranscriber
from foresay.engine.asr.whisper.models import SAMPLE_RATE
from foresay.engine.events import FinalTranscript, PausedTranscript, PauseRechecked, VoicePaused
from foresay.engine.sequences import extends

# The decision ends a finished-sounding turn within a frame of getting its transcript; a look begun
# sooner than this after the transcript went out would only hold up the final of a turn that ends.
LOOK_AFTER_ANSWER_S = 0.1


@dataclass
class PauseDecode:
    """A pause decode: its transcriber, the task making it, the capture time its audio runs to;
    `stale` once voice came back (a decode not started by then is skipped); `answered_samples`:
    the turn's audio received when its transcript went out; `late`: the second look in the same
    silence, once begun. One begun before the endpointer called the pause (`confirmed` False)
    keeps its transcript in `held` until the pause is confirmed."""
    transcriber: StreamingTranscriber
    task: asyncio.Task | None = None
    until_t: float = 0.0
    stale: bool = False
    answered_samples: int | None = None
    late: asyncio.Task | None = None
    confirmed: bool = True
    held: tuple | None = None  # the decode's result, waiting for the pause to be confirmed
    paused_t: float = 0.0  # the capture time the audio ran to when the pause was confirmed


@dataclass
class EndedTurn:
    """A turn declared ended: its transcriber, the audio it got after its pause decode (heard by
    the hops if the turn goes on), and that pause decode. `resumed` once the voice came back: a
    final transcript still under way for this end is then never said (the turn's words go on, and
    its next end has a final of its own)."""
    turn_id: int
    transcriber: StreamingTranscriber
    after_pause: np.ndarray
    pause: PauseDecode | None = None
    resumed: bool = False


class SilenceDecodes:
    """The ASR stage's work in the voice's silences, part of `StreamingAsr` (engine/asr/stage.py),
    whose state it shares: the open turn's `_transcriber`, `_pause` and `_early` decodes,
    `_previews`, `_paused`, `_voiced_until`, `_fed_samples`, and its `spawn`, `emit`, `_decode`,
    `_take_audio` and `_heard_until`."""

    async def _preview(self, pause: PauseDecode, audio: np.ndarray) -> FinalTranscript | None:
        """The voice paused: decode all audio so far as the final would, at once (not on the
        next tick), and offer it as a complete partial so PredGen verifies the final prompt
        while the silence lasts. Returns it (the final, if the turn ends before it is out), or
        None when the voice came back before the decode began (the audio is kept, not decoded)."""
        transcriber = pause.transcriber

        def work() -> tuple[FinalTranscript, int, bool, tuple] | None:
            started = time.perf_counter()
            transcriber.append(audio)
            if pause.stale and self._transcriber is transcriber:
                return None
            final = transcriber.preview_final()
            cheap = 1000 * (time.perf_counter() - started) <= self.config.recheck_max_ms
            transcriber.revision += 1  # later partials supersede it
            return final, transcriber.revision, cheap and transcriber.recheck_due(), transcriber.preview_marks()

        decoded = await self._decode(work)
        if decoded is None:
            return None
        final, revision, rechecking, marks = decoded
        # still this turn's, still open; one begun early and dropped since is never sent
        if self._transcriber is transcriber and (pause.confirmed or not pause.stale):
            pause.held = (final, revision, marks, rechecking)  # sent once the pause is confirmed
            if pause.confirmed:
                recheck = self._send_held(pause)
                if recheck is not None:
                    await recheck
        return final

    def _send_held(self, pause: PauseDecode):
        """Send the pause decode's transcript; returns its steadiness check to run, if it has one."""
        final, revision, marks, rechecking = pause.held
        pause.held = None
        pause.answered_samples = self._fed_samples
        self._send_paused(pause.transcriber, final, revision, marks, rechecking)
        return self._recheck(pause.transcriber, final, revision) if rechecking else None

    def _spawn_decode(self, pause: PauseDecode) -> PauseDecode:
        pause.task = self.spawn(self._preview(pause, self._take_audio()))
        return pause

    def _begin_pause(self, event: VoicePaused) -> None:
        """The endpointer confirmed a pause of the open turn: the decode begun early in this
        silence is the pause decode (when it heard every voiced frame), else one begins now."""
        early, self._early = self._early, None
        if (early is not None and not early.stale and early.transcriber is self._transcriber
                and event.last_voiced_t <= early.until_t + 1e-3):
            self._pause = early
            early.paused_t = self._heard_until()
            self._confirm(early)
            return
        if early is not None:
            early.stale = True
        until_t = self._heard_until()
        self._pause = self._spawn_decode(PauseDecode(self._transcriber, until_t=until_t, paused_t=until_t))

    def _watch_the_silence(self) -> None:
        """Begin the pause decode once the voice has been quiet `pause_decode_after_ms`, ahead of
        the endpointer's VoicePaused; drop it when the voice comes back first."""
        early = self._early
        if early is not None:
            if early.transcriber is not self._transcriber or (
                    self._voiced_until is not None and self._voiced_until > early.until_t + 1e-3):
                self._drop_early()
            return
        after = self.config.pause_decode_after_ms / 1000
        if not after or self._paused or self._transcriber is None or self._voiced_until is None:
            return
        if self._heard_until() - self._voiced_until >= after:
            self._early = self._spawn_decode(PauseDecode(self._transcriber, until_t=self._heard_until(),
                                                         confirmed=False))

    def _drop_early(self) -> None:
        if self._early is not None:
            self._early.stale = True  # not begun yet: skipped; done: its transcript is never sent
            self._early = None

    def _confirm(self, pause: PauseDecode) -> None:
        """The endpointer confirmed the pause an early decode was begun in: its transcript goes out
        now if it is done (else when it is)."""
        pause.confirmed = True
        if pause.held is not None:
            recheck = self._send_held(pause)
            if recheck is not None:
                self.spawn(recheck)

    async def _final_from_pause(self, ended: EndedTurn) -> None:
        pause = ended.pause
        try:
            final = await asyncio.shield(pause.task)
        except Exception as exc:  # the decode failed: the turn still ends, said why
            self._report(ended, f"speech recognition failed: {exc}")
            return
        if pause.late is not None:  # a second look begun meanwhile: its words, if it heard more
            with contextlib.suppress(Exception):
                final = await asyncio.shield(pause.late) or final
        if final is None and not ended.resumed:
            final = await self._decode(pause.transcriber.finish)
        if not ended.resumed:
            self.emit(final)

    def _maybe_look_again(self) -> None:
        """Begin the second look once the silence's audio runs `late_look_ms` past the confirmed pause,
        and the turn is still open `LOOK_AFTER_ANSWER_S` after the decision got its transcript (a
        pause decode slowed by a busy processor comes out when the look would be due)."""
        pause = self._pause
        if (not self.config.late_look_ms or not self._paused or pause is None or pause.late is not None
                or pause.task is None or pause.answered_samples is None
                or pause.transcriber is not self._transcriber):
            return
        since_answer = (self._fed_samples - pause.answered_samples) / SAMPLE_RATE
        if self._heard_until() - pause.paused_t >= self.config.late_look_ms / 1000 and since_answer >= LOOK_AFTER_ANSWER_S:
            pause.late = self.spawn(self._look_again(pause, self._take_audio()))

    async def _look_again(self, pause: PauseDecode, audio: np.ndarray) -> FinalTranscript | None:
        """Decode the turn again with the silence's audio; returns the transcript if it heard more
        words than the pause decode (sent as a PausedTranscript while the turn is open), else None."""
        try:
            first = await asyncio.shield(pause.task)
        except Exception:
            return None  # the pause decode failed, and said so when the turn ends
        transcriber = pause.transcriber

        def work() -> tuple[FinalTranscript, int, tuple] | None:
            transcriber.append(audio)
            if first is None or pause.stale:
                return None  # the voice came back: the hops hear this audio with what follows
            final = transcriber.preview_final()
            if not extends(first.text, final.text):
                return None  # no word more, or words heard otherwise: the pause decode stands
            transcriber.revision += 1
            return final, transcriber.revision, transcriber.preview_marks()

        looked = await self._decode(work)
        if looked is None:
            return None
        final, revision, marks = looked
        if self._transcriber is transcriber and not pause.stale:
            self._send_paused(transcriber, final, revision, marks)
        return final

    def _send_paused(self, transcriber: StreamingTranscriber, final: FinalTranscript, revision: int,
                     marks: tuple[float | None, float | None], rechecking: bool = False) -> None:
        """The turn's newest paused transcript: kept as its preview (the final if the turn ends
        now) and sent to the decision and PredGen, with the recognizer's P(". ? !") and
        P(", ; : …") after its last word (`marks`)."""
        self._previews = {transcriber.turn_id: (transcriber, final, revision)}
        p_sentence_end, p_goes_on = marks
        self.emit(PausedTranscript(final.turn_id, final.t, revision, final.text, audio_until_t=final.t,
                                   rechecking=rechecking, p_sentence_end=p_sentence_end, p_goes_on=p_goes_on))

    async def _final_after_look(self, ended: EndedTurn, late: asyncio.Task, paused: FinalTranscript) -> None:
        """The turn ended while its second look decoded: that look's words, if it heard more."""
        looked = None
        with contextlib.suppress(Exception):  # a failed look: the pause decode's transcript stands
            looked = await asyncio.shield(late)
        if not ended.resumed:
            self.emit(looked if looked is not None else paused)

    async def _recheck(self, transcriber: StreamingTranscriber, final: FinalTranscript, revision: int) -> None:
        """After the paused transcript went out (PredGen verifies it meanwhile): was its last word
        heard steadily? The decision waits for this answer, so it is sent whenever the paused
        transcript said it would be, and counts as steady if audio came since (a newer revision
        supersedes it anyway)."""
        steady = await self.run_in_worker(transcriber.preview_steadiness)
        self.emit(PauseRechecked(final.turn_id, final.t, revision, steady is not False))

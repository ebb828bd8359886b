"""The listening stage: microphone blocks in; SpeechStarted, UserAudio, TurnEnded, Interrupt out.

Each block goes through mute, the echo canceller, and then either the endpointer (the user
has the floor) or the barge-in detector (a reply is playing: the assistant's own voice must
not start a turn). Audio heard while a reply plays is kept (the last `keep_audio_s`, and all
of any user speech the detector hears); when the user interrupts, or is still speaking as the
reply ends without having interrupted it, that audio goes to the endpointer from the onset of
their speech, so their turn starts with its first word and nothing they said is dropped.

Right after a turn was ended by silence (the endpointer's resume window), the endpointer
hears the microphone too, also while the reply starts: voice then reopens the same turn
(TurnResumed) instead of being taken for a barge-in, or, after a silence too long to go on with it,
starts the next turn, which the endpointer then hears to its end.

Consumes: ReplyStarted (arm barge-in), ReplyHeard (the reply ended), Interrupt (stopped some
other way); PausedTranscript (the turn decoded at a voice pause), DraftUpdated (its P(end of
turn)), PauseRechecked (whether it was heard steadily) and AudioTurnCue (how the voice sounded
at the pause), which go to the turn-taking machine
(`turn_taking.TurnTaking`, the one owner of the turn's end) as they are; and the user's
controls: TalkPressed / TalkReleased (push-to-talk), ModeChanged, MuteChanged.
"""
from __future__ import annotations

import collections
from typing import Callable

import numpy as np

from foresay.engine.events import (AudioTurnCue, DraftUpdated, Event, Interrupt, ModeChanged, MuteChanged,
                                   PauseRechecked, PausedTranscript, ReplyHeard, ReplyStarted, SpeechStarted,
                                   TalkPressed, TalkReleased, TurnEnded, UserAudio)
from foresay.engine.stage import Stage

from .blocks import AudioBlock
from .endpoint import Endpointer


class Listener(Stage):
    consumes = (ReplyStarted, ReplyHeard, Interrupt, DraftUpdated, PausedTranscript, PauseRechecked, AudioTurnCue,
                TalkPressed, TalkReleased, ModeChanged, MuteChanged)
    name = "listener"

    def __init__(self, endpointer: Endpointer, emit: Callable[[Event], None], *, bargein=None,
                 echo=None, adaptive_endpointing: bool = True, keep_audio_s: float = 1.0,
                 onset_margin_s: float = 0.3, max_hold_s: float = 30.0):
        """`bargein`: a BargeInDetector on the playback reference (None: no barge-in);
        `echo`: an echo canceller on the same reference (None: the microphone as it is);
        `onset_margin_s`: audio kept before a detected onset when held audio is handed over."""
        super().__init__(emit)
        self.endpointer = endpointer
        self.bargein = bargein
        self.echo = echo
        self.adaptive_endpointing = adaptive_endpointing
        endpointer.turns.use_estimates = adaptive_endpointing  # else transcripts only say what they heard
        self.keep_audio_s = keep_audio_s
        self.onset_margin_s = onset_margin_s
        self.max_hold_s = max_hold_s
        self._muted = False
        self._held: collections.deque[AudioBlock] = collections.deque()  # heard while a reply plays
        self._pushed_until = float("-inf")

    # --- audio in ---------------------------------------------------------------------------

    def on_block(self, block: AudioBlock) -> None:
        """One block of microphone (or file) audio, in capture order."""
        raw = AudioBlock(np.zeros_like(block.samples), block.t) if self._muted else block
        clean = self.echo.process(raw) if self.echo is not None else raw
        if self.bargein is not None and self.bargein.armed:
            self._hold(clean)
            if self.endpointer.resumable or self.endpointer.in_turn:
                # right after an end the user may go on with the turn, or begin the next one there:
                # a turn the endpointer opened hears every block until it ends
                self._push(clean)
            for event in self.bargein.process(clean, raw):
                self._release_held(self.bargein.onset_t)  # the user's words start in held audio
                self.emit(event)
            return
        self._held.clear()
        self._push(clean)

    def finish(self) -> None:
        """End of input: an open turn ends where the audio ended."""
        self._route(self.endpointer.finish())

    def _hold(self, block: AudioBlock) -> None:
        """Keep the last `keep_audio_s`, and all of the user speech heard now (however long it
        runs without making an interrupt), up to `max_hold_s`."""
        self._held.append(block)
        keep_from = block.t_end - self.keep_audio_s
        speaking = self.bargein.speaking_since
        if speaking is not None:
            keep_from = max(min(keep_from, speaking - self.onset_margin_s), block.t_end - self.max_hold_s)
        while self._held[0].t_end < keep_from:
            self._held.popleft()

    def _release_held(self, onset: float | None) -> None:
        held, self._held = list(self._held), collections.deque()
        if onset is None:
            return
        for block in held:
            if block.t_end >= onset - self.onset_margin_s and block.t_end > self._pushed_until:
                self._push(block)

    def _push(self, block: AudioBlock) -> None:
        self._pushed_until = block.t_end  # the endpointer hears each block once, in order
        self._route(self.endpointer.push(block))
        self._stream_audio()

    def _route(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, TurnEnded):
                self._stream_audio()  # the turn's last audio precedes its end
            self.emit(event)
            if isinstance(event, SpeechStarted):
                self._stream_audio()  # the pre-roll

    def _stream_audio(self) -> None:
        turn = self.endpointer.turn
        new = turn.take_new_audio() if turn is not None else None
        if new is not None:
            self.emit(UserAudio(turn.turn_id, new[0], new[1], voiced_until_t=turn.last_voiced_t))

    # --- the stage contract -------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        if isinstance(event, ReplyStarted):
            if self.bargein is not None:
                self.bargein.arm(event.turn_id)
        elif isinstance(event, (ReplyHeard, Interrupt)):
            if self.bargein is not None and self.bargein.armed:
                speaking = self.bargein.speaking_since  # already talking as the reply ends
                self.bargein.disarm()
                self._release_held(speaking)
        elif isinstance(event, (PausedTranscript, DraftUpdated, PauseRechecked, AudioTurnCue)):
            self.endpointer.feed(event)
        elif isinstance(event, TalkPressed):
            self.endpointer.press(event.t)
        elif isinstance(event, TalkReleased):
            self.endpointer.release(event.t)
        elif isinstance(event, ModeChanged):
            self.endpointer.set_mode(event.mode, event.t)
        elif isinstance(event, MuteChanged):
            self._muted = event.muted
            self.endpointer.keep_noise_floor(event.muted)  # the zeros fed meanwhile are not the room

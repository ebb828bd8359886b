"""Endpointing: when a user's turn starts and ends, hands-free or with push-to-talk.

`Endpointer` is a streaming core without I/O. Feed it 16 kHz blocks in capture order; it cuts
them into VAD frames, keeps each turn's audio, and asks the turn-taking state machine
(`turn_taking.TurnTaking`, `self.turns`) for every decision: start, pause, end, resume or a new
turn. It returns the machine's events from `foresay.engine.events`:

    ep = Endpointer(make_vad(), EndpointerConfig(), policy=AdaptiveHangover())
    for event in ep.push(block):   # SpeechStarted / TurnEnded, in time order
        ...
    ep.turn.audio()                # the current (or last) turn's audio, for the ASR

Hands-free (the default mode); the start rule is the endpointer's, the rest the machine's:
- A turn starts once `start_voiced_ms` of voiced frames lie within the last `start_window_ms`;
  `SpeechStarted.t` is the first of those voiced frames. `preroll_ms` of audio before it is kept
  in the turn's audio (soft onsets the VAD misses).
- The turn ends after a silence as long as the hangover policy's current hangover, counted from
  the end of the last voiced frame: `TurnEnded.last_voiced_t` is that instant, `TurnEnded.t`
  the end of the frame at which the end was declared. So `t - last_voiced_t` lies in
  [hangover, hangover + one frame).
- `max_turn_s` ends a turn that never pauses.
- Inside a turn, `VoicePaused` marks `pause_ms` of silence after voice (once per pause: the
  moment to transcribe all audio so far), `VoiceResumed` voice again after it, and
  `EndOfTurnEstimate` what the policy's decision rests on, whenever that changes.
- Early-endpoint recovery: when a turn ended by silence and the user speaks again (the usual
  start rule) with the first voiced frame within `resume_window_s` of the declared end and
  within `resume_max_gap_s` of the turn's last voiced frame, the same turn reopens:
  `TurnResumed` (same turn_id), and the audio since the end is appended, so the turn's audio
  runs on without a gap and nothing said is lost.

Push-to-talk: `gate.press()` starts a turn (`SpeechStarted.t` = press time) and `gate.release()`
ends it at once (`TurnEnded.t` = release time; no hangover). The VAD still trims the turn's
audio to [first voiced - preroll, last voiced + tail]; `last_voiced_t` is the press time when
nothing in the turn was voiced (the turn's audio is then empty).

Times of all events are capture times of the audio (the monotonic clock), not the moment this
code ran: the same recording gives the same turns however fast it is fed. Controls (press,
release, mode switches) carry a monotonic time too and take effect where the audio reaches it;
they may come from any thread. Switching modes ends an open turn at the switch.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from foresay.engine.events import Event, SpeechStarted, TurnEnded, TurnResumed

from .blocks import SAMPLE_RATE, AudioBlock
from .gate import Mode, PushToTalkGate
from .hangover import FixedHangover, HangoverPolicy
from .resample import Framer
from .room_noise import RoomHeard, RoomNoise, room_frames
from .turn import Turn
from .turn_taking import TurnTaking, TurnTakingConfig
from .vad import Vad


@dataclass(frozen=True)
class EndpointerConfig:
    start_voiced_ms: int = 150   # a turn starts once this much voiced audio ...
    start_window_ms: int = 300   # ... lies within this window
    preroll_ms: int = 300        # audio kept before the first voiced frame
    tail_ms: int = 150           # audio kept after the last voiced frame when trimming
    max_turn_s: float = 60.0     # a turn is ended after this long, at its next unvoiced frame
    energy_margin_db: float = 10.0  # a voiced frame must also be this far above the noise
                                 # floor (0 disables); trims the VAD's own overhang
    hold_margin_db: float = 6.0  # ... or this far, right after a voiced frame: the fading end of
                                 # a word ("thanks") stays voiced; the overhang's noise does not
    word_tail_gap_ms: int = 120  # sound energy_margin_db above the noise this soon after voice
                                 # counts as voiced though the VAD hears none: the burst and hiss
                                 # after a final stop's closure ("lights", "folders"); 0 disables
    word_tail_max_ms: int = 300  # ... up to this long after the VAD's last voiced frame
    word_tail_hiss_db: float = 10.0  # ... and so does a hiss this far above the median of the
                                 # unvoiced frames' high frequencies: a final "s" in a room's hum
                                 # ("olives"), quieter than the hum in the whole band (0: off)
    pause_ms: int = 100          # silence after voice that makes a VoicePaused event: the whole
                                 # turn is decoded then, and that decode is the final; 150 cost a
                                 # real Whisper 50-90 ms a turn for no WER (docs/benchmarks.md)
    resume_window_s: float = 1.0  # voice this soon after an end declared by silence reopens
                                 # that turn (0 disables) ...
    resume_max_gap_s: float = 1.2  # ... unless the whole silence, from the turn's last voiced
                                 # frame, is longer: a pause that long ends a request even when
                                 # the end was declared late (no estimate yet, a loaded machine)
    mode: Mode = Mode.HANDS_FREE

    def __post_init__(self):
        if not 0 < self.start_voiced_ms <= self.start_window_ms:
            raise ValueError("need 0 < start_voiced_ms <= start_window_ms")
        if self.preroll_ms < 0 or self.tail_ms < 0:
            raise ValueError("preroll_ms and tail_ms must not be negative")
        if self.max_turn_s <= 0:
            raise ValueError("max_turn_s must be positive")
        if not 0 <= self.hold_margin_db <= self.energy_margin_db:
            raise ValueError("need 0 <= hold_margin_db <= energy_margin_db")
        if self.pause_ms <= 0:
            raise ValueError("pause_ms must be positive")
        if not 0 <= self.word_tail_gap_ms <= self.word_tail_max_ms <= 1000:
            raise ValueError("need 0 <= word_tail_gap_ms <= word_tail_max_ms <= 1000")
        if self.word_tail_hiss_db < 0:
            raise ValueError("word_tail_hiss_db must not be negative")
        if self.resume_window_s < 0:
            raise ValueError("resume_window_s must not be negative")
        if self.resume_max_gap_s <= 0:
            raise ValueError("resume_max_gap_s must be positive")
        object.__setattr__(self, "mode", Mode(self.mode))

    def turn_taking(self) -> TurnTakingConfig:
        return TurnTakingConfig(pause_s=self.pause_ms / 1000, resume_window_s=self.resume_window_s,
                                resume_max_gap_s=self.resume_max_gap_s, max_turn_s=self.max_turn_s)


class Endpointer:
    """Turns blocks of audio into the turn-taking machine's events (see the module docstring)."""

    def __init__(self, vad: Vad, config: EndpointerConfig | None = None,
                 policy: HangoverPolicy | None = None, gate: PushToTalkGate | None = None,
                 first_turn_id: int = 1):
        self.vad = vad
        self.config = config or EndpointerConfig()
        self.turns = TurnTaking(policy or FixedHangover(), self.config.turn_taking(), first_turn_id)
        self.gate = gate or PushToTalkGate(self.config.mode)
        self._mode = self.config.mode
        self._frame_n = vad.frame_samples
        self._frame_s = self._frame_n / SAMPLE_RATE
        self._framer = Framer(self._frame_n)
        self._ring: deque[tuple[float, np.ndarray, bool]] = deque()  # recent frames, no turn
        self._turn: Turn | None = None
        self._last_t = 0.0                  # end of the audio processed so far
        self._room = RoomNoise(self._frame_s, self.config.word_tail_hiss_db)  # the energy check
        self._resumable: Turn | None = None  # the last turn, while it may still go on
        self._since_end: list[tuple[float, np.ndarray, bool]] = []  # its frames after the end
        self.frames_seen = 0
        self._was_voiced = False             # the previous frame was voiced (hold_margin_db)
        self._speech_end: float | None = None  # end of the VAD's last voiced frame
        self._sound_end: float | None = None   # end of the last voiced frame, word tails included

    # --- public -----------------------------------------------------------------------------

    @property
    def policy(self) -> HangoverPolicy:
        return self.turns.policy

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def gaps(self) -> int:
        """Discontinuities seen in the block times (lost audio)."""
        return self._framer.gaps

    @property
    def turn(self) -> Turn | None:
        """The open turn, or else the last one (None before the first)."""
        return self._turn

    @property
    def in_turn(self) -> bool:
        return self._turn is not None and self._turn.is_open

    @property
    def resumable(self) -> bool:
        """A turn was just ended by silence and voice now may reopen it (`resume_window_s`)."""
        return self._resumable is not None

    def feed(self, event: Event) -> None:
        """What the pipeline learned about the open turn (PausedTranscript, DraftUpdated,
        PauseRechecked, AudioTurnCue), for the turn-taking machine."""
        self.turns.feed(event)

    def estimate(self, p_end_of_turn: float, turn_id: int, revision: int | None = None,
                 audio_until_t: float | None = None) -> None:
        """P(end of turn) from the LLM for `turn_id`'s transcript up to `audio_until_t`."""
        self.turns.estimate(p_end_of_turn, turn_id, revision, audio_until_t)

    def sentence_ended(self, turn_id: int, revision: int, ended: bool) -> None:
        """Whether the recognizer ended `turn_id`'s transcript `revision` with a sentence end."""
        self.policy.sentence_ended(turn_id, revision, ended)

    def rechecking(self, turn_id: int, revision: int) -> None:
        """A steadiness check of `turn_id`'s transcript `revision` is under way."""
        self.policy.rechecking(turn_id, revision)

    def heard(self, turn_id: int, revision: int, steady: bool) -> None:
        """Whether `turn_id`'s transcript `revision` was heard steadily (`PauseRechecked`)."""
        self.policy.heard(turn_id, revision, steady)

    def press(self, t: float | None = None) -> None:
        self.gate.press(t)

    def release(self, t: float | None = None) -> None:
        self.gate.release(t)

    def set_mode(self, mode: Mode | str, t: float | None = None) -> None:
        """Switch modes (via the gate, so it happens at time `t` of the audio)."""
        self.gate.set_mode(mode, t)

    def push(self, block: AudioBlock) -> list[Event]:
        events: list[Event] = []
        for t, frame in self._framer.push(block):
            events.extend(self._process_frame(frame, t))
        return events

    def finish(self, t: float | None = None) -> list[Event]:
        """End of input: apply pending controls and close an open turn at `t` (default: the
        end of the audio seen)."""
        t_end = self._last_t if t is None else t
        events = self._apply_controls(t_end)
        if self.in_turn:
            events.append(self._closed(self.turns.end(t_end)))
        return events

    # --- frames -----------------------------------------------------------------------------

    def _process_frame(self, frame: np.ndarray, t: float) -> list[Event]:
        t_end = t + self._frame_s
        events = self._apply_controls(t)
        # always, for every frame: the noise floor is tracked (and the speech band filtered) over all of them
        margin = self._room.margin(frame) if self.config.energy_margin_db > 0 else None
        c = self.config
        if self._room.came_back is not None:
            self._room_came_back(t_end, self._room.came_back)
        loud = margin is None or margin >= (c.hold_margin_db if self._was_voiced else c.energy_margin_db)
        voiced = self.vad.is_speech(frame) and loud
        if voiced:
            self._speech_end = t_end
        elif margin is not None and c.word_tail_gap_ms:
            hiss = self._room.hisses(frame)  # always, for every unvoiced frame: it tracks their median
            voiced = (loud or hiss) and self._word_tail(t, t_end)
        if voiced:
            self._sound_end = t_end
        self._was_voiced = voiced
        self.frames_seen += 1
        if self.in_turn:
            self._continue_turn(frame, t, voiced, events)
        else:
            self._idle_frame(frame, t, voiced, events)
        # Controls inside this frame (a release mid-frame) act after it.
        events.extend(self._apply_controls(t_end - 1e-9))
        self._last_t = t_end
        return events

    def _room_came_back(self, t_end: float, heard: RoomHeard) -> None:
        """After zeros (a gated or waking microphone) no floor was known, every sound passed the
        energy check, and the VAD, started afresh, called the room speech, until the room had been
        heard long enough to learn its floor, or the zeros came back after it (`RoomNoise.came_back`;
        `t_end`: the end of this frame): the frames before that fail the check against
        the floor they showed were the room's, and voice ended before them (a request spoken after
        zeros ended 0.2-0.4 s late). A turn the room itself began after the zeros,
        without `start_voiced_ms` of voice, is left to go on: pulled back to its start, it ended
        before the request that follows."""
        c, levels = self.config, heard.levels
        t_end -= heard.ended_before_s  # the end of the last frame heard
        quiet, loud = room_frames(levels, heard.floor_db, c.energy_margin_db)
        t0 = t_end - quiet * self._frame_s
        if quiet == 0 or max(self._speech_end or 0.0, self._sound_end or 0.0) <= t0 + 1e-9:
            return
        self._speech_end = None if self._speech_end is None else min(self._speech_end, t0)
        self._sound_end = None if self._sound_end is None else min(self._sound_end, t0)
        self._ring = deque((ft, f, v and ft + self._frame_s <= t0 + 1e-9) for ft, f, v in self._ring)
        if not self.in_turn:
            return
        turn, heard_from = self._turn, t_end - len(levels) * self._frame_s  # the zeros' end, or later
        began_before = turn.first_voiced_t is not None and turn.first_voiced_t < heard_from - 1e-9
        if began_before or loud * self._frame_s + 1e-9 >= c.start_voiced_ms / 1000:
            if turn.last_voiced_t is not None and turn.last_voiced_t > t0:
                turn.last_voiced_t = max(t0, turn.first_voiced_t or t0)
            self.turns.voice_ended_by(t0)

    def keep_noise_floor(self, keep: bool) -> None:
        """While `keep`, the audio is not the room's (the app's mute): see `RoomNoise.keep`."""
        self._room.keep(keep)

    def _word_tail(self, t: float, t_end: float) -> bool:
        """Whether a loud frame the VAD calls unvoiced ends the word just said: inside a turn (a
        tail lengthens words, it never makes a knock's ring a start of speech), beginning within
        `word_tail_gap_ms` of the last voiced frame and ending within `word_tail_max_ms` of the
        VAD's. Without it a decode made in the silence after "turn off the kitchen lights" hears
        "light": the VAD stops at the voicing, before the closure, the burst and the hiss."""
        c = self.config
        return (self.in_turn and self._speech_end is not None  # (then so is the sound's end)
                and t - self._sound_end <= c.word_tail_gap_ms / 1000 + 1e-9
                and t_end - self._speech_end <= c.word_tail_max_ms / 1000 + 1e-9)

    def _idle_frame(self, frame: np.ndarray, t: float, voiced: bool, events: list[Event]) -> None:
        c = self.config
        self._ring.append((t, frame, voiced))
        if self._resumable is not None:
            # an onset is dated up to a start window before it is known
            if self.turns.expired(t - c.start_window_ms / 1000 - self._frame_s):
                self._resumable, self._since_end = None, []
            else:
                self._since_end.append((t, frame, voiced))
        keep_s = (c.preroll_ms + c.start_window_ms) / 1000 + self._frame_s
        while self._ring and self._ring[0][0] < t - keep_s:
            self._ring.popleft()
        if self._mode is not Mode.HANDS_FREE or not voiced:
            return
        window_start = t + self._frame_s - c.start_window_ms / 1000
        in_window = [(ft, v) for ft, _, v in self._ring if ft >= window_start - 1e-9]
        voiced_s = sum(self._frame_s for _, v in in_window if v)
        if voiced_s + 1e-9 < c.start_voiced_ms / 1000:
            return
        first_voiced = min(ft for ft, v in in_window if v)
        decision = self.turns.onset(first_voiced)
        if isinstance(decision, TurnResumed):
            self._resume_turn(self._resumable)
        else:
            self._start_turn(decision, first_voiced)
        events.append(decision)

    def _continue_turn(self, frame: np.ndarray, t: float, voiced: bool,
                       events: list[Event]) -> None:
        turn = self._turn
        turn.add_frame(frame)
        if voiced:
            if turn.first_voiced_t is None:
                turn.first_voiced_t = t
            turn.last_voiced_t = t + self._frame_s
        for event in self.turns.frame(t, t + self._frame_s, voiced, frame):
            events.append(self._closed(event) if isinstance(event, TurnEnded) else event)

    # --- turns ------------------------------------------------------------------------------

    def _start_turn(self, started: SpeechStarted, first_voiced_t: float | None) -> None:
        c = self.config
        anchor = first_voiced_t if first_voiced_t is not None else started.t
        keep_from = anchor - c.preroll_ms / 1000
        frames = [(ft, f, v) for ft, f, v in self._ring if ft + self._frame_s > keep_from + 1e-9]
        self._ring.clear()
        audio_t0 = frames[0][0] if frames else self._last_t
        turn = Turn(started.turn_id, self._mode, started.t, audio_t0, c.preroll_ms / 1000, c.tail_ms / 1000,
                    first_voiced_t=first_voiced_t)
        for ft, f, v in frames:
            turn.add_frame(f)
            self.turns.hear(ft, f, v)
            if v:
                if turn.first_voiced_t is None:
                    turn.first_voiced_t = ft
                turn.last_voiced_t = ft + self._frame_s
        self._turn = turn
        self._resumable, self._since_end = None, []

    def _resume_turn(self, turn: Turn) -> None:
        """Reopen `turn`: every frame since its end joins it, in order, so its audio has no gap."""
        turn.end_t = None
        turn.resumed += 1
        for ft, f, v in self._since_end:
            turn.add_frame(f)
            self.turns.hear(ft, f, v)
            if v:
                turn.last_voiced_t = ft + self._frame_s
        self._ring.clear()
        self._resumable, self._since_end = None, []
        self._turn = turn

    def _closed(self, ended: TurnEnded) -> TurnEnded:
        """The machine ended the open turn: its audio stops there."""
        turn = self._turn
        turn.end_t = ended.t
        if turn.last_voiced_t is not None:
            turn.last_voiced_t = min(turn.last_voiced_t, ended.t)
        self._ring.clear()
        keep = not self.turns.expired(ended.t)
        self._resumable, self._since_end = (turn if keep else None), []
        return ended

    def _apply_controls(self, until: float) -> list[Event]:
        events: list[Event] = []
        for t, kind, value in self.gate.take_until(until):
            if kind == "mode":
                self._resumable, self._since_end = None, []
                self.turns.forget()
                if value is not self._mode:
                    if self.in_turn:
                        events.append(self._closed(self.turns.end(t)))
                    self._mode = value
            elif self._mode is not Mode.PUSH_TO_TALK:
                continue   # presses only matter in push-to-talk mode
            elif kind == "press" and not self.in_turn:
                started = self.turns.onset(t, silence_ends=False)
                self._start_turn(started, None)
                events.append(started)
            elif kind == "release" and self.in_turn:
                events.append(self._closed(self.turns.end(t)))
        return events

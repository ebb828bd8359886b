"""Streaming transcription of one utterance: partial transcripts with a committed prefix.

`StreamingTranscriber` has no I/O and no clock of its own: the caller appends audio, calls
`hop()` on its cadence and `finish()` at the end of the turn. Each hop decodes the current
window with the committed tokens forced as the decoder prefix, so only the tail is decoded;
`LocalAgreement` commits the words two consecutive hypotheses agree on (never the last one).
Utterances longer than the model's window are trimmed at a pause whose text is all committed;
that text moves to `finalized` and into the prompt, so nothing is lost or repeated. When a whole
window passes without such a pause (continuous speech, short gaps between sentences), the window
is cut at its first silence between words instead: the audio before it is decoded on its own and
finalized, the rest stays. No audio is ever dropped; only speech without any silence for a whole
window is cut at its quietest moment, where a word may be split.

`preview_final()` computes the final transcript during a silence without changing the state;
`finish()` then returns it without decoding again if no audio was appended (and no hop ran)
since, and decodes as usual otherwise.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from foresay.engine.asr.backends import AsrBackend, Hypothesis, TokenText
from foresay.engine.sequences import common_prefix_length, words
from foresay.engine.asr.errors import InvalidAsrConfig
from foresay.engine.asr.whisper.models import SAMPLE_RATE, check_audio
from foresay.engine.asr.vocab import MAX_PROMPT_TOKENS
from foresay.engine.events import FinalTranscript, PartialTranscript

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamingConfig:
    """Cadence and windowing of the streaming transcriber.

    The defaults make the final transcript at least as accurate as one decode of the whole
    utterance (it is that decode, for utterances shorter than `trim_after_s`): measured with real
    Whisper tiny.en on read speech, the earlier defaults (the conversation as a 128-token prompt,
    the final decoded after the committed words) gave 11.9% WER against 7.9% for whole clips,
    because opening words committed from half a second of audio ("Had he married" as "How do you
    marry the") were forced into every later decode (docs/benchmarks.md, streaming ASR).
    """
    hop_ms: int = 250  # time between partial transcripts while the user speaks
    # After a hop whose decode took d, the next starts no sooner than `hop_rest` x d later: with
    # a model whose hop costs more than half the cadence, the worker is then often idle when the
    # voice pauses, and the pause decode (the final) need not wait for a hop in flight. 0: off.
    hop_rest: float = 1.0
    # Earlier text given to Whisper as a prompt, at most 223: the utterance's own text trimmed off
    # a long window (so a 40 s monologue reads on across its windows), and the conversation only
    # with `history_prompt`.
    prompt_tokens: int = 128
    # Off by default: the conversation (the assistant's replies included) biases Whisper towards
    # words that were not said, and one decode of the whole utterance has no prompt either.
    history_prompt: bool = False
    trim_after_s: float = 20.0  # once the window is this long, trim it at a committed pause
    min_pause_ms: int = 300  # a silence this long at the window's end marks a pause
    silence_rms: float = 0.01  # RMS below which audio counts as silence
    # The final transcript decodes the whole window afresh instead of after the committed words
    # (while the window still holds the whole utterance): one full decode more at the end of the
    # turn, so that words committed from partial audio never reach the final transcript (with
    # SpecASR the extra decode costs a few target passes).
    final_redecode: bool = True
    # No word is committed before the window holds this much audio: two hops over the first half
    # second agree on a guess too easily, and committed words are forced into every later decode.
    commit_after_s: float = 1.0
    # Without a committed pause, a full window is cut at its first silence this long (a gap
    # between words or sentences) after at least `min_segment_s` of audio.
    gap_ms: int = 150
    min_segment_s: float = 1.0
    # 0: off. Once an utterance has outgrown a window, the rest is cut into pieces no longer than
    # this (at silences; the final transcript too): for a model trained on short utterances, such
    # as the demo Whisper (one request each), which leaves words out of a window holding two.
    segment_s: float = 0.0
    # 0: off. At a voice pause, the window is decoded once more without its first `recheck_ms`
    # (`preview_steadiness`): a recognizer that heard the last word hears it again; one that made
    # an ending up from its language model (a fragment heard as a whole request) often does not.
    # When the last word changed, once more without the first `recheck_again_ms` (0: not): only
    # a word that changes both times counts as not heard steadily.
    recheck_ms: int = 10
    recheck_again_ms: int = 15
    # The check runs only after a pause decode that took at most this long: on the demo Whisper
    # (a few ms) it is free; on a real Whisper it would double the wait at every pause.
    recheck_max_ms: float = 50.0
    # A second look in a long silence: once the turn's audio runs this far past the confirmed
    # pause and the voice has not come back, the turn is decoded again with the silence's audio. The
    # endpointer's voice test (VAD and a margin over the room's noise) can miss a quiet last word
    # ("... in a few sentences" in room noise) that Whisper hears; the pause decode stopped
    # before it. A look that hears more words is the turn's newest transcript. 0: off.
    late_look_ms: int = 350
    # The pause decode begins once the voice has been this quiet, before the endpointer confirms
    # the pause (its `pause_ms`, 100): the decode is on the user's critical path, and a silence of
    # 50 ms mostly goes on. Its transcript goes out only when the pause is confirmed, and is
    # dropped if the voice comes back first. 0: the decode begins at the confirmed pause.
    pause_decode_after_ms: int = 50

    def __post_init__(self) -> None:
        if not 50 <= self.hop_ms <= 5000:
            raise InvalidAsrConfig(f"hop_ms must be in 50..5000, got {self.hop_ms}")
        if not 0 <= self.prompt_tokens <= MAX_PROMPT_TOKENS:
            raise InvalidAsrConfig(f"prompt_tokens must be in 0..{MAX_PROMPT_TOKENS}, got {self.prompt_tokens}")
        if not 1.0 <= self.trim_after_s <= 29.0:
            raise InvalidAsrConfig(f"trim_after_s must be in 1..29 (Whisper sees 30 s), got {self.trim_after_s}")
        if not 50 <= self.min_pause_ms <= 5000:
            raise InvalidAsrConfig(f"min_pause_ms must be in 50..5000, got {self.min_pause_ms}")
        if not 0.0 < self.silence_rms < 1.0:
            raise InvalidAsrConfig(f"silence_rms must be in (0, 1), got {self.silence_rms}")
        if not 0.0 <= self.commit_after_s <= 10.0:
            raise InvalidAsrConfig(f"commit_after_s must be in 0..10, got {self.commit_after_s}")
        if not 20 <= self.gap_ms <= 5000:
            raise InvalidAsrConfig(f"gap_ms must be in 20..5000, got {self.gap_ms}")
        if not 0.1 <= self.min_segment_s <= 10.0:
            raise InvalidAsrConfig(f"min_segment_s must be in 0.1..10, got {self.min_segment_s}")
        if self.segment_s and not self.min_segment_s < self.segment_s <= 29.0:
            raise InvalidAsrConfig(f"segment_s must be 0 (off) or in ({self.min_segment_s:g}, 29], got {self.segment_s}")
        if not 0 <= self.hop_rest <= 10:
            raise InvalidAsrConfig(f"hop_rest must be in 0..10, got {self.hop_rest}")
        if not 0 <= self.pause_decode_after_ms <= 5000:
            raise InvalidAsrConfig(f"pause_decode_after_ms must be in 0..5000 (0: at the pause), "
                                   f"got {self.pause_decode_after_ms}")
        if not 0 <= self.late_look_ms <= 5000:
            raise InvalidAsrConfig(f"late_look_ms must be in 0..5000 (0: off), got {self.late_look_ms}")
        if self.recheck_max_ms < 0:
            raise InvalidAsrConfig(f"recheck_max_ms must not be negative, got {self.recheck_max_ms}")
        for name in ("recheck_ms", "recheck_again_ms"):
            if not 0 <= getattr(self, name) <= 200:
                raise InvalidAsrConfig(f"{name} must be in 0..200 (0: off), got {getattr(self, name)}")


class LocalAgreement:
    """Commit policy: the longest common word prefix of two consecutive hypotheses, without the
    current hypothesis's last word (it may still be growing)."""

    def __init__(self, text: TokenText) -> None:
        self.text = text

    def committed_length(self, committed: int, previous: Sequence[int], current: Sequence[int]) -> int:
        agree = common_prefix_length(previous, current)
        starts = [i for i in range(len(current)) if self.text.is_word_start(current[i])]
        last_word = starts[-1] if starts else 0
        cut = max((i for i in starts if i <= min(agree, last_word)), default=0)
        return max(committed, cut)


_FRAME = SAMPLE_RATE // 100  # 10 ms


def frame_levels(audio: np.ndarray) -> np.ndarray:
    """RMS level of each whole 10 ms frame."""
    n = len(audio) // _FRAME
    frames = audio[: n * _FRAME].reshape(n, _FRAME).astype(np.float64)
    return np.sqrt(np.mean(frames ** 2, axis=1))


def silence_cut(audio: np.ndarray, *, silence_rms: float, gap_ms: int, min_segment_s: float) -> int:
    """Where to cut audio that must be trimmed (a sample index inside it): the middle of its first
    silence of at least `gap_ms` whose middle lies `min_segment_s` or more into it; without one,
    its quietest 10 ms frame after `min_segment_s` (a word may be split there)."""
    levels = frame_levels(audio)
    first = min(int(min_segment_s * 100), max(len(levels) - 1, 0))
    quiet = np.concatenate([[False], levels < silence_rms, [False]])
    edges = np.flatnonzero(np.diff(quiet.astype(np.int8)))
    for start, end in zip(edges[::2], edges[1::2]):
        if end - start >= gap_ms / 10 and (start + end) // 2 >= first:
            return int(start + end) // 2 * _FRAME
    if len(levels) <= first:
        return len(audio)
    return (first + int(np.argmin(levels[first:]))) * _FRAME


@dataclass(frozen=True)
class _Pause:
    """A hop whose audio ended in silence: everything before `sample` reads as `tokens`."""
    sample: int  # absolute sample index inside the silence
    tokens: tuple[int, ...]  # the window's hypothesis at that hop


@dataclass(frozen=True)
class _Preview:
    """A final transcript computed ahead, and the state `finish()` would have left."""
    final: FinalTranscript
    state: dict[str, Any]
    decodes: tuple[Hypothesis, ...]  # what the final decode added to `decodes`


_STATE = ("audio", "window_start", "finalized", "committed", "previous", "pauses", "revision", "trims")


class StreamingTranscriber:
    def __init__(self, backend: AsrBackend, config: StreamingConfig = StreamingConfig(), *,
                 turn_id: int = 0, start_time: float = 0.0, history: str = "") -> None:
        self.backend, self.config = backend, config
        self.turn_id, self.start_time = turn_id, start_time
        self.policy = LocalAgreement(backend.text)
        self.history = backend.text.encode(history) if history.strip() else []
        self.audio = np.zeros(0, dtype=np.float32)  # the current window
        self.window_start = 0  # absolute sample index of audio[0]
        self.finalized: list[int] = []  # tokens of audio trimmed off the window
        self.committed: list[int] = []  # committed tokens of the current window (forced prefix)
        self.previous: list[int] = []  # last hypothesis of the window (committed + tail)
        self.pauses: list[_Pause] = []
        self.revision = 0
        self.trims = 0
        self._loudest = 0.0  # RMS of the loudest 10 ms heard
        self.decodes: list[Hypothesis] = []
        self._preview: _Preview | None = None  # valid until audio is appended or a hop runs

    @property
    def samples_heard(self) -> int:
        return self.window_start + len(self.audio)

    def append(self, samples: np.ndarray) -> None:
        samples = check_audio(samples)
        if len(samples):
            self._preview = None
        self.audio = np.concatenate([self.audio, samples])
        self._loudest = max(self._loudest, float(frame_levels(samples).max(initial=0.0)))

    def hop(self) -> PartialTranscript:
        """Decode what was heard so far and return the next partial transcript."""
        self._preview = None
        current = self._decode()
        if self.trims or len(self.audio) >= self.config.commit_after_s * SAMPLE_RATE:
            self.committed = list(current[: self.policy.committed_length(len(self.committed), self.previous, current)])
        self.previous = current
        self._note_pause(current)
        self.revision += 1
        text = self.backend.text
        return PartialTranscript(turn_id=self.turn_id, t=self._time(), revision=self.revision,
                                 committed=text.decode(self.finalized + self.committed).strip(),
                                 tentative=text.decode(current[len(self.committed):]).strip())

    def preview_final(self) -> FinalTranscript:
        """The transcript `finish()` would return now, computed without changing the state (a
        speculative final during a silence). `finish()` reuses it while no audio is appended."""
        if self._preview is None:
            before = self._snapshot()
            n = len(self.decodes)
            final = self._finish()
            self._preview = _Preview(final, self._snapshot(), tuple(self.decodes[n:]))
            self._restore(before)
            del self.decodes[n:]
        return self._preview.final

    def preview_marks(self) -> tuple[float | None, float | None]:
        """The recognizer's (P(". ? !"), P(", ; : …")) after the previewed final's last word: the
        sentence ended, the clause goes on (None: no preview, or the backend does not say)."""
        last = self._preview.decodes[-1] if self._preview is not None and self._preview.decodes else None
        return (None, None) if last is None else (last.p_sentence_end, last.p_goes_on)

    def finish(self) -> FinalTranscript:
        """The final transcript: one more decode, consistent with everything committed (or, with
        `final_redecode` and nothing trimmed yet, of the whole window afresh). A `preview_final()`
        made since the last append or hop is returned as it is, without decoding again."""
        preview, self._preview = self._preview, None
        if preview is not None:
            self._restore(preview.state)
            self.decodes.extend(preview.decodes)
            return preview.final
        return self._finish()

    def recheck_due(self) -> bool:
        """Whether `preview_steadiness()` checks the previewed final now (it returns a verdict,
        not None): told to the end-of-turn decision with the paused transcript, so that it does
        not take the transcript for finished before the verdict has come."""
        return bool(self.config.recheck_ms and self._preview is not None and not self.trims
                    and words(self._preview.final.text) and len(self.audio) > SAMPLE_RATE // 10)

    def preview_steadiness(self) -> bool | None:
        """Whether the previewed final's last word is heard again when the window is decoded
        without its first `recheck_ms` (the same audio on other frame boundaries) or, failing
        that, without its first `recheck_again_ms`. None: not checked (off, no preview, nothing
        heard, or a window already trimmed, whose final is not one decode of the whole utterance)."""
        if not self.recheck_due():
            return None
        said = words(self._preview.final.text)
        heard = self._preview.decodes[-1].tokens if self._preview.decodes else ()
        for ms in (self.config.recheck_ms, self.config.recheck_again_ms):
            if ms:
                shifted = self.audio[int(ms * SAMPLE_RATE / 1000):]
                again = self.backend.transcribe(shifted, forced=[], prompt=self._prompt(), guess=heard)
                if words(self.backend.text.decode(list(again.tokens)))[-1:] == said[-1:]:
                    return True
        return False

    def _snapshot(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, list) else v) for k in _STATE for v in (getattr(self, k),)}

    def _restore(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            setattr(self, k, list(v) if isinstance(v, list) else v)

    def _finish(self) -> FinalTranscript:
        if self.config.final_redecode and not self.trims:
            self.committed = []
        current = self._decode()
        return FinalTranscript(turn_id=self.turn_id, t=self._time(),
                               text=self.backend.text.decode(self.finalized + current).strip())

    def _time(self) -> float:
        return self.start_time + self.samples_heard / SAMPLE_RATE

    def _decode(self) -> list[int]:
        self._trim_if_long()
        if len(self.audio) == 0 or (self.trims and self._silent(self.audio)):
            # what is left after a cut may be silence only: it holds no words (a model given only
            # silence may still "hear" one)
            return list(self.committed)
        guess = self.previous[len(self.committed):]
        hypothesis = self.backend.transcribe(self.audio, forced=self.committed, prompt=self._prompt(), guess=guess)
        self.decodes.append(hypothesis)
        return self.committed + list(hypothesis.tokens)

    @property
    def _silence_rms(self) -> float:
        """`silence_rms`, or a quarter of the loudest 10 ms heard for a quieter speaker, whose
        words must never count as silence."""
        return min(self.config.silence_rms, self._loudest / 4)

    def _silent(self, audio: np.ndarray) -> bool:
        return frame_levels(audio).max(initial=0.0) < self._silence_rms

    def _prompt(self) -> list[int]:
        earlier = (self.history if self.config.history_prompt else []) + self.finalized
        return earlier[-self.config.prompt_tokens:] if self.config.prompt_tokens else []

    def _note_pause(self, current: list[int]) -> None:
        pause = int(self.config.min_pause_ms * SAMPLE_RATE / 1000)
        tail = self.audio[-pause:]
        if len(self.audio) < pause or not current:
            return
        # a window of silence only has no text to finalize (a model may still "hear" a word in it)
        if not self._silent(self.audio[:-pause]) and float(np.sqrt(np.mean(tail.astype(np.float64) ** 2))) < self._silence_rms:
            self.pauses.append(_Pause(self.samples_heard - pause // 2, tuple(current)))

    def _trim_if_long(self) -> None:
        while self._trim_once():
            pass

    @property
    def trim_after_s(self) -> float:
        """The configured trim length, or a second less than a shorter model's window (the demo
        Whisper hears 6 s): a request that fits the window is heard whole, and a pause is still
        looked for while there is room."""
        return min(self.config.trim_after_s, self.backend.window_seconds - 1.0)

    @property
    def cut_after_s(self) -> float:
        """Without a committed pause, a window this long is cut at a silence: the model's window
        less two hops, and once the utterance has outgrown a window, `segment_s` where set."""
        full = self.backend.window_seconds - 2 * self.config.hop_ms / 1000
        return min(full, self.config.segment_s) if self.trims and self.config.segment_s else full

    def _trim_once(self) -> bool:
        seconds = len(self.audio) / SAMPLE_RATE
        committed = tuple(self.committed)
        safe = [p for p in self.pauses if committed[: len(p.tokens)] == p.tokens]
        if seconds >= self.trim_after_s and safe:
            self._trim(safe[-1])
        elif seconds >= self.cut_after_s:
            self._trim_at_silence()
        else:
            return False  # wait for a committed pause while there is room
        return True

    def _trim_at_silence(self) -> None:
        """A whole window without a committed pause: decode the audio before its first silence
        on its own and finalize that text; nothing is dropped. (A hypothesis of the whole window
        is no substitute: a model that heard several sentences at once may leave words out, and
        its last word may straddle any cut.)"""
        fits = self.audio[: int((self.backend.window_seconds - 0.5) * SAMPLE_RATE)]
        cut = silence_cut(fits, silence_rms=self._silence_rms, gap_ms=self.config.gap_ms,
                          min_segment_s=self.config.min_segment_s)
        if self._silent(self.audio[:cut]):
            hypothesis = Hypothesis(())
        else:
            hypothesis = self.backend.transcribe(self.audio[:cut], prompt=self._prompt(), guess=self.previous)
            self.decodes.append(hypothesis)
        log.debug("trim without a committed pause: %.2f s finalized as %r", cut / SAMPLE_RATE,
                  self.backend.text.decode(hypothesis.tokens))
        self._trim(_Pause(self.window_start + cut, tuple(hypothesis.tokens)))
        # The pauses heard so far read their audio from the whole window, where such a model may
        # have left words out: after a cut at a silence, only pauses heard later may be trusted.
        self.pauses = []

    def _trim(self, pause: _Pause) -> None:
        cut, kept = pause.sample - self.window_start, len(pause.tokens)
        self.finalized += list(pause.tokens)
        self.audio = self.audio[cut:]
        self.window_start = pause.sample
        self.committed = self.committed[kept:] if self.committed[:kept] == list(pause.tokens) else []
        self.previous = self.previous[kept:] if self.previous[:kept] == list(pause.tokens) else list(self.committed)
        self.pauses = [_Pause(p.sample, p.tokens[kept:]) for p in self.pauses
                       if p.sample > pause.sample and p.tokens[:kept] == pause.tokens]
        self.trims += 1

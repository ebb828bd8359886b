"""Streaming transcription of one utterance: partial transcripts with a committed prefix.

`StreamingTranscriber` has no I/O and no clock of its own: the caller appends audio, calls
`hop()` on its cadence and `finish()` at the end of the turn. Each hop decodes the current
window with the committed tokens forced as the decoder prefix, so only the tail is decoded;
`LocalAgreement` commits the words two consecutive hypotheses agree on (never the last one).
Utterances longer than the model's window are trimmed at a pause whose text is all committed;
that text moves to `finalized` and into the prompt, so nothing is lost or repeated. Only when a
whole window passes without such a pause does it cut at the last pause heard (or, failing that,
where the last hypothesis ended), where a word at the cut may be split.

`preview_final()` computes the final transcript during a silence without changing the state;
`finish()` then returns it without decoding again if no audio was appended (and no hop ran)
since, and decodes as usual otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from foresay.engine.asr.backends import AsrBackend, Hypothesis, TokenText
from foresay.engine.sequences import common_prefix_length
from foresay.engine.asr.errors import InvalidAsrConfig
from foresay.engine.asr.models import SAMPLE_RATE, check_audio
from foresay.engine.asr.vocab import MAX_PROMPT_TOKENS
from foresay.engine.events import FinalTranscript, PartialTranscript


@dataclass(frozen=True)
class StreamingConfig:
    """Cadence and windowing of the streaming transcriber.

    The defaults make the final transcript at least as accurate as one decode of the whole
    utterance (it is that decode, for utterances shorter than `trim_after_s`): measured with real
    Whisper tiny.en on read speech, the earlier defaults (the conversation as a 128-token prompt,
    the final decoded after the committed words) gave 11.9% WER against 7.9% for whole clips,
    because opening words committed from half a second of audio ("Had he married" as "How do you
    marry the") were forced into every later decode. See docs/benchmarks.md, issue 17.
    """
    hop_ms: int = 250  # time between partial transcripts while the user speaks
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


_STATE = ("audio", "window_start", "finalized", "committed", "previous", "pauses", "revision", "trims",
          "_decoded_until")


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
        self._decoded_until = 0  # absolute sample up to which the last hypothesis heard
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
        earlier = (self.history if self.config.history_prompt else []) + self.finalized
        prompt = earlier[-self.config.prompt_tokens:] if self.config.prompt_tokens else []
        if len(self.audio) == 0:
            return list(self.committed)
        guess = self.previous[len(self.committed):]
        hypothesis = self.backend.transcribe(self.audio, forced=self.committed, prompt=prompt, guess=guess)
        self.decodes.append(hypothesis)
        self._decoded_until = self.samples_heard
        return self.committed + list(hypothesis.tokens)

    def _note_pause(self, current: list[int]) -> None:
        pause = int(self.config.min_pause_ms * SAMPLE_RATE / 1000)
        tail = self.audio[-pause:]
        if len(self.audio) < pause or not current:
            return
        if float(np.sqrt(np.mean(tail.astype(np.float64) ** 2))) < self.config.silence_rms:
            self.pauses.append(_Pause(self.samples_heard - pause // 2, tuple(current)))

    def _trim_if_long(self) -> None:
        while len(self.audio) / SAMPLE_RATE >= self.trim_after_s and self._trim_once():
            pass

    @property
    def trim_after_s(self) -> float:
        """The configured trim length, or a second less than a shorter model's window (the demo
        Whisper hears 6 s): a request that fits the window is heard whole, and a pause is still
        looked for while there is room."""
        return min(self.config.trim_after_s, self.backend.window_seconds - 1.0)

    def _trim_once(self) -> bool:
        seconds = len(self.audio) / SAMPLE_RATE
        committed = tuple(self.committed)
        safe = [p for p in self.pauses if committed[: len(p.tokens)] == p.tokens]
        extending = [p for p in self.pauses if p.tokens[: len(committed)] == committed]
        if safe:
            self._trim(safe[-1])
        elif seconds < self.backend.window_seconds - 2 * self.config.hop_ms / 1000:
            return False  # wait for a committed pause while there is room
        elif extending:
            # No pause whose text is all committed: trust the hypothesis heard at the last pause.
            self._trim(extending[-1])
        elif self._decoded_until > self.window_start:
            # A whole window without a usable pause: keep the last hypothesis and the audio after it.
            self._trim(_Pause(self._decoded_until, tuple(self.previous)))
        else:
            # More than a window arrived before any decode (a stalled worker): only the newest
            # audio that fits can be heard; what was before it is lost.
            drop = len(self.audio) - int((self.backend.window_seconds - 1) * SAMPLE_RATE)
            self.audio, self.window_start = self.audio[drop:], self.window_start + drop
            self.pauses = [p for p in self.pauses if p.sample > self.window_start]
        return True

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

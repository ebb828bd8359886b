"""faster-whisper (CTranslate2) behind the backend interface: fastest where no draft pair is set.

The model is a size or hub id (tiny.en and base, also as Systran/faster-whisper-*, come from the
registry copies when fetched), a CTranslate2 folder, a fixture name, or a transformers Whisper (a
shipped name such as `demo`, or a local folder), converted once into a cache (`ct2_convert`).

faster-whisper 1.x pads every segment to 30 s of features, so each decode costs a 30 s encoder
pass however short the audio. Audio that fits the model's window is instead run through its
CTranslate2 model directly, in the shortest window of `encoder_window` that holds it (10 s for a
request: about a third of the encoder's cost), with the audio padded by silence before the
log-mel as Whisper's own padding is, the same prompt layout as faster-whisper's (<|startofprev|>
prompt, the start-of-transcript sequence, <|notimestamps|>, the forced tokens as they are) and
the model's own suppressed tokens. Longer audio (only a 30 s model's) goes through faster-whisper's
moving windows as before. A decode in a window also says how sure the model was that a sentence
ended after its last word (`Hypothesis.p_sentence_end`, `sentence_end`).

With `decoder="guess"`, on CPU and where the model file holds float weights, the decoder runs in
torch on them (`guess_decoder`): CTranslate2 encodes, and the forced tokens and the guess (the
words the streaming hops heard) are checked in one pass rather than a step a token.

With `no_speech_p` set, audio that holds no speech (room noise, a breath, a click the voice
detector let through) is heard as nothing, by Whisper's own rule: P(no speech) above `no_speech_p`
and an average token log-prob below -1. Whisper writes "you", "." or "Thank you." over such audio,
and a request of "you" would be answered. A quiet word that Whisper reads with confidence is kept,
even where it found P(no speech) high.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from foresay.engine.asr.backends import AsrBackend, Hypothesis, WhisperText
from foresay.engine.asr.whisper.ct2_convert import converted_folder, decoder_positions, is_transformers_whisper
from foresay.engine.asr.whisper.encoder_window import encoder_windows, looks_looped, token_cap
from foresay.engine.asr.errors import InvalidAsrConfig, InvalidAudio
from foresay.engine.asr.greedy import DecodeStats
from foresay.engine.asr.whisper.fixtures import ctranslate2_folder, is_fixture
from foresay.engine.asr.whisper.sentence_end import SentenceEnd
from foresay.engine.asr.whisper.models import SAMPLE_RATE, check_audio
from foresay.engine.errors import ModelUnavailable
from foresay.engine.registry_models import fetched_whisper

# Whisper's own silence rule (openai-whisper, faster-whisper): a decode whose P(no speech) is above
# `no_speech_p` and whose average log-prob is below this is not speech.
NO_SPEECH_LOGPROB = -1.0
DECODERS = ("ctranslate2", "guess")
COMPUTE_TYPES = ("auto", "int8", "int8_float16", "int8_float32", "float16", "bfloat16", "float32")


@dataclass(frozen=True)
class FasterWhisperConfig:
    """Which CTranslate2 Whisper to run and how."""
    model: str  # a size (tiny.en, medium.en, large-v3, ...), a converted folder, or a fixture name
    device: str = "cpu"  # cpu | cuda | auto
    compute_type: str = "auto"  # auto: int8 on CPU, float16 on CUDA
    cpu_threads: int = 0  # 0: CTranslate2's default
    max_new_tokens: int = 224
    # Whisper's no-speech threshold (0.6 is Whisper's own): above it, with a low log-prob, the audio
    # holds no speech and the decode is empty. Measured with tiny.en on real recordings: speech
    # 0.01-0.53, room tone 0.87-0.99 (docs/benchmarks.md, "Hearing no speech"). 0: off.
    no_speech_p: float = 0.6
    fixture_root: Path | None = None
    cache_root: Path | None = None  # converted transformers Whispers (None: ct2_convert's default)
    # ctranslate2: every token a step of CTranslate2's own decoder; guess: on CPU, where the model
    # file's weights are float, the decoder runs in torch on them and checks the streaming hops'
    # guess in one pass (`guess_decoder`; elsewhere CTranslate2's)
    decoder: str = "ctranslate2"

    def __post_init__(self) -> None:
        if not self.model:
            raise InvalidAsrConfig("a faster-whisper model name or folder is required")
        if self.device not in ("cpu", "cuda", "auto"):
            raise InvalidAsrConfig(f"device must be cpu, cuda or auto, not {self.device!r}")
        if self.compute_type not in COMPUTE_TYPES:
            raise InvalidAsrConfig(f"compute_type must be one of {', '.join(COMPUTE_TYPES)}, not {self.compute_type!r}")
        if self.cpu_threads < 0 or not 1 <= self.max_new_tokens <= 448:
            raise InvalidAsrConfig("cpu_threads must be >= 0 and max_new_tokens in 1..448")
        if not 0.0 <= self.no_speech_p < 1.0:
            raise InvalidAsrConfig(f"no_speech_p must be in [0, 1) (0: off), not {self.no_speech_p}")
        if self.decoder not in DECODERS:
            raise InvalidAsrConfig(f"decoder must be one of {', '.join(DECODERS)}, not {self.decoder!r}")

    def resolved_compute_type(self, device: str) -> str:
        if self.compute_type != "auto":
            return self.compute_type
        return "float16" if device == "cuda" else "int8"


class FasterWhisperBackend(AsrBackend):
    def __init__(self, config: FasterWhisperConfig) -> None:
        from faster_whisper import WhisperModel

        self.config = config
        source = _source(config)
        device = config.device
        if device == "auto":
            import ctranslate2
            device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
        try:
            self.model = WhisperModel(source, device=device, compute_type=config.resolved_compute_type(device),
                                      cpu_threads=config.cpu_threads)
        except Exception as exc:  # download errors, bad folders and CTranslate2 errors alike
            raise ModelUnavailable(
                f"faster-whisper model {config.model!r} could not be loaded ({type(exc).__name__}: {exc}); "
                "give a CTranslate2 folder or download the model once with a network connection") from exc
        tokenizer = self.model.hf_tokenizer
        self.text = WhisperText(tokenizer, tokenizer.token_to_id("<|endoftext|>"))
        self._sentence_end = SentenceEnd(tokenizer.get_vocab())
        features = self.model.feature_extractor
        self.window_seconds = features.n_samples / features.sampling_rate
        self._frames = features.nb_max_frames
        self._max_positions = decoder_positions(Path(source)) if Path(source).is_dir() else 448
        from faster_whisper.tokenizer import Tokenizer
        multilingual = self.model.model.is_multilingual
        self._window_tokenizer = Tokenizer(tokenizer, multilingual, task="transcribe",
                                           language="en" if multilingual else None)
        self.guess_decoder = (_guess_decoder(Path(source)) if config.decoder == "guess" and device == "cpu"
                              and Path(source).is_dir() else None)

    def transcribe(self, audio, forced=(), prompt=(), guess=()) -> Hypothesis:
        """See `AsrBackend.transcribe`; `guess` saves decoder steps where the guess decoder runs."""
        audio = check_audio(audio)
        audio_s = len(audio) / SAMPLE_RATE
        windows = encoder_windows(audio_s, self.window_seconds)
        if not windows and self._frames == _FASTER_WHISPER_FRAMES:
            return self._transcribe_segments(audio, forced, prompt)
        tried = []
        for window in windows[:-1]:  # shorter than the model's: kept unless it loops
            tried.append(window)
            hypothesis = self.decode_in_window(audio, window, forced, prompt,
                                               max_new_tokens=max(1, token_cap(audio_s) - len(forced)),
                                               guess=guess)
            tokens = (*forced, *hypothesis.tokens)
            if self._no_speech(hypothesis, forced) or not looks_looped(self.text.decode(tokens), len(tokens), audio_s):
                break
        else:
            tried.append(windows[-1] if windows else self.window_seconds)
            hypothesis = self.decode_in_window(audio, tried[-1], forced, prompt, guess=guess)
        stats = replace(hypothesis.stats, windows=tuple(tried))
        if self._no_speech(hypothesis, forced):
            return Hypothesis((), stats, p_no_speech=hypothesis.p_no_speech, avg_logprob=hypothesis.avg_logprob)
        return replace(hypothesis, stats=stats)

    def _no_speech(self, hypothesis: Hypothesis, forced) -> bool:
        """Whether a decode after no forced words heard no speech (Whisper's rule; see the module)."""
        p, logprob = hypothesis.p_no_speech, hypothesis.avg_logprob
        return (not forced and bool(self.config.no_speech_p) and p is not None and logprob is not None
                and p > self.config.no_speech_p and logprob < NO_SPEECH_LOGPROB)

    def decode_in_window(self, audio: np.ndarray, window_s: float, forced=(), prompt=(),
                         max_new_tokens: int | None = None, guess=()) -> Hypothesis:
        """One greedy decode of `audio` padded with silence to an encoder window of `window_s`
        seconds (at most the model's own); `transcribe` picks the window. `max_new_tokens`: at
        most the config's (None: the config's). `guess`: the likely continuation of `forced`."""
        n = round(window_s * SAMPLE_RATE)
        if not 0 < window_s <= self.window_seconds:
            raise InvalidAsrConfig(f"an encoder window of {window_s:g} s is not in (0, {self.window_seconds:g}] s")
        if len(audio) > n:
            raise InvalidAudio(f"audio of {len(audio) / SAMPLE_RATE:.2f} s is longer than the "
                               f"{window_s:g} s window")
        budget = min(self.config.max_new_tokens, max_new_tokens or self.config.max_new_tokens)
        model, tokenizer = self.model, self._window_tokenizer
        # The audio padded to the window before the log-mel, as Whisper's own padding (and
        # transformers' extractor) does: padding the features afterwards gives silence other values.
        frames = n // model.feature_extractor.hop_length
        features = model.feature_extractor(audio, padding=n - len(audio))[:, :frames]
        head = ([tokenizer.sot_prev] + list(prompt)[-(model.max_length // 2 - 1):]) if prompt else []
        sequence = head + list(tokenizer.sot_sequence) + [tokenizer.no_timestamps] + list(forced)
        total = min(model.max_length, self._max_positions)
        room = total - len(sequence)
        if room < 1:
            raise InvalidAsrConfig(f"the forced prefix and prompt ({len(sequence)} tokens) leave no room "
                                   "in the model's decoder")
        new = min(room, budget)
        encoded = model.encode(np.ascontiguousarray(features))
        if self.guess_decoder is not None:
            return self._decode_guessed(encoded, sequence[:len(sequence) - len(forced)], forced, guess, new,
                                        sot_index=len(head))
        # CTranslate2 decodes at most min(max_length / 2, max_length - prefix) new tokens.
        result = model.model.generate(
            encoded, [sequence], beam_size=1,
            max_length=min(total, max(2 * new, len(sequence) + new)), suppress_blank=not forced,
            suppress_tokens=[-1], return_scores=True, return_no_speech_prob=True, return_logits_vocab=True)[0]
        eot = self.text.first_special
        tokens = result.sequences_ids[0]
        marks = self._sentence_end.probabilities(tokens, result.logits[0])
        if forced and tokens[:len(forced)] == list(forced):  # CTranslate2 returns the forced tokens too
            tokens = tokens[len(forced):]
        end = next((i for i, t in enumerate(tokens) if t >= eot), len(tokens))
        # CTranslate2's score is the log-prob per generated token; Whisper averages over one more
        logprob = result.scores[0] * len(tokens) / (len(tokens) + 1)
        p_end, p_on = marks if marks is not None and end == len(tokens) else (None, None)
        return Hypothesis(tuple(tokens[:end]), p_sentence_end=p_end, p_goes_on=p_on,
                          p_no_speech=result.no_speech_prob, avg_logprob=logprob)

    def _decode_guessed(self, encoded, prefix, forced, guess, budget: int, sot_index: int) -> Hypothesis:
        eot = self.text.first_special
        out = self.guess_decoder.decode(np.asarray(encoded), prefix, forced, guess, max_new_tokens=budget,
                                        eot=eot, no_speech=self._window_tokenizer.no_speech, sot_index=sot_index,
                                        suppress_blank=not forced, marks=self._sentence_end.mark_ids)
        ids = [*forced, *out.tokens]
        marks = self._sentence_end.probabilities(ids, out.logits) if out.ended else None
        p_end, p_on = marks if marks is not None else (None, None)
        stats = DecodeStats(target_passes=out.passes, accepted_per_round=(out.accepted,),
                            draft_lengths=(out.guessed,))
        return Hypothesis(out.tokens, stats, p_sentence_end=p_end, p_goes_on=p_on, p_no_speech=out.p_no_speech,
                          avg_logprob=out.avg_logprob)

    def _transcribe_segments(self, audio, forced, prompt) -> Hypothesis:
        multilingual = self.model.model.is_multilingual
        prefix = self.text.decode(forced).strip()
        no_speech = bool(self.config.no_speech_p) and not prefix  # Whisper's rule, as in `_no_speech`
        segments, _ = self.model.transcribe(
            audio, language="en" if multilingual else None, beam_size=1, best_of=1, temperature=0.0,
            condition_on_previous_text=False, initial_prompt=list(prompt) or None,
            prefix=prefix or None, without_timestamps=True, vad_filter=False,
            compression_ratio_threshold=None, log_prob_threshold=NO_SPEECH_LOGPROB if no_speech else None,
            no_speech_threshold=self.config.no_speech_p if no_speech else None,
            max_new_tokens=self.config.max_new_tokens)
        # The segments are a lazy generator: decode here, in the caller's (worker) thread.
        eot = self.text.first_special
        tokens = [t for segment in segments for t in segment.tokens if t < eot]
        # CTranslate2 returns the prefix it was given (re-encoded from text, as faster-whisper does).
        given = self.text.encode(" " + prefix) if prefix else []
        if tokens[: len(given)] == given:
            tokens = tokens[len(given):]
        return Hypothesis(tuple(tokens))


_FASTER_WHISPER_FRAMES = 3000  # the features faster-whisper pads every segment to (30 s)


def _guess_decoder(folder: Path):
    """The torch decoder on the folder's float weights, with the model's suppressed tokens; None
    for weights quantized at conversion (they decode through CTranslate2 alone)."""
    import json

    from foresay.engine.asr.whisper.guess_decoder import load_guess_decoder
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return load_guess_decoder(folder, config.get("suppress_ids", ()), config.get("suppress_ids_begin", ()))


def _source(config: FasterWhisperConfig) -> str:
    """What to hand faster-whisper: a CTranslate2 folder (converted here when need be) or a name."""
    from foresay.engine.model_registry import SHIPPED_WHISPER, shipped_model_dir

    if is_fixture(config.model):
        return str(ctranslate2_folder(config.model, config.fixture_root))
    if config.model in SHIPPED_WHISPER:
        return str(converted_folder(shipped_model_dir(config.model, SHIPPED_WHISPER), "float16", config.cache_root))
    path = Path(config.model).expanduser()
    if path.is_dir() and is_transformers_whisper(path):
        return str(converted_folder(path, "float16", config.cache_root))
    folder = None if path.is_dir() else fetched_whisper(config.model)
    return str(folder) if folder is not None else config.model  # without a fetched copy the hub is asked

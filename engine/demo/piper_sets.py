"""Truth sets for `foresay bench turns` spoken by a real neural voice (Piper en_US-joe-medium).

    python -m foresay.engine.demo.turn_sets --voice piper --out turns/piper --requests 40
    python -m foresay.engine.demo.turn_sets --voice piper --out turns/piper-paused --pause 0.45-0.75
    python -m foresay.engine.demo.turn_sets --voice piper --out turns/piper-two --gap-s 2.5 --room silence

The requests are `assistant_requests.REQUESTS` (commands, questions, read sentences, digit
strings) in a seeded order. Each is read with its own speaking rate and variation (Piper's
`length_scale`, `noise_scale`, `noise_w_scale`), so the set is not one monotone reading. With
`--pause`, only requests with a phrase break are used, and the break holds silence of the drawn
length: spliced into one reading of the whole request (`--pause-style splice`, the default: the
words before the break keep the intonation of a voice that runs on; a pause the voice made
there itself, at a comma of the text, is replaced, not added to), or a comma read at the break
and its silence stretched (`comma`: the voice's intonation falls as at a comma). With
`--gap-s`, each recording holds two requests (`--per-recording N`: N), that far apart, each
its own turn: one user's conversation, where what the decision learns of their pauses carries over. `--room noise`: low-passed (pink-ish) noise at 15-35 dB below the
speech covers the whole recording; `--room silence`: digital silence around and between the
speech. The truth format is `turn_sets`' (`{"audio", "turns": [{"start_s", "end_s", "text"}],
"pause_s", "spoken", "voice"}`); digits stay digits in the truth text.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from foresay.engine.demo.assistant_requests import PHRASE_BREAK, REQUESTS, break_index, spoken_text
from foresay.engine.demo.speech import FRAME, SAMPLE_RATE, loud_frames, true_runs, write_wav
from foresay.engine.errors import ForesayError

VOICE = "piper-en_US-joe-medium"
ROOMS = ("noise", "silence")
PAUSE_STYLES = ("splice", "comma")
MIN_COMMA_PAUSE_S = 0.12  # a comma Piper reads leaves at least this much silence
FADE_S = 0.005            # the fade out and in around a spliced pause (no click)
SILENT_DB = -45.0         # a reading's frame this far under its loudest is silence ...
MIN_SILENCE_S = 0.1       # ... and a run of them this long at a phrase break, a pause of its own
STRESS = str.maketrans("", "", "ˈˌ")


@dataclass(frozen=True)
class Reading:
    """How one request is read (Piper's synthesis settings)."""
    length_scale: float  # > 1: slower
    noise_scale: float  # variation of the voice
    noise_w_scale: float  # variation of the phoneme lengths

    @classmethod
    def draw(cls, rng: random.Random) -> "Reading":
        return cls(round(rng.uniform(0.85, 1.25), 3), round(rng.uniform(0.4, 0.9), 3), round(rng.uniform(0.5, 1.0), 3))

    def label(self) -> str:
        return f"{VOICE} length {self.length_scale} noise {self.noise_scale} noise_w {self.noise_w_scale}"


def load_voice(seed: int = 0, alignments: bool = False):
    """The voice, its sampling seeded: a set renders alike each time (with one onnxruntime).
    `alignments`: the graph also says how many samples each phoneme took (needs `onnx`)."""
    import onnxruntime
    from piper import PiperVoice

    from foresay.engine.registry_models import require_registry_model

    onnxruntime.set_seed(seed)  # the seed a session takes when it is made
    return PiperVoice.load(str(require_registry_model(VOICE) / "en_US-joe-medium.onnx"),
                           include_alignments=alignments)


def read(voice, text: str, reading: Reading) -> np.ndarray:
    """16 kHz float32 samples of `text`, trimmed to its speech (frames within 35 dB of the loudest)."""
    return read_aligned(voice, text, reading)[0]


def read_aligned(voice, text: str, reading: Reading) -> tuple[np.ndarray, list[int]]:
    """(16 kHz float32 samples of `text` trimmed to its speech, the sample in them where each
    boundary between two words lies: the middle of the word gap the phoneme alignment gives;
    empty when the voice was loaded without alignments)."""
    from piper import SynthesisConfig

    from foresay.audio.resample import resample

    config = SynthesisConfig(length_scale=reading.length_scale, noise_scale=reading.noise_scale,
                             noise_w_scale=reading.noise_w_scale)
    chunks = list(voice.synthesize(text, syn_config=config, include_alignments=True))
    if not chunks:
        raise ForesayError(f"Piper rendered nothing for {text!r}")
    rate = chunks[0].sample_rate
    samples = resample(np.concatenate([c.audio_float_array for c in chunks]), rate, SAMPLE_RATE)
    loud = np.flatnonzero(loud_frames(samples))
    first, end = loud[0] * FRAME, (loud[-1] + 1) * FRAME
    boundaries, at = [], 0
    for chunk in chunks:
        for aligned in chunk.phoneme_alignments or ():
            if aligned.phoneme == " ":
                boundaries.append(round((at + aligned.num_samples / 2) * SAMPLE_RATE / rate) - first)
            at += int(aligned.num_samples)
        if not chunk.phoneme_alignments:
            at += len(chunk.audio_float_array)
    return samples[first:end], [b for b in boundaries if 0 < b < end - first]


def phoneme_words(voice, text: str) -> list[str]:
    """The words of `text` as the voice phonemizes them, without stress marks or punctuation."""
    phonemes = "".join(p for sentence in voice.phonemize(text) for p in sentence).translate(STRESS)
    return [word.strip(".,?!;:") for word in phonemes.strip(" .,?!").split(" ")]


def longest_gap(samples: np.ndarray) -> tuple[int, int]:
    """(first, end) sample of the longest run of quiet frames inside the speech."""
    quiet = true_runs(~loud_frames(samples))
    if not quiet:
        return 0, 0
    start, end = max(quiet, key=lambda run: run[1] - run[0])
    return start * FRAME, end * FRAME


def silence_around(samples: np.ndarray, cut: int) -> tuple[int, int]:
    """(first, end) sample of the silence the reading already has at `cut`: the run of 10 ms
    frames more than `SILENT_DB` under the loudest that holds or touches the frame at `cut`, when
    it is longer than a stop's closure (`MIN_SILENCE_S`); else (cut, cut). The spliced pause
    replaces it: where the break falls on a comma of the text ("the cliff, | its lamp"), the
    voice's own pause would otherwise add to the drawn one (0.63 s drawn, 1.26 s of silence)."""
    quiet = ~loud_frames(samples, SILENT_DB)
    at = min(cut // FRAME, len(quiet) - 1)
    touching = [(first, end) for first, end in true_runs(quiet) if first - 1 <= at <= end]
    if not touching or (touching[0][1] - touching[0][0]) * FRAME < MIN_SILENCE_S * SAMPLE_RATE:
        return cut, cut
    return touching[0][0] * FRAME, touching[0][1] * FRAME


def read_with_pause(voice, request: str, reading: Reading, pause_s: float,
                    style: str = "splice") -> tuple[np.ndarray, str]:
    """(samples, the text given to Piper with the pause marked): the request with `pause_s` of
    digital silence at its phrase break, spliced into one reading or stretched from a comma's
    (`style`, see the module docstring; `splice` needs a voice loaded with alignments)."""
    k = break_index(request)
    if k is None:
        raise ForesayError(f"no phrase break marked in {request!r}")
    words = spoken_text(request).split()
    head = " ".join(words[:k]).rstrip(",")
    middle = np.zeros(round(pause_s * SAMPLE_RATE), np.float32)
    if style == "comma":
        spoken = f"{head}, {' '.join(words[k:])}"
        samples = read(voice, spoken, reading)
        start, end = longest_gap(samples)
        if end - start < MIN_COMMA_PAUSE_S * SAMPLE_RATE:
            raise ForesayError(f"Piper left no pause at the comma of {spoken!r}")
        return np.concatenate([samples[:start], middle, samples[end:]]), spoken
    if style != "splice":
        raise ForesayError(f"pause style must be one of {', '.join(PAUSE_STYLES)}, not {style!r}")
    text = spoken_text(request)
    samples, boundaries = read_aligned(voice, text, reading)
    said, head_words = phoneme_words(voice, text), phoneme_words(voice, head)
    n = len(head_words)
    # the voice may link a word to the next ("brother on" -> "bɹʌðɚɹ ɔn"): the last head word
    # need only begin the same
    if (len(boundaries) != len(said) - 1 or said[:n - 1] != head_words[:n - 1]
            or not said[n - 1].startswith(head_words[-1])):
        raise ForesayError(f"Piper's alignment of {text!r} does not show where {head!r} ends")
    start, end = silence_around(samples, boundaries[n - 1])
    fade = np.linspace(1.0, 0.0, round(FADE_S * SAMPLE_RATE), dtype=np.float32)
    before, after = samples[:start].copy(), samples[end:].copy()
    before[-len(fade):] *= fade
    after[:len(fade)] *= fade[::-1]
    return np.concatenate([before, middle, after]), f"{head} [pause] {' '.join(words[k:])}"


def room_noise(n: int, level: float, rng: np.random.Generator) -> np.ndarray:
    """Low-passed white noise (a room's hum and air more than hiss) of RMS `level`."""
    white = rng.standard_normal(n + 64)
    kernel = np.exp(-np.arange(64) / 12.0)
    noise = np.convolve(white, kernel / kernel.sum(), mode="valid")[:n]
    return (noise / (noise.std() or 1.0) * level).astype(np.float32)


def pick_requests(count: int, rng: random.Random, need_break: bool) -> list[str]:
    pool = [r for r in REQUESTS if PHRASE_BREAK in r] if need_break else list(REQUESTS)
    if count > len(pool):
        raise ForesayError(f"only {len(pool)} requests{' with a phrase break' if need_break else ''} "
                           f"to choose from, not {count}")
    return rng.sample(pool, count)


def build_piper_set(out: Path, requests: int, pause: tuple[float, float] | None = None, room: str = "noise",
                    gap_s: float | None = None, seed: int = 0, lead_s: float = 0.5, tail_s: float = 0.3,
                    pause_style: str = "splice", per_recording: int | None = None) -> Path:
    """Render the set into folder `out`; returns the path of its `set.jsonl`."""
    if room not in ROOMS:
        raise ForesayError(f"room must be one of {', '.join(ROOMS)}, not {room!r}")
    if pause_style not in PAUSE_STYLES:
        raise ForesayError(f"pause style must be one of {', '.join(PAUSE_STYLES)}, not {pause_style!r}")
    if requests < 1:
        raise ForesayError("a truth set needs at least one request")
    if pause is not None and not 0 < pause[0] <= pause[1]:
        raise ForesayError(f"pause range must be 0 < min <= max seconds, got {pause}")
    if gap_s is not None and gap_s <= 0:
        raise ForesayError(f"the gap between two requests must be positive, got {gap_s}")
    if per_recording is not None and (per_recording < 1 or (per_recording > 1 and gap_s is None)):
        raise ForesayError(f"{per_recording} requests per recording: need at least 1, and a gap between them")
    rng = random.Random(f"piper-set:{seed}")
    per_recording = per_recording or (2 if gap_s else 1)
    texts = pick_requests(requests * per_recording, rng, need_break=pause is not None)
    voice = load_voice(seed, alignments=pause is not None and pause_style == "splice")
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(requests):
        pieces, turns, spoken, readings, pauses = [np.zeros(round(lead_s * SAMPLE_RATE), np.float32)], [], [], [], []
        at = lead_s
        for j, request in enumerate(texts[i * per_recording:(i + 1) * per_recording]):
            if j:
                pieces.append(np.zeros(round(gap_s * SAMPLE_RATE), np.float32))
                at += gap_s
            reading = Reading.draw(rng)
            if pause is not None:
                pauses.append(round(rng.uniform(*pause), 3))
                samples, said = read_with_pause(voice, request, reading, pauses[-1], pause_style)
            else:
                samples, said = read(voice, spoken_text(request), reading), spoken_text(request)
            pieces.append(samples)
            turns.append({"start_s": round(at, 3), "end_s": round(at + len(samples) / SAMPLE_RATE, 3),
                          "text": spoken_text(request)})
            at += len(samples) / SAMPLE_RATE
            spoken.append(said)
            readings.append(reading.label())
        pieces.append(np.zeros(round(tail_s * SAMPLE_RATE), np.float32))
        recording = np.concatenate(pieces)
        if room == "noise":
            speech_rms = float(np.sqrt(np.mean(np.concatenate(pieces[1:-1]) ** 2)))
            level = speech_rms * 10 ** (-rng.uniform(15.0, 35.0) / 20)
            recording = recording + room_noise(len(recording), level, np.random.default_rng(rng.getrandbits(32)))
        name = f"{i:04d}.wav"
        write_wav(out / name, recording)
        lines.append({"audio": name, "turns": turns, "pause_s": pauses[0] if len(pauses) == 1 else (pauses or None),
                      "spoken": " / ".join(spoken), "voice": "; ".join(readings), "room": room,
                      **({"pause_style": pause_style} if pause is not None else {})})
    path = out / "set.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path

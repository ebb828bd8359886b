"""Truth sets for `foresay bench turns`: held-out demo requests spoken by espeak-ng in held-out
voices, optionally with a pause in the middle of the request, and where each request starts and ends.

    python -m foresay.engine.demo.turn_sets --out turns/complete --requests 40
    python -m foresay.engine.demo.turn_sets --out turns/paused --requests 40 --pause 0.3-0.9
    python -m foresay.engine.demo.turn_sets --voice piper --out turns/piper --requests 40

`--voice piper` reads varied assistant requests with a real neural voice instead (`piper_sets`:
speaking rates, mid-request pauses, room noise or digital silence, two requests per recording).

Each request is the first turn of a held-out test dialogue (so its reply needs no context), in a
voice setting no training clip used. With `--pause`, a silence of that many seconds (uniform in
the range) is put between two words, at a point where the words so far are not a whole request
("set a timer for ... ten minutes"); espeak-ng renders the request as one sentence with an SSML
break, so its intonation runs on over the pause. The truth start and end are where the rendered
speech begins and ends (10 ms frames within 35 dB of the loudest); white noise of the voice
setting's level covers the whole recording. Writes one WAV per request and `set.jsonl`, one line
per recording: `{"audio": "0000.wav", "turns": [{"start_s", "end_s", "text"}], "pause_s", "spoken"
(what espeak-ng was given, the pause marked), "voice"}`.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import replace
from html import escape
from pathlib import Path

import numpy as np

from foresay.engine.demo.completeness import is_complete_request
from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
from foresay.engine.demo.speech import (FRAME, SAMPLE_RATE, VoiceSetting, loud_frames, speak, voice_settings,
                                        with_break, write_wav)
from foresay.engine.errors import ForesayError



def speech_extent(samples: np.ndarray, rel_db: float = -35.0) -> tuple[int, int]:
    """First and last sample of the frames within `rel_db` of the loudest frame."""
    loud = np.flatnonzero(loud_frames(samples, rel_db))
    return int(loud[0]) * FRAME, int(loud[-1] + 1) * FRAME


def pause_point(text: str, rng: random.Random) -> int | None:
    """After how many words to pause: inside the request (at least one word on each side), where
    the words so far do not make a whole request; None for a request too short for that."""
    words = text.split()
    points = [k for k in range(1, len(words)) if not is_complete_request(" ".join(words[:k]))]
    return rng.choice(points) if points else None


def render(text: str, voice: VoiceSetting, rng: random.Random, pause_s: float | None = None,
           lead_s: float = 0.5, tail_s: float = 0.3) -> tuple[np.ndarray, float, float, str]:
    """(samples, start_s, end_s, SSML or text spoken): the request with `lead_s` of silence before
    and `tail_s` after its speech, and a pause of `pause_s` inside it (None: none)."""
    spoken = escape(text, quote=False)
    if pause_s is not None:
        k = pause_point(text, rng)
        if k is None:
            raise ForesayError(f"no point to pause inside {text!r}")
        spoken = with_break(text.split(), k, pause_s)
    clean = speak(spoken, replace(voice, noise=0.0), 0, ssml=pause_s is not None)
    a, b = speech_extent(clean)
    speech = clean[a:b]
    lead, tail = int(lead_s * SAMPLE_RATE), int(tail_s * SAMPLE_RATE)
    out = np.concatenate([np.zeros(lead, np.float32), speech, np.zeros(tail, np.float32)])
    peak = float(np.abs(speech).max()) or 1.0
    out += np.random.default_rng(rng.getrandbits(32)).standard_normal(len(out)).astype(np.float32) * voice.noise * peak
    return out, lead_s, (lead + len(speech)) / SAMPLE_RATE, spoken


def held_out_texts(count: int, seed: int, min_words: int = 1) -> list[str]:
    """First turns of held-out test dialogues, distinct, in a seeded order."""
    generator = DialogueGenerator(DomainConfig(seed=seed), "test")
    seen: dict[str, None] = {}
    for _ in range(100 * count):
        text = generator.dialogue().turns[0].user
        if len(text.split()) >= min_words:
            seen.setdefault(text, None)
        if len(seen) >= count:
            break
    return list(seen)


def build_set(out: Path, requests: int, pause: tuple[float, float] | None = None, seed: int = 0) -> Path:
    """Render the set into folder `out`; returns the path of its `set.jsonl`."""
    if requests < 1:
        raise ForesayError("a truth set needs at least one request")
    if pause is not None and not 0 < pause[0] <= pause[1]:
        raise ForesayError(f"pause range must be 0 < min <= max seconds, got {pause}")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"turn-set:{seed}")
    lines = []
    for i, text in enumerate(held_out_texts(requests, seed, min_words=3 if pause else 1)):
        voice = voice_settings("test", rng)
        pause_s = round(rng.uniform(*pause), 3) if pause else None
        samples, start_s, end_s, spoken = render(text, voice, rng, pause_s)
        name = f"{i:04d}.wav"
        write_wav(out / name, samples)
        lines.append({"audio": name, "turns": [{"start_s": round(start_s, 3), "end_s": round(end_s, 3),
                                                "text": text}], "pause_s": pause_s, "spoken": spoken,
                      "voice": voice.voice})
    path = out / "set.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _pause_range(text: str) -> tuple[float, float]:
    lo, sep, hi = text.partition("-")
    try:
        return (float(lo), float(hi if sep else lo))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds as MIN-MAX, e.g. 0.3-0.9, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m foresay.engine.demo.turn_sets", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="folder for the WAVs and set.jsonl")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--pause", type=_pause_range, metavar="MIN-MAX",
                        help="a pause of MIN to MAX seconds inside every request (default: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--voice", choices=["espeak", "piper"], default="espeak",
                        help="espeak: held-out demo requests in espeak-ng voices; piper: varied assistant "
                             "requests in the Piper voice en_US-joe-medium (registry model)")
    parser.add_argument("--room", choices=["noise", "silence"], default="noise",
                        help="piper: room noise over the recording, or digital silence around the speech")
    parser.add_argument("--pause-style", choices=["splice", "comma"], default="splice",
                        help="piper: the pause spliced into one reading at the phrase break (default), or a "
                             "comma read there and its silence stretched")
    parser.add_argument("--gap-s", type=float, metavar="SECONDS",
                        help="piper: two requests per recording, this far apart (two turns)")
    parser.add_argument("--per-recording", type=int, metavar="N",
                        help="piper, with --gap-s: N requests per recording instead of two")
    args = parser.parse_args(argv)
    try:
        if args.voice == "piper":
            from foresay.engine.demo.piper_sets import build_piper_set
            path = build_piper_set(args.out, args.requests, args.pause, args.room, args.gap_s, args.seed,
                                   pause_style=args.pause_style, per_recording=args.per_recording)
        elif (args.gap_s is not None or args.room != "noise" or args.pause_style != "splice"
              or args.per_recording is not None):
            raise ForesayError("--room, --gap-s, --per-recording and --pause-style need --voice piper")
        else:
            path = build_set(args.out, args.requests, args.pause, args.seed)
    except ForesayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.requests} recordings and {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`foresay bench demo`: the demo profile end to end on held-out requests in held-out voices.

It runs the `demo-own-ear` profile (the demo with its own Whisper pair, whatever is on this
machine) unless `--profile` says otherwise: `--profile demo` measures the real Whisper it hears
with where one is fetched. Each request (the first turn of a held-out test dialogue, so its
reply needs no context) is spoken by espeak-ng in a voice setting no training clip uses, written
to a WAV with silence around it, and replayed through the whole pipeline (`foresay replay`'s
code path) with a fresh conversation. Three figures, each saying what it measures:

- answered right: the spoken reply is the domain's correct reply (what the user hears; a request
  heard with a word missing but answered right counts, e.g. "on what continent is Brazil?" heard
  as "what continent is Brazil?" and answered "Brazil is in South America.");
- heard word for word: the pipeline's final transcript has exactly the request's words;
- both: heard word for word and answered right.

The chat model's own score on its card (92%) is another measure: typed held-out requests, no
speech recognition in between.
"""
from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from foresay.app.saving import write_report
from foresay.app.arguments import add_settings_arguments, settings_from
from foresay.app.commands import replay
from foresay.app.config import Settings
from foresay.app.paths import add_force_argument, check_outputs
from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
from foresay.engine.demo.evaluate_whisper import words
from foresay.engine.demo.speech import SAMPLE_RATE, VoiceSetting, speak, voice_settings, write_wav
from foresay.engine.errors import ForesayError


@dataclass(frozen=True)
class DemoRequest:
    text: str
    reply: str  # the domain's correct reply
    voice: VoiceSetting


@dataclass(frozen=True)
class DemoResult:
    request: DemoRequest
    heard: str          # the pipeline's final transcript of the request
    replied: str        # the reply it spoke
    reply_seconds: float  # length of the spoken reply
    voice_to_voice_ms: float | None

    @property
    def heard_right(self) -> bool:
        return words(self.heard) == words(self.request.text)

    @property
    def replied_right(self) -> bool:
        return self.replied.strip() == self.request.reply and self.reply_seconds > 0.3


def held_out_requests(count: int, seed: int = 0) -> list[DemoRequest]:
    """First turns of held-out test dialogues with held-out voice settings, seeded."""
    rng = random.Random(f"bench-demo:{seed}")
    dialogues = DialogueGenerator(DomainConfig(seed=seed), "test").dialogues(count)
    return [DemoRequest(d.turns[0].user, d.turns[0].reply, voice_settings("test", rng)) for d in dialogues]


def write_request(request: DemoRequest, path: Path, rng: random.Random, lead_s: float = 0.5) -> Path:
    speech = speak(request.text, request.voice, rng.getrandbits(32))
    silence = np.zeros(int(lead_s * SAMPLE_RATE), dtype=np.float32)
    return write_wav(path, np.concatenate([silence, speech, silence]))


def _seconds(path: Path) -> float:
    with wave.open(str(path)) as w:
        return w.getnframes() / w.getframerate()


async def check_requests(settings: Settings, requests: list[DemoRequest], folder: Path,
                         realtime: bool = False) -> list[DemoResult]:
    """Replay each request through the pipeline (a fresh conversation each) and compare."""
    rng = random.Random(0)
    results = []
    for i, request in enumerate(requests):
        audio = write_request(request, folder / f"request-{i:03d}.wav", rng)
        out = folder / f"reply-{i:03d}.wav"
        metrics = await replay(settings, audio, out, realtime=realtime)
        heard = " ".join(m["user_text"] for m in metrics)
        replied = " ".join(m["reply_text"] for m in metrics)
        latency = metrics[0].get("voice_to_voice_ms") if len(metrics) == 1 else None
        results.append(DemoResult(request, heard, replied, _seconds(out) if out.exists() else 0.0, latency))
    return results


def summary(results: list[DemoResult], realtime: bool) -> dict:
    """Shares of requests heard and answered right; the latency only when the replay was paced on
    the audio clock (unpaced, the wall clock runs ahead of the audio and the figure means nothing)."""
    n = len(results)
    latencies = [r.voice_to_voice_ms for r in results
                 if realtime and isinstance(r.voice_to_voice_ms, (int, float))]
    return {"requests": n,
            "heard_right": sum(r.heard_right for r in results) / n,
            "replied_right": sum(r.replied_right for r in results) / n,
            "both_right": sum(r.replied_right and r.heard_right for r in results) / n,
            "voice_to_voice_ms_median": statistics.median(latencies) if latencies else None}


def result_lines(r: DemoResult) -> str:
    """One request's outcome: "ok" when answered right (whether or not heard word for word)."""
    mark = "ok " if r.replied_right else "MISS"
    heard = "heard" if r.heard_right else "heard (not word for word)"
    return (f"{mark} {r.request.voice.voice:<20} said {r.request.text!r}\n"
            f"     {heard} {r.heard.strip()!r}\n     replied {r.replied.strip()!r}"
            + ("" if r.replied_right else f"\n     expected {r.request.reply!r}"))


def run_bench_demo(args) -> int:
    if args.requests < 1:
        raise ForesayError("--requests must be at least 1")
    settings = settings_from(args)
    check_outputs({"--json": Path(args.json) if args.json else None}, {}, force=args.force)
    requests = held_out_requests(args.requests, args.data_seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep) if args.keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        results = asyncio.run(check_requests(settings, requests, folder, realtime=args.realtime))
    for r in results:
        print(result_lines(r))
    report = summary(results, args.realtime)
    print(f"of {report['requests']} spoken held-out requests: answered right {100 * report['replied_right']:.0f}%, "
          f"heard word for word {100 * report['heard_right']:.0f}%, both {100 * report['both_right']:.0f}%" +
          (f"; voice-to-voice median {report['voice_to_voice_ms_median']:.0f} ms"
           if report["voice_to_voice_ms_median"] is not None else ""), file=sys.stderr)
    if args.json:
        write_report(Path(args.json), {"summary": report, "results": [
            {"said": r.request.text, "voice": r.request.voice.voice, "heard": r.heard, "expected": r.request.reply,
             "replied": r.replied, "voice_to_voice_ms": r.voice_to_voice_ms} for r in results]})
    return 0


def register(benches) -> None:
    p = benches.add_parser("demo", help="the demo profile end to end: held-out spoken requests -> replies (its "
                           "own Whisper pair, demo-own-ear, unless --profile demo gives it a real one)")
    p.add_argument("--requests", type=int, default=20, help="held-out requests to speak and replay")
    p.add_argument("--data-seed", type=int, default=0, help="seed of the dialogue generator")
    p.add_argument("--realtime", action="store_true",
                   help="pace each recording on the audio clock (latencies then mean something; slower)")
    p.add_argument("--keep", metavar="DIR", help="keep the request and reply WAVs here")
    p.add_argument("--json", metavar="OUT")
    add_force_argument(p)
    add_settings_arguments(p)
    p.set_defaults(func=run_bench_demo, profile="demo-own-ear")

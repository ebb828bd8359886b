"""`foresay bench tts`: time to first chunk, cold and from a prepared sentence, and real-time factor."""
from __future__ import annotations

import argparse
import asyncio
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from foresay.app.paths import add_force_argument, check_outputs
from foresay.app.saving import write_report
from foresay.engine.sentences import split_sentences
from foresay.engine.tts.base import TtsEngine
from foresay.engine.tts.errors import InvalidTtsConfig
from foresay.engine.tts.factory import build_engine

DEFAULT_TEXT = "Sure, I can help with that. The nearest station is about ten minutes away on foot."
# a first sentence of about 100 characters: an engine that speaks a sentence at a time waits for all of it
LONG_TEXT = ("The nearest station is about ten minutes away on foot, just past the bakery on the corner "
             "of Elm Street. Trains leave every quarter hour.")


@dataclass(frozen=True)
class TtsBenchResult:
    engine: str
    ttfc_cold_ms: float      # median: prepare() and stream() at once, to the first chunk delivered
    ttfc_prepared_ms: float  # median: stream() on a prepared, held sentence, to its first chunk
    rtf: float               # median real-time factor of the cold runs (compute s per audio s)
    repeats: int
    ttfc_cold_long_ms: float | None = None  # median cold first chunk of the long text
    long_first_sentence_chars: int | None = None


async def _cold(engine: TtsEngine, text: str):
    run = engine.prepare(text)
    async for _ in run.stream():
        pass
    await run.wait_done()
    timing = run.timing()
    return timing.first_delivered_at - timing.prepared_at, timing.rtf


async def measure(engine: TtsEngine, text: str, repeats: int, long_text: str | None = None) -> TtsBenchResult:
    """Warms the engine up, then runs `repeats` cold and `repeats` prepared syntheses of `text`
    (and `repeats` cold ones of `long_text`)."""
    if repeats < 1:
        raise InvalidTtsConfig(f"repeats must be at least 1, got {repeats}")
    await engine.warmup()
    cold, prepared, rtf, cold_long = [], [], [], []
    for _ in range(repeats):
        first_chunk_s, run_rtf = await _cold(engine, text)
        cold.append(first_chunk_s)
        rtf.append(run_rtf)
        if long_text:
            cold_long.append((await _cold(engine, long_text))[0])

        run = engine.prepare(text)
        await run.ready()
        async for _ in run.stream():
            pass
        await run.wait_done()
        prepared.append(run.timing().ttfc_stream_s)
    engine.close()
    long_chars = len(split_sentences(long_text, final=True)[0][0].text) if long_text else None
    return TtsBenchResult(engine.name, 1000 * statistics.median(cold), 1000 * statistics.median(prepared),
                          statistics.median(rtf), repeats,
                          1000 * statistics.median(cold_long) if cold_long else None, long_chars)


def _config(args: argparse.Namespace):
    if args.engine == "espeak":
        from foresay.engine.tts.espeak import EspeakConfig, EspeakVoice

        return EspeakConfig(voice=EspeakVoice(voice=args.voice)) if args.voice else EspeakConfig()
    if args.engine == "piper":
        from foresay.engine.tts.piper_engine import PiperConfig

        return PiperConfig(voice=args.voice or PiperConfig.voice, threads=args.threads)
    from foresay.engine.tts.zonos import ZonosConfig, ZonosVoice

    return ZonosConfig(voice=ZonosVoice(language=args.voice)) if args.voice else ZonosConfig()


def run(args: argparse.Namespace) -> int:
    check_outputs({"--json": args.json_out}, {}, force=args.force)
    result = asyncio.run(measure(build_engine(_config(args)), args.text, args.repeats, args.long_text or None))
    long = (f", {result.ttfc_cold_long_ms:.1f} ms cold for a {result.long_first_sentence_chars}-character "
            "first sentence" if result.ttfc_cold_long_ms is not None else "")
    print(f"{result.engine}: time to first chunk {result.ttfc_cold_ms:.1f} ms cold{long}, "
          f"{result.ttfc_prepared_ms:.2f} ms prepared; real-time factor {result.rtf:.3f} "
          f"(medians over {result.repeats})")
    if args.json_out is not None:
        write_report(args.json_out, asdict(result))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("tts", help="TTS time to first chunk (cold, prepared) and real-time factor")
    parser.add_argument("--engine", choices=("espeak", "piper", "zonos"), default="espeak")
    parser.add_argument("--text", default=DEFAULT_TEXT, help="text to speak")
    parser.add_argument("--long-text", default=LONG_TEXT,
                        help="text with a long first sentence, timed cold too ('' leaves it out)")
    parser.add_argument("--threads", type=int, default=1, help="Piper: onnxruntime threads")
    parser.add_argument("--repeats", type=int, default=5, help="runs per figure; medians are reported")
    parser.add_argument("--voice", default=None,
                        help="espeak-ng voice, Piper voice (name or .onnx path), or Zonos language code")
    parser.add_argument("--json", dest="json_out", type=Path, default=None, metavar="OUT",
                        help='write {"engine", "ttfc_cold_ms", "ttfc_prepared_ms", "rtf", "ttfc_cold_long_ms", '
                             '...} to OUT')
    add_force_argument(parser)
    parser.set_defaults(func=run)

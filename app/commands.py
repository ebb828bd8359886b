"""`foresay run` and `foresay replay`: the pipeline from the command line."""
from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from foresay.app.arguments import add_settings_arguments, settings_from
from foresay.app.config import Settings
from foresay.app.paths import add_force_argument, check_outputs
from foresay.app.saving import LineFile
from foresay.app.turn_log import METRIC_NAMES
from foresay.engine.errors import ForesayError
from foresay.engine.events import (Event, FinalTranscript, PartialTranscript, SentenceReady,
                                   StatusMessage, TurnMetrics)

LATENCY_KEYS = ("endpoint_delay_ms", "asr_final_ms", "ttfs_ms", "nfetfs", "tts_first_chunk_ms",
                "audio_latency_ms", "voice_to_voice_ms")

class ConsolePrinter:
    """Live partial transcript, the reply's sentences, one latency line per turn."""

    def __init__(self, out=None):
        self.out = out or sys.stdout

    def __call__(self, event: Event) -> None:
        if isinstance(event, PartialTranscript):
            self._line(f"you (hearing): {event.text}", final=False)
        elif isinstance(event, FinalTranscript):
            self._line(f"you: {event.text}")
        elif isinstance(event, SentenceReady):
            self._line(f"foresay: {event.text}")
        elif isinstance(event, StatusMessage) and event.level != "info":
            self._line(f"[{event.level}] {event.text}")
        elif isinstance(event, TurnMetrics):
            v = event.values
            parts = [f"{k.removesuffix('_ms')} {v[k]:.0f} ms" for k in LATENCY_KEYS
                     if k != "nfetfs" and isinstance(v.get(k), (int, float))]
            self._line(f"  [turn {v['turn']}: {v['outcome']}, NFETFS {v.get('nfetfs')}; "
                       + ", ".join(parts) + "]")

    def _line(self, text: str, final: bool = True) -> None:
        if self.out.isatty():
            self.out.write("\r\x1b[K" + text + ("\n" if final else ""))
        elif final:
            self.out.write(text + "\n")
        self.out.flush()


class MetricsWriter:
    """One JSON line per turn, written as each turn ends. A line the disk does not take waits in
    memory for the next write (said once, on stderr); `close()` says what could never be written."""

    def __init__(self, path: Path, err=None):
        self.err = err or sys.stderr
        self.file = LineFile(path, lambda text: print(f"[warning] {text}", file=self.err))

    def __call__(self, event: Event) -> None:
        if isinstance(event, TurnMetrics):
            record = {k: event.values.get(k) for k in METRIC_NAMES}
            record.update({k: v for k, v in event.values.items() if k not in record})
            self.file.write(json.dumps(record, ensure_ascii=False))

    def close(self) -> None:
        self.file.close()


async def replay(settings: Settings, audio: Path, out: Path | None, observers=(), realtime: bool = True,
                 on_source=None) -> list[dict]:
    """The whole pipeline on a recording, paced on the audio clock like live; the spoken reply
    goes to `out` (a WAV). Returns the per-turn metrics. `on_source(source)` is called with the
    FileSource before it plays (its `t0` maps event times back onto the recording)."""
    from foresay.app.assemble import build_pipeline
    from foresay.audio.files import FileSource
    from foresay.audio.wav_sink import WavSink

    if not audio.exists():
        raise ForesayError(f"recording {audio} does not exist")
    with tempfile.TemporaryDirectory() as tmp:
        target = out or Path(tmp) / "reply.wav"
        tail = settings.audio.longest_wait_s() + settings.audio.fixed_hangover_s + 0.5
        source = FileSource(audio, realtime=realtime, pad_s=tail)
        if on_source is not None:
            on_source(source)
        sink = WavSink(target, realtime=realtime)
        pipeline = await build_pipeline(settings, source, sink, list(observers), wait_for_replies=not realtime)
        try:
            await pipeline.run()
        finally:
            pipeline.close()
        return pipeline.metrics


def run_replay(args) -> int:
    from foresay.audio.files import FileSource

    settings = settings_from(args)
    FileSource(args.audio)   # inputs first: nothing is written for a recording that cannot be replayed
    check_outputs({"--out": args.out, "--metrics": args.metrics}, {"IN.wav": args.audio}, force=args.force)
    observers = [ConsolePrinter()]
    writer = MetricsWriter(args.metrics) if args.metrics else None
    if writer:
        observers.append(writer)
    try:
        metrics = asyncio.run(replay(settings, args.audio, args.out, observers, realtime=not args.fast))
    finally:
        if writer:
            writer.close()
    print(f"replay: {len(metrics)} turn(s)" + (f", reply written to {args.out}" if args.out else ""))
    failed = [m for m in metrics if m["outcome"] == "failed"]
    if metrics and len(failed) == len(metrics):
        print(f"foresay: error: every turn failed ({len(failed)}); the messages above say why", file=sys.stderr)
        return 1
    return 0


def run_live(args) -> int:
    if not args.no_ui:
        from foresay.app.gui import run_gui
        return run_gui(args)
    settings = settings_from(args)
    return asyncio.run(_live(settings, resume=args.resume))


async def _live(settings: Settings, resume: bool = False) -> int:
    from foresay.app.assemble import build_pipeline
    from foresay.app.history import HistoryStore
    from foresay.audio.capture import MicSource
    from foresay.audio.devices import resolve_device
    from foresay.audio.playback import DeviceSink

    # Devices first: a missing microphone is reported before minutes of model loading.
    from foresay.audio.errors import NoAudioDevice

    mic, playback = settings.audio.mic_config(), settings.audio.playback_config()
    try:
        resolve_device(mic.device, "input")
    except NoAudioDevice as exc:
        raise NoAudioDevice(f"{exc}. Without a microphone, `foresay replay RECORDING.wav --out reply.wav` "
                            f"runs the same pipeline on a recording") from None
    try:
        resolve_device(playback.device, "output")
    except NoAudioDevice as exc:
        raise NoAudioDevice(f"{exc}. Without speakers, `foresay replay RECORDING.wav --out reply.wav` "
                            f"writes the spoken replies to a WAV") from None
    history = HistoryStore(settings.app.history_dir, resume=resume)
    for notice in (history.notice, history.problem):
        if notice:
            print(f"[warning] {notice}", file=sys.stderr)
    if resume:
        print(f"resumed {history.path.name} ({len(history.turns)} turn(s))" if history.turns
              else "no saved conversation to resume: starting a new one")
    pipeline = await build_pipeline(settings, MicSource(mic), DeviceSink(playback), [ConsolePrinter()],
                                    history=history)
    print(f"listening ({settings.app.mode}); Ctrl+C to stop")
    try:
        await pipeline.run()
    except asyncio.CancelledError:
        pass
    finally:
        pipeline.close()
        history.close()
    if history.unsaved:
        raise ForesayError(f"{len(history.unsaved)} turn(s) of this conversation could not be saved in "
                           f"{history.path.parent}")
    return 0


def register(commands) -> None:
    p = commands.add_parser("run", help="talk to Foresay (the window, or --no-ui in the terminal)")
    p.add_argument("--no-ui", action="store_true", help="run headless in the terminal")
    p.add_argument("--resume", action="store_true",
                   help="continue the latest saved conversation (default: start a new one)")
    add_settings_arguments(p)
    p.set_defaults(func=run_live)

    p = commands.add_parser("replay", help="the whole pipeline on a recording instead of the mic")
    p.add_argument("audio", type=Path, metavar="IN.wav")
    p.add_argument("--out", type=Path, metavar="OUT.wav", help="write the spoken reply here")
    p.add_argument("--metrics", type=Path, metavar="OUT.jsonl", help="per-turn metrics, one JSON line each")
    p.add_argument("--fast", action="store_true",
                   help="do not pace the recording in real time (latencies that compare the recording's time "
                        "with the clock, ASR final and voice-to-voice, are then left out)")
    add_force_argument(p)
    add_settings_arguments(p)
    p.set_defaults(func=run_replay)

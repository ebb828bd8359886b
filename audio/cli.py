"""`foresay devices` and `foresay vad FILE`: the audio stage's commands."""
from __future__ import annotations

import argparse
import asyncio
import json

from foresay.engine.events import SpeechStarted, TurnEnded

from .devices import list_devices
from .endpoint import Endpointer, EndpointerConfig, Mode, PushToTalkGate
from .errors import AudioError
from .files import FileSource
from .hangover import FixedHangover
from .vad import VadConfig, make_vad


def register(commands: argparse._SubParsersAction) -> None:
    devices = commands.add_parser("devices", help="list sound input and output devices")
    devices.add_argument("--json", action="store_true", help="print JSON")
    devices.set_defaults(func=cmd_devices)

    vad = commands.add_parser(
        "vad", help="run VAD and endpointing on a recording and print the turns",
        description="Replays FILE (WAV or FLAC) through the capture, VAD and endpointer the app "
                    "uses and prints each detected turn; times are seconds from the file's start.")
    vad.add_argument("file", metavar="FILE")
    vad.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.HANDS_FREE.value)
    vad.add_argument("--press", action="append", default=[], metavar="START:END",
                     help="push-to-talk: key held from START to END seconds (repeatable)")
    vad.add_argument("--vad", choices=["webrtc", "silero"], default="webrtc")
    vad.add_argument("--aggressiveness", type=int, default=VadConfig.aggressiveness,
                     choices=range(4), help="webrtc VAD aggressiveness (default %(default)s)")
    vad.add_argument("--frame-ms", type=int, default=VadConfig.frame_ms, choices=(10, 20, 30),
                     help="webrtc VAD frame (default %(default)s)")
    vad.add_argument("--hangover-ms", type=int, default=700,
                     help="silence that ends a turn (default %(default)s)")
    vad.add_argument("--start-ms", type=int, default=EndpointerConfig.start_voiced_ms,
                     help="voiced audio that starts a turn (default %(default)s)")
    vad.add_argument("--realtime", action="store_true", help="replay at real-time pace")
    vad.add_argument("--json", action="store_true", help="print JSON")
    vad.set_defaults(func=cmd_vad)


def cmd_devices(args: argparse.Namespace) -> int:
    devices = list_devices()
    if args.json:
        print(json.dumps({"devices": [d.as_dict() for d in devices]}, indent=2))
        return 0
    for title, kind in (("Input devices", "input"), ("Output devices", "output")):
        print(f"{title}:")
        rows = [d for d in devices if (d.is_input if kind == "input" else d.is_output)]
        if not rows:
            print("  (none)")
        for d in rows:
            default = d.is_default_input if kind == "input" else d.is_default_output
            channels = d.max_input_channels if kind == "input" else d.max_output_channels
            print(f"  {'*' if default else ' '} {d.index:>3}  {d.name}  [{d.hostapi}, "
                  f"{channels} ch, {d.default_samplerate:g} Hz]")
    print("* = default")
    return 0


def parse_presses(specs: list[str]) -> list[tuple[float, float]]:
    presses = []
    for spec in specs:
        try:
            a, b = (float(x) for x in spec.split(":"))
        except ValueError:
            raise AudioError(f"--press takes START:END in seconds, not {spec!r}") from None
        if b <= a:
            raise AudioError(f"--press {spec}: END must come after START")
        presses.append((a, b))
    return presses


async def endpoint_file(path: str, *, mode: str = Mode.HANDS_FREE.value,
                        presses: list[tuple[float, float]] = (), vad: VadConfig | None = None,
                        hangover_s: float = 0.7, config: EndpointerConfig | None = None,
                        realtime: bool = False) -> dict:
    """Run a file through FileSource, VAD and Endpointer; the `foresay vad --json` result."""
    config = config or EndpointerConfig()
    config = EndpointerConfig(**{**config.__dict__, "mode": Mode(mode)})
    source = FileSource(path, realtime=realtime, t0=0.0)
    gate = PushToTalkGate(config.mode)
    for a, b in presses:
        gate.press(a)
        gate.release(b)
    ep = Endpointer(make_vad(vad), config, FixedHangover(hangover_s), gate)
    turns: dict[int, dict] = {}

    def collect(events):
        for e in events:
            if isinstance(e, SpeechStarted):
                turns[e.turn_id] = {"start_s": round(e.t, 3)}
            elif isinstance(e, TurnEnded):
                turns[e.turn_id].update(last_voiced_s=round(e.last_voiced_t, 3),
                                        end_declared_s=round(e.t, 3))

    async with source:
        async for block in source:
            collect(ep.push(block))
    collect(ep.finish(source.duration_s))
    return {"turns": list(turns.values()), "sample_rate": source.info.sample_rate,
            "duration_s": round(source.info.duration_s, 3)}


def cmd_vad(args: argparse.Namespace) -> int:
    presses = parse_presses(args.press)
    if args.hangover_ms <= 0:
        raise AudioError("--hangover-ms must be positive")
    if args.start_ms <= 0:
        raise AudioError("--start-ms must be positive")
    if args.mode == Mode.PUSH_TO_TALK.value and not presses:
        raise AudioError("push-to-talk needs the key presses: --press START:END")
    vad = VadConfig(kind=args.vad, aggressiveness=args.aggressiveness, frame_ms=args.frame_ms)
    start_ms = args.start_ms
    config = EndpointerConfig(start_voiced_ms=start_ms,
                              start_window_ms=max(EndpointerConfig.start_window_ms, start_ms))
    result = asyncio.run(endpoint_file(args.file, mode=args.mode, presses=presses, vad=vad,
                                       hangover_s=args.hangover_ms / 1000, config=config,
                                       realtime=args.realtime))
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{args.file}: {result['sample_rate']} Hz, {result['duration_s']:.2f} s, "
          f"{len(result['turns'])} turn(s)")
    for i, turn in enumerate(result["turns"], 1):
        print(f"turn {i}: start {turn['start_s']:.2f} s, "
              f"last voiced {turn['last_voiced_s']:.2f} s, "
              f"end declared {turn['end_declared_s']:.2f} s")
    return 0

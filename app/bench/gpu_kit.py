"""The GPU kit's driver: every GPU measurement in one run, one JSON file.

`python -m foresay.app.bench.gpu_kit --out DIR` (what `packaging/gpu_kit.sh run` calls on a lent
GPU machine) runs the sections of `gpu_kit_sections` and `gpu_kit_variants` one after another, each in its own process
under its own time limit and within the whole run's `--budget`, so a crash, a hang or a full GPU
loses only that section: its entry records the error as text, or why it was skipped, and the
others keep their figures. The report, DIR/gpu_kit.json, is rewritten after every section.

`--device cpu --small` runs the same sections with small shapes on a CPU (the dry run that keeps
the kit working); `--in-process` runs them in this process, without time limits (tests).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from foresay.app.bench import gpu_kit_sections as sections
from foresay.app.bench import gpu_kit_variants as variants

# name -> (function, seconds it may take on an H100), in the order they run: the most wanted first
# (what was never measured before what was).
SECTIONS = {
    "bench_gpu": (sections.bench_gpu, 200),
    "fusion": (variants.fusion, 120),
    "split": (variants.split, 120),
    "exactness": (sections.exactness, 60),
    "replay": (sections.replay, 150),
    "asr_final": (sections.asr_final, 120),
    "qwen3_asr": (sections.qwen3_asr, 150),
    "profile": (sections.profile, 60),
    "specbound": (sections.specbound, 60),
    "streams": (sections.streams, 60),
    # last, so they cannot crowd the others out: on an H200 the eager run took 107 s (with the random
    # model's making), the compiled one 245 s (a warm-up of 135 s)
    "zonos": (sections.zonos, 240),
    "zonos_compiled": (sections.zonos_compiled, 300),
}
REPORT = "gpu_kit.json"
MIN_SECTION_S = 15  # a section is not started with less of the budget left


def run_section(name: str, kit: sections.Kit) -> dict:
    """One section in this process: {"status": "ok", "figures": ...}, "skipped" with the reason, or
    "error" with the exception as text."""
    started = time.perf_counter()
    try:
        entry = {"status": "ok", "figures": SECTIONS[name][0](kit)}
    except sections.Skipped as exc:
        entry = {"status": "skipped", "reason": str(exc)}
    except Exception as exc:  # any failure is this section's result, never the run's end
        entry = {"status": "error", "error": f"{type(exc).__name__}: {exc}",
                 "traceback": traceback.format_exc(limit=-6)[-3000:]}
    entry["seconds"] = round(time.perf_counter() - started, 2)
    return entry


def run_isolated(command: list[str], part: Path, limit_s: float) -> dict:
    """Run `command` (which writes its entry as JSON to `part`) with a time limit; a command that
    ends without writing it becomes an error entry saying how it ended."""
    started = time.perf_counter()
    try:
        process = subprocess.run(command, timeout=limit_s, stdout=sys.stderr)
        code = process.returncode
    except subprocess.TimeoutExpired:
        entry = {"status": "timeout", "error": f"stopped after its limit of {limit_s:.0f} s",
                 "seconds": round(time.perf_counter() - started, 2)}
        try:  # what the section measured before its limit (`Kit.progress`)
            entry["figures"] = json.loads(sections.progress_file(part).read_text())
        except (OSError, ValueError):
            pass
        return entry
    try:
        return json.loads(part.read_text())
    except (OSError, ValueError):
        return {"status": "error", "error": f"the section's process ended with exit code {code} and no report",
                "seconds": round(time.perf_counter() - started, 2)}


def environment(device: str, small: bool, kit_info: Path | None) -> dict:
    import torch
    import transformers

    info = {"device": torch.cuda.get_device_name(0) if device.startswith("cuda") and torch.cuda.is_available()
            else f"cpu ({os.cpu_count()} cores)", "small": small, "python": platform.python_version(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if kit_info is not None and kit_info.exists():  # what `gpu_kit.sh prepare` recorded: the revision
        info["prepared"] = json.loads(kit_info.read_text())
    return info


def run_kit(args: argparse.Namespace) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work or tempfile.mkdtemp(prefix="foresay-gpu-kit-"))
    os.environ.setdefault("FORESAY_FIXTURE_DIR", str(work / "fixtures"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    names = args.sections or list(SECTIONS)
    report = {"kit": environment(args.device, args.small, Path(args.kit_info) if args.kit_info else None),
              "sections": {}}
    kit = sections.Kit(args.device, args.small, work, Path(args.request) if args.request else work / "request.wav")
    deadline = time.perf_counter() + args.budget
    for name in names:
        left = deadline - time.perf_counter()
        if left < MIN_SECTION_S:
            entry = {"status": "skipped", "reason": f"the kit's time budget ({args.budget} s) ran out"}
        elif args.in_process:
            entry = run_section(name, kit)
        else:
            part = work / f"{name}.part.json"
            part.unlink(missing_ok=True)
            sections.progress_file(part).unlink(missing_ok=True)
            command = [sys.executable, "-m", "foresay.app.bench.gpu_kit", "--section", name, "--part", str(part),
                       "--device", args.device, "--work", str(work), "--request", str(kit.request)]
            entry = run_isolated(command + (["--small"] if args.small else []), part,
                                 min(SECTIONS[name][1], left))
        report["sections"][name] = entry
        print(f"[gpu kit] {name}: {entry['status']} in {entry.get('seconds', 0):.1f} s"
              + (f" ({entry.get('error') or entry.get('reason')})" if entry["status"] != "ok" else ""),
              file=sys.stderr, flush=True)
        report["kit"]["total_s"] = round(args.budget - (deadline - time.perf_counter()), 1)
        (out / REPORT).write_text(json.dumps(report, indent=2) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m foresay.app.bench.gpu_kit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="folder for gpu_kit.json (required unless --section)")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--small", action="store_true", help="small shapes: the dry run on a CPU")
    parser.add_argument("--sections", type=lambda t: [s for s in t.split(",") if s], metavar="A,B",
                        help=f"run only these ({', '.join(SECTIONS)})")
    parser.add_argument("--budget", type=float, default=540, help="seconds for the whole run (default 540)")
    parser.add_argument("--in-process", action="store_true", help="run the sections here, without time limits")
    parser.add_argument("--work", help="scratch folder (fixtures, recordings; default: a new temporary one)")
    parser.add_argument("--request", help="the spoken request, a WAV (default: made with espeak-ng)")
    parser.add_argument("--kit-info", help="JSON written by `gpu_kit.sh prepare` (the revision), copied in")
    parser.add_argument("--section", help=argparse.SUPPRESS)  # one section, in a child process
    parser.add_argument("--part", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = sorted((set(args.sections or []) | ({args.section} if args.section else set())) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; the sections are {', '.join(SECTIONS)}")
    if args.section:
        kit = sections.Kit(args.device, args.small, Path(args.work), Path(args.request), Path(args.part))
        Path(args.part).write_text(json.dumps(run_section(args.section, kit)) + "\n")
        return 0
    if not args.out:
        parser.error("--out is required")
    report = run_kit(args)
    failed = [n for n, e in report["sections"].items() if e["status"] in ("error", "timeout")]
    print(f"[gpu kit] report: {Path(args.out) / REPORT}" + (f"; failed: {', '.join(failed)}" if failed else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`foresay bench turns SET.jsonl`: turn-taking scored against the truth, through the live code path.

Each recording of the set is replayed as `foresay replay` does (paced on the audio clock unless
`--fast`), and what the endpointer and the pipeline did is compared with the set's truth turns
(`{"audio": "x.wav", "turns": [{"start_s", "end_s", "text"}]}` per line, paths relative to the
set; a pause inside a turn is not a boundary). A found turn belongs to the truth turn its voiced
audio overlaps most.

- premature cut-off: an end declared (`TurnEnded.t`) before the truth `end_s` of its turn, also
  one the user then resumed; `premature_recovered` counts those followed by `TurnResumed`.
- requests cut: truth turns with at least one premature cut-off.
- merged requests: truth turns whose end went by undeclared, so that one found turn (its voice
  from start to last voiced frame) covers them and the next (counted once per extra truth turn).
- unanswered: turns closed without a reply because the user began a new request first.
- heard nothing: turns the endpointer opened whose transcript held no words (room noise, a
  breath): closed without a reply, and with no words to score.
- endpoint delay: the turn's last declared end minus the truth `end_s`; where the voice that
  reopened a turn brought no words and the reply played on (`ReplyKept`), the end it answered.
- voice-to-voice: the first reply sample minus the truth `end_s` (the pipeline's own figure is
  measured from the last voiced frame; the difference is added back).
- ASR final: the pipeline's own figure (end declared to final transcript).
- WER: word errors of each turn's last final transcript against the truth texts, over the set
  (words compared as `bench.wer` says: digit runs one digit a word);
  with `--whole-wer` also `wer_whole_request`: the same recognizer's decode of each request alone
  (0.3 s before its start to 0.3 s after its end), and `wer_whole_request_by_tail`: the same with
  0.05-0.3 s after the end (how far the reference itself moves).

The JSON's `recordings` hold, per recording, what the replay did (its ends, resumes, the words
heard) and its own endpoint delay and voice-to-voice per truth turn (None where that turn was
not found or not answered), so two runs can be compared request by request.

Unpaced (`--fast`), the audio runs ahead of the wall clock: ASR final and voice-to-voice are then
not reported (None); the endpoint figures are still exact for a fixed hangover, but an estimate
of P(end of turn) arrives later in audio time than it would live.
"""
from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np

from foresay.app.saving import write_report
from foresay.app.arguments import add_settings_arguments, settings_from
from foresay.app.commands import replay
from foresay.app.bench.turn_records import Observed, Recording, TruthTurn
from foresay.app.config import Settings
from foresay.engine.errors import ForesayError
from foresay.engine.events import (AudioTurnCue, Event, FinalTranscript, ReplyKept, SpeechStarted, TurnClosed,
                                   TurnEnded, TurnMetrics, TurnResumed)


def read_set(path: Path) -> list[Recording]:
    if not path.exists():
        raise ForesayError(f"truth set {path} does not exist")
    recordings = []
    for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            item = json.loads(line)
            turns = tuple(TruthTurn(float(t["start_s"]), float(t["end_s"]), str(t.get("text", "")))
                          for t in item["turns"])
            audio = path.parent / item["audio"]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ForesayError(f"{where}: expected {{\"audio\": ..., \"turns\": [{{\"start_s\", \"end_s\", "
                               f"\"text\"}}]}} ({exc})") from None
        if not audio.exists():
            raise ForesayError(f"{where}: recording {audio} does not exist")
        for a, b in zip(turns, turns[1:]):
            if b.start_s < a.end_s:
                raise ForesayError(f"{where}: truth turns overlap or are out of order")
        if any(t.end_s <= t.start_s for t in turns):
            raise ForesayError(f"{where}: a truth turn ends before it starts")
        recordings.append(Recording(audio, turns))
    if not recordings:
        raise ForesayError(f"truth set {path} has no recordings")
    return recordings


class Collector:
    """An observer of one replay; `t0` (the recording's first sample) is set before it plays."""

    def __init__(self):
        self.t0: float | None = None
        self.seen: list[Event] = []
        self.cues: list[tuple[float, float]] = []  # Smart Turn: (its call, its answer after the pause), ms

    def __call__(self, event: Event) -> None:
        if isinstance(event, (SpeechStarted, TurnEnded, TurnResumed, ReplyKept, FinalTranscript, TurnMetrics,
                              TurnClosed)):
            self.seen.append(event)
        elif isinstance(event, AudioTurnCue):  # paced, capture times run with the clock
            self.cues.append((event.took_ms, 1000 * (time.monotonic() - event.t)))

    def observed(self) -> Observed:
        if self.t0 is None:
            raise ForesayError("the replay never started its recording")
        out, t0 = Observed(), self.t0
        for e in self.seen:
            if isinstance(e, SpeechStarted):
                out.started[e.turn_id] = e.t - t0
            elif isinstance(e, TurnEnded):
                out.ends.append((e.turn_id, e.t - t0, e.last_voiced_t - t0))
            elif isinstance(e, TurnResumed):
                out.resumed.append((e.turn_id, e.t - t0))
            elif isinstance(e, ReplyKept):
                out.kept[e.turn_id] = e.ended_t - t0
            elif isinstance(e, FinalTranscript):
                out.finals.append((e.turn_id, e.text))
            elif isinstance(e, TurnMetrics):
                out.metrics[e.turn_id] = dict(e.values)
            elif isinstance(e, TurnClosed):
                out.outcomes[e.turn_id] = e.outcome
        return out


def _words(text: str) -> list[str]:
    from foresay.app.bench.wer import scored_words
    return scored_words(text)


def _edits(ref: list[str], hyp: list[str]) -> int:
    from foresay.engine.demo.evaluate_whisper import edit_distance
    return edit_distance(ref, hyp)


def _stats(values: list[float]) -> dict:
    if not values:
        return {"median": None, "p90": None}
    return {"median": round(float(np.percentile(values, 50)), 1), "p90": round(float(np.percentile(values, 90)), 1)}


def score(recordings: list[Recording], observed: list[Observed]) -> dict:
    """The set's figures (see the module docstring) from what each replay did."""
    totals = {"premature": 0, "recovered": 0, "resumed": 0, "found": 0, "merged": 0, "cut": 0, "edits": 0, "words": 0}
    delays, finals_ms, v2v, details = [], [], [], []
    for rec, obs in zip(recordings, observed):
        last_end = {}   # the end each found turn's reply answered: its last, or the one kept
        for turn_id, t, last_voiced in obs.ends:
            last_end[turn_id] = (t, last_voiced)
        for turn_id, t, last_voiced in obs.ends:
            if abs(t - obs.kept.get(turn_id, -1.0)) < 1e-6:
                last_end[turn_id] = (t, last_voiced)
        totals["found"] += len(last_end)
        totals["resumed"] += len(obs.resumed)
        owner = {}   # found turn -> index of its truth turn
        for turn_id, (_, last_voiced) in last_end.items():
            start = obs.started.get(turn_id, last_voiced)
            overlaps = [min(last_voiced, tt.end_s) - max(start, tt.start_s) for tt in rec.turns]
            best = int(np.argmax(overlaps))
            if overlaps[best] > 0:
                owner[turn_id] = best
            totals["merged"] += max(0, sum(o > 0 for o in overlaps) - 1)
        resumed_after = {(turn_id, t) for turn_id, t in obs.resumed}
        cut = set()
        for turn_id, t, _ in obs.ends:
            if turn_id in owner and t < rec.turns[owner[turn_id]].end_s:
                totals["premature"] += 1
                cut.add(owner[turn_id])
                totals["recovered"] += any(r == turn_id and rt >= t for r, rt in resumed_after)
        totals["cut"] += len(cut)
        turn_delays, turn_v2v = [], []  # per truth turn, None where it was not found or not answered
        for j, truth in enumerate(rec.turns):
            mine = [tid for tid, k in owner.items() if k == j]
            if not mine:
                turn_delays.append(None)
                turn_v2v.append(None)
                continue
            last = max(mine, key=lambda tid: last_end[tid][0])
            t, last_voiced = last_end[last]
            delays.append(1000 * (t - truth.end_s))
            turn_delays.append(round(delays[-1], 1))
            measured = obs.metrics.get(last, {}).get("voice_to_voice_ms")
            if isinstance(measured, (int, float)):
                v2v.append(measured + 1000 * (last_voiced - truth.end_s))
                turn_v2v.append(round(v2v[-1], 1))
            else:
                turn_v2v.append(None)
        finals_ms += [m["asr_final_ms"] for m in obs.metrics.values()
                      if isinstance(m.get("asr_final_ms"), (int, float))]
        ref = [w for tt in rec.turns for w in _words(tt.text)]
        last_final = {}   # a turn's last final transcript (a resumed turn may have had an earlier one)
        for turn_id, text in obs.finals:
            last_final[turn_id] = text
        hyp = [w for turn_id in sorted(last_final) for w in _words(last_final[turn_id])]
        totals["edits"] += _edits(ref, hyp)
        totals["words"] += len(ref)
        details.append({"audio": rec.audio.name, "truth_end_s": [t.end_s for t in rec.turns],
                        "ends": [(tid, round(t, 3), round(lv, 3)) for tid, t, lv in obs.ends],
                        "resumed": [(tid, round(t, 3)) for tid, t in obs.resumed],
                        "kept": [(tid, round(t, 3)) for tid, t in obs.kept.items()],
                        "heard": [last_final[tid] for tid in sorted(last_final)],
                        "endpoint_delay_ms": turn_delays, "voice_to_voice_ms": turn_v2v})
    return {"turns_expected": sum(len(r.turns) for r in recordings), "turns_found": totals["found"],
            "premature_cutoffs": totals["premature"], "premature_recovered": totals["recovered"],
            "resumed": totals["resumed"], "requests_cut": totals["cut"], "merged_requests": totals["merged"],
            "endpoint_delay_ms": _stats(delays), "asr_final_ms": _stats(finals_ms), "voice_to_voice_ms": _stats(v2v),
            "unanswered": sum(outcome == "unanswered" for obs in observed for outcome in obs.outcomes.values()),
            "heard_nothing": sum(outcome == "empty" for obs in observed for outcome in obs.outcomes.values()),
            "wer": round(totals["edits"] / totals["words"], 4) if totals["words"] else None,
            "recordings": details}


async def bench(settings: Settings, recordings: list[Recording], realtime: bool = True,
                progress=None) -> tuple[dict, list[Observed]]:
    observed, cues = [], []
    for i, rec in enumerate(recordings):
        collector = Collector()
        await replay(settings, rec.audio, None, [collector], realtime=realtime,
                     on_source=lambda source: setattr(collector, "source", source))
        collector.t0 = collector.source.t0
        observed.append(collector.observed())
        cues += collector.cues
        if progress:
            progress(f"{i + 1}/{len(recordings)} {rec.audio.name}")
    report = score(recordings, observed)
    if cues:  # how long Smart Turn took, and when its answer reached the decision after the pause
        report.update(audio_cue_ms=_stats([c[0] for c in cues]),
                      audio_cue_after_pause_ms=_stats([c[1] for c in cues]) if realtime else _stats([]))
    return report, observed


WHOLE_REQUEST_TAILS_S = (0.05, 0.1, 0.2, 0.3)  # audio kept after each truth end for the reference decodes
WHOLE_REQUEST_TAIL_S = 0.3  # the one `wer_whole_request` reports


def whole_request_wer(settings: Settings, recordings: list[Recording], margin_s: float = 0.3,
                      tails_s: tuple[float, ...] = WHOLE_REQUEST_TAILS_S) -> dict[float, float | None]:
    """WER of the configured recognizer decoding each truth request alone (from `margin_s` before
    its start to each of `tails_s` after its end): what the pipeline's WER is compared with. A
    real Whisper is chaotic near its decision boundaries: a tenth of a second more audio after the
    last word changes words a second before it, so the reference is given for several tails
    (tiny.en's errors on 40 spliced Piper requests: 37, 38, 39 and 33 after 0.05, 0.1, 0.2 and
    0.3 s)."""
    from foresay.audio.blocks import SAMPLE_RATE
    from foresay.audio.files import load_audio
    from foresay.engine.asr import build_backend

    backend = build_backend(settings.asr)
    edits, total = dict.fromkeys(tails_s, 0), 0
    for rec in recordings:
        samples, _ = load_audio(rec.audio)
        for turn in rec.turns:
            ref = _words(turn.text)
            total += len(ref)
            a = int(max(0.0, turn.start_s - margin_s) * SAMPLE_RATE)
            for tail in tails_s:
                b = int((turn.end_s + tail) * SAMPLE_RATE)
                heard = backend.text.decode(list(backend.transcribe(samples[a:b]).tokens))
                edits[tail] += _edits(ref, _words(heard))
    return {tail: round(e / total, 4) if total else None for tail, e in edits.items()}


def add_whole_request_wer(report: dict, settings: Settings, recordings: list[Recording]) -> None:
    """`wer_whole_request` (the reference, `WHOLE_REQUEST_TAIL_S` after each end) and
    `wer_whole_request_by_tail` (every tail of `WHOLE_REQUEST_TAILS_S`, seconds as keys)."""
    by_tail = whole_request_wer(settings, recordings)
    report["wer_whole_request"] = by_tail[WHOLE_REQUEST_TAIL_S]
    report["wer_whole_request_by_tail"] = {f"{tail:g}": wer for tail, wer in by_tail.items()}


def bench_decision(settings: Settings, recordings: list[Recording], progress=None,
                   estimate_s: float | None = None) -> tuple[dict, list[Observed]]:
    """The endpointer and the end-of-turn decision alone, fed as the pipeline feeds
    them (see `turn_decision`); models are loaded once."""
    from foresay.app.bench.turn_decision import PausedTurnDriver
    from foresay.audio.files import load_audio
    from foresay.engine.asr import build_backend
    from foresay.engine.llm.backend import load_llm

    driver = PausedTurnDriver(settings, load_llm(settings.llm), build_backend(settings.asr), estimate_s)
    driver.warmup()
    observed = []
    for i, rec in enumerate(recordings):
        samples, _ = load_audio(rec.audio)
        observed.append(driver.run(samples))
        if progress:
            progress(f"{i + 1}/{len(recordings)} {rec.audio.name}")
    report = score(recordings, observed)
    report.update(asr_final_ms=_stats(driver.final_ms), voice_to_voice_ms=_stats([]),
                  speculative_ms=_stats(driver.speculative_ms), recheck_ms=_stats(driver.recheck_ms),
                  late_looks=len(driver.look_ms), late_look_ms=_stats(driver.look_ms))
    if driver.smart_turn is not None:
        report.update(audio_cue_ms=_stats(driver.cue_ms))
    return report, observed


SUMMARY = (("wer", "WER"), ("wer_whole_request", "WER alone"), ("endpoint_delay_ms", "endpoint ms"),
           ("requests_cut", "requests cut"), ("premature_cutoffs", "cut-offs"), ("premature_recovered", "resumed"),
           ("merged_requests", "merged"), ("unanswered", "unanswered"), ("heard_nothing", "heard nothing"),
           ("asr_final_ms", "ASR final ms"), ("voice_to_voice_ms", "voice-to-voice ms"))


def summary_line(name: str, report: dict) -> str:
    """One set's figures on one line (median/p90 for times)."""
    cells = []
    for key, label in SUMMARY:
        value = report.get(key)
        if isinstance(value, dict):
            value = "-" if value["median"] is None else f"{value['median']:.0f}/{value['p90']:.0f}"
        spread = report.get("wer_whole_request_by_tail") if key == "wer_whole_request" else None
        if spread and None not in spread.values():
            value = f"{value} ({min(spread.values())}-{max(spread.values())} by tail)"
        cells.append(f"{label} {'-' if value is None else value}")
    return f"{name}: {report['turns_found']}/{report['turns_expected']} turns; " + ", ".join(cells)


def run_bench_turns(args) -> int:
    settings = settings_from(args)
    sets = {str(path): read_set(Path(path)) for path in args.truth_set}
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    per_set, everything = {}, ([], [])
    for name, recordings in sets.items():
        if args.decision_only:
            estimate = None if args.estimate_ms is None else args.estimate_ms / 1000
            report, observed = bench_decision(settings, recordings, progress, estimate)
        else:
            report, observed = asyncio.run(bench(settings, recordings, realtime=not args.fast, progress=progress))
        if args.fast and not args.decision_only:
            report.update(asr_final_ms=_stats([]), voice_to_voice_ms=_stats([]))
        if args.whole_wer:
            add_whole_request_wer(report, settings, recordings)
        per_set[name] = report
        everything[0].extend(recordings)
        everything[1].extend(observed)
    report = per_set[next(iter(per_set))] if len(per_set) == 1 else score(*everything)
    if len(per_set) > 1 and args.whole_wer:
        add_whole_request_wer(report, settings, everything[0])
    if len(per_set) > 1 and (args.fast or args.decision_only):
        report.update(asr_final_ms=_stats([]), voice_to_voice_ms=_stats([]))
    report = {"set": ", ".join(per_set), "profile": settings.app.profile,
              "mode": "decision-only" if args.decision_only else "paced" if not args.fast else "unpaced", **report,
              "sets": {name: {k: v for k, v in r.items() if k != "recordings"} for name, r in per_set.items()}}
    print(json.dumps(report, indent=2))
    for name, r in per_set.items():
        print(summary_line(name, r), file=sys.stderr)
    if args.json:
        write_report(Path(args.json), report)
    return 0


def register(benches) -> None:
    p = benches.add_parser("turns", help="turn-taking against a truth set: cut-offs, resumed turns, delays")
    p.add_argument("truth_set", metavar="SET.jsonl", nargs="+",
                   help='one line per recording: {"audio": "x.wav", "turns": [{"start_s": .., "end_s": .., '
                        '"text": ".."}]}, paths relative to the file; several sets are reported each and together')
    p.add_argument("--fast", action="store_true",
                   help="do not pace the recordings in real time (the times then mean little)")
    p.add_argument("--decision-only", action="store_true",
                   help="the endpointer and end-of-turn decision alone, with the transcript at each pause "
                        "and its P(end of turn) computed as the pipeline does (no replies)")
    p.add_argument("--estimate-ms", type=float, metavar="MS",
                   help="with --decision-only: the silence's work (final + verification) reaches the policy "
                        "this long after the pause (default: as long as it took on this machine)")
    p.add_argument("--whole-wer", action="store_true",
                   help="also decode each truth request alone with the configured recognizer "
                        "(wer_whole_request: the reference for the pipeline's WER, 0.3 s after each end; "
                        "wer_whole_request_by_tail: with 0.05-0.3 s after it)")
    p.add_argument("--json", metavar="OUT")
    add_settings_arguments(p)
    p.set_defaults(func=run_bench_turns)

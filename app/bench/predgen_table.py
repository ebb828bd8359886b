"""What `foresay bench predgen` prints: its table, the notes under it and the summary.

Every header says its unit in words, every ratio what it compares, and a lossy method (its reply
can differ from plain greedy decoding's) is never called faster without, in the same line, how
often its reply did differ.
"""
from __future__ import annotations

from foresay.app.bench.continuation import BEST_CASE

# (header lines, width, cell) of each figure column, after the method's name
COLUMNS = (
    (("time to", "first", "sentence, ms"), 14, lambda m: f"{m['ttfs_ms']:.1f}"),
    (("{kind}", "{passes} to", "1st sentence"), 14, lambda m: f"{m['nfetfs']:.2f}"),
    (("time to", "first", "audio, ms"), 11, lambda m: f"{m['latency_ms']:.1f}"),
    (("first audio", "speedup over", "baseline"), 13, lambda m: f"{m['speedup']:.2f}x"),
    (("first", "sentence same", "as baseline's"), 14, lambda m: f"{100 * m['first_sentence_identical']:.0f}%"),
    (("whole", "reply same as", "baseline's"), 14, lambda m: f"{100 * m['reply_identical']:.0f}%"),
    (("final step:", "% of time", "outside passes"), 15, lambda m: f"{100 * m['overhead_share']:.1f}%"),
)

LEGEND = (
    "baseline waits for the whole prompt, then decodes greedily (plain decoding); the other methods draft "
    "the reply while the words arrive and check the draft against the final words.",
    "first audio speedup over baseline: baseline's mean time to first audio divided by the method's "
    "(2.00x: in half the time; below 1.00x: later).",
    "time to first audio: no TTS is attached; an assumed {tts:g} ms of TTS (--tts-latency-ms) follows "
    "the first sentence, and costs nothing when the sentence was ready early enough.",
    "final step: from the last word to the first sentence fixed (the final check of the draft, then "
    "decoding); its share of wall time not spent in the model's {passes}.",
    "turns: accepted (the draft's first sentence survived the final words), partial (only the start of "
    "the draft survived), rejected (none of it survived).",
)
LOSSY_LEGEND = ("lossy: topk:K and reflection keep draft tokens plain decoding would not have chosen, so "
                "their reply can differ from baseline's.")

# SpecBound's continuation-cost variants (app/bench/continuation.py), in words
COST_VARIANTS = {"layerwise_plain": "no drafting", "specbound": "as configured", "best": "every draft right",
                 "worst_never_gives_up": "every draft wrong, never giving up",
                 "worst_gives_up": "every draft wrong, giving up as configured"}


def turns(n: int) -> str:
    return f"{n} turn" if n == 1 else f"{n} turns"


def passes_word(report: dict) -> str:
    """What NFETFS counts: forward passes, or requests to a served model."""
    return "server requests" if "round_trip" in report else "forward passes"


def outcome_words(outcomes: dict[str, int]) -> str:
    if set(outcomes) == {"baseline"}:
        return "no draft"
    return ", ".join(f"{outcomes[k]} {k}" for k in ("accepted", "partial", "rejected") if k in outcomes)


def reply_note(name: str, m: dict) -> str:
    """How the method's reply relates to plain decoding's: lossless, or how often it differed."""
    if name == "baseline":
        return "plain decoding (the reference)"
    differing = f"reply differs from baseline's in {m['replies_differing']} of {turns(m['turns'])}"
    if m["lossless"]:
        return f"lossless by design, yet its {differing}" if m["replies_differing"] else "lossless"
    return f"LOSSY: {differing}" if m["replies_differing"] else "lossy, though no reply differed here"


def faster(ratio: float) -> str:
    """A ratio of times (the other's / this one's) in words: "1.50x faster", "1.25x slower"."""
    return f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower" if ratio > 0 else "no faster"


def table_lines(report: dict) -> list[str]:
    """The table: three header lines, a rule, a row per method."""
    kind, passes = passes_word(report).split()  # "forward passes", "server requests"
    width = max(12, *(len(name) + 1 for name in report["methods"]))
    last = ("", "turns by draft outcome;", "the reply against baseline's")
    head = [(f"{'method' if i == 2 else '':<{width}}"
             + "".join(f"{lines[i].format(kind=kind, passes=passes):>{w}}" for lines, w, _ in COLUMNS)
             + f"  {last[i]}").rstrip() for i in range(3)]
    rows = [f"{name:<{width}}" + "".join(f"{cell(m):>{w}}" for _, w, cell in COLUMNS)
            + f"  {outcome_words(m['outcomes'])}; {reply_note(name, m)}"
            for name, m in report["methods"].items()]
    return [*head, "-" * max(map(len, head)), *rows]


def missed_turn_lines(report: dict) -> list[str]:
    """Per method, its turns whose draft's first sentence did not survive the final words."""
    lines, passes = [], passes_word(report)
    for name, m in report["methods"].items():
        if m.get("ttfs_missed_ms") is None:
            continue
        parts = [f"first sentence after {m['ttfs_missed_ms']:.1f} ms (mean; median "
                 f"{m['ttfs_missed_median_ms']:.1f} ms) and {m['nfetfs_missed']:.2f} {passes}"]
        n = m["continuation_passes_missed"]
        if n:
            tokens, positions = m["continuation_tokens_missed"] / n, m["continuation_positions_missed"] / n
            parts.append("one token per pass after the final check" if tokens == positions == 1 else
                         f"after the final check, {tokens:.2f} tokens fixed per pass ({positions:.1f} "
                         "positions computed per pass)")
        vs = m.get("ttfs_missed_vs_plain")
        if vs:
            parts.append(f"first sentence {faster(vs)} than greedy with plain steps (one token per pass) "
                         "on the turns both missed the same way (median of per-turn ratios)")
        lines.append(f"{name}, on its {turns(m['missed_turns'])} whose draft's first sentence did not "
                     f"survive: " + "; ".join(parts))
        if "specbound" in m:
            sb = m["specbound"]
            exits = ", ".join(f"layer {k}: {v}" for k, v in sb["exits"].items())
            lines.append(f"{name}, SpecBound's drafting on those turns: {sb['drafted']} tokens drafted in "
                         f"{sb['rounds']} rounds ({sb['mean_draft']:.2f} per round), {100 * sb['acceptance']:.1f}% "
                         f"of them confirmed, {sb['tokens_per_round']:.2f} tokens fixed per round; drafts by the "
                         f"layer they left at: {exits}")
    return lines


def measurement_lines(report: dict) -> list[str]:
    """The extra measurements: SpecBound's cost, one pass's time, server round trips, turn cost."""
    lines = []
    if "continuation_cost" in report:
        cc = report["continuation_cost"]
        ratios = "; ".join(f"{COST_VARIANTS.get(k, k)} {v:.2f}x" for k, v in cc["time_vs_plain"].items())
        lines.append(f"SpecBound's continuation ({cc['spec']}), time to decode up to {cc['tokens']} tokens "
                     f"after each of {cc['prompts']} prompts, as a multiple of plain steps' time (one token "
                     f"per full pass; below 1.00x is faster): {ratios}")
    if "pass_timing" in report:
        pt = report["pass_timing"]
        verify_key = next(k for k in pt if k.startswith("verify_pass_ms"))
        tail, _, draft = verify_key.removeprefix("verify_pass_ms_tail").partition("_draft")
        lines.append(f"one forward pass after {pt['context_tokens']} tokens of context: "
                     f"{pt['decode_step_ms']:.2f} ms for one new token (a decode step), {pt[verify_key]:.2f} ms "
                     f"to check a draft ({tail} new prompt tokens + {draft} draft tokens)")
    if "round_trip" in report:
        rt = report["round_trip"]
        lines.append(f"server: {rt['requests']} requests, median round trip {rt['median_ms']:.1f} ms; "
                     f"those checking a draft (more than one new token): median {rt['verification_median_ms']:.1f} "
                     f"ms, 90th percentile {rt['verification_p90_ms']:.1f} ms")
    if "turn_cost" in report:
        tc = report["turn_cost"]
        n = tc["turns"]
        lines.append(f"turn cost: one turn (its prompt read, a short reply decoded) took {tc['turn_1_ms']:.1f} ms "
                     f"as turn 1 and {tc[f'turn_{n}_ms']:.1f} ms as turn {n}, after {n - 1} earlier "
                     f"{'turn' if n == 2 else 'turns'} "
                     f"({tc['ratio']:.2f}x turn 1's time); reading all {tc['context_tokens']} tokens of turn {n} "
                     f"anew, without the kept history, took {tc[f'turn_{n}_cold_ms']:.1f} ms")
    return lines


def summary_line(report: dict) -> str:
    """The fastest lossless method against baseline, then the fastest lossy one with how often its
    reply differed; best-case twins (METHOD@best, heads that know the reply) are ceilings, not methods."""
    methods = report["methods"]
    base = methods["baseline"]

    def fastest(lossless: bool) -> str | None:
        names = [n for n, m in methods.items()
                 if n != "baseline" and not n.endswith(BEST_CASE) and m["lossless"] == lossless]
        return max(names, key=lambda n: methods[n]["speedup"], default=None)

    def verdict(name: str) -> str:
        """The method's speed against baseline and, in the same words, its reply against baseline's."""
        m = methods[name]
        speed = (f"first audio {faster(m['speedup'])} than baseline (mean {m['latency_ms']:.0f} ms against "
                 f"{base['latency_ms']:.0f} ms)")
        differing = f"{m['replies_differing']} of {turns(m['turns'])}"
        if m["lossless"]:
            reply = f"yet its reply differs from baseline's in {differing}" if m["replies_differing"] \
                else "same reply as baseline every turn"
        else:
            reply = f"but its reply differs from baseline's in {differing}" if m["replies_differing"] \
                else f"though lossy: no reply differed from baseline's in these {turns(m['turns'])}"
        return f"{name}, {speed}, {reply}"

    best, lossy = fastest(True), fastest(False)
    parts = [f"fastest lossless method {verdict(best)}" if best else "no lossless method besides baseline ran"]
    if lossy:
        parts.append(f"fastest lossy method {verdict(lossy)}")
    return f"summary: {report['prompts']} prompts on {report['model']} ({report['device']}): " + "; ".join(parts)


def print_table(report: dict) -> None:
    legend = [line.format(passes=passes_word(report), tts=report.get("tts_latency_ms", 0)) for line in LEGEND]
    if any(not m["lossless"] for m in report["methods"].values()):
        legend.append(LOSSY_LEGEND)
    for line in (*table_lines(report), *legend, *missed_turn_lines(report), *measurement_lines(report),
                 summary_line(report)):
        print(line)

"""Train SpecBound's early-exit heads for a chat model, by feature caching.

1. Features: the model answers training dialogues greedily, turn after turn, its own replies kept
   as history (as a conversation runs); each reply is run once more, layer by layer, and the
   hidden states after every exit layer are cached at the positions that predict reply tokens,
   labelled with the token the full model chose there (its greedy output).
2. Heads: each head (its RMSNorm and low-rank adapter; the model and its LM head frozen) is
   trained on its layer's cached states with cross-entropy against those tokens.
3. Temperatures: each head's temperature is fitted on validation dialogues (temperature scaling:
   the tempered probability of its top token should match how often that token is the model's),
   then annealed so a shallower head is never trusted more than a deeper one.

    nice -n 19 python -m foresay.engine.demo.train_specbound --threads 1

Runtime code never imports this module; the result is `specbound.safetensors` beside the model.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from foresay.engine.demo.cli import warmup_cosine_lr
from foresay.engine.errors import ForesayError


@dataclass(frozen=True)
class HeadsTrainConfig:
    """seed: dialogues, initialisation and batch order follow from it.
    dialogues / val_dialogues: training dialogues (domain split "train") and calibration ones
        ("val"), answered greedily by the model. exit_layers / rank: the heads.
    epochs / batch_size / lr: AdamW over the cached states, cosine decay to 10%."""
    seed: int = 0
    dialogues: int = 1200
    val_dialogues: int = 200
    exit_layers: tuple[int, ...] = (1, 2, 3)
    rank: int = 16
    max_reply: int = 64
    epochs: int = 6
    batch_size: int = 256
    lr: float = 3e-3
    weight_decay: float = 0.0
    threads: int = 1

    def __post_init__(self):
        if self.dialogues < 1 or self.val_dialogues < 1 or self.epochs < 1 or self.batch_size < 1:
            raise ForesayError("heads training: dialogues, val_dialogues, epochs and batch_size must be >= 1")
        if not 0 < self.lr < 1:
            raise ForesayError("heads training: lr must lie in (0, 1)")


@torch.inference_mode()
def cache_features(lm, dialogues, exit_layers: tuple[int, ...], max_reply: int,
                   progress=print) -> tuple[list[torch.Tensor], torch.Tensor, dict]:
    """(states after each exit layer (N, H), the model's greedy token at each (N,), counts)."""
    from foresay.engine.llm.decoding import greedy_reply
    from foresay.engine.llm.dynamic_cache import DynamicKVCache
    from foresay.engine.predgen.conversation import Conversation
    from foresay.engine.predgen.layerwise import LayerwiseModel

    runner = LayerwiseModel(lm)
    conv = Conversation(lm, reserve_tokens=max_reply)
    feats: list[list[torch.Tensor]] = [[] for _ in exit_layers]
    targets: list[torch.Tensor] = []
    replies = 0
    for n, dialogue in enumerate(dialogues):
        conv.reset()
        for turn in dialogue.turns:
            prompt = conv.prompt(turn.user)
            conv.prefill_history()
            reply, _ = greedy_reply(conv.cache, list(prompt.ids), max_reply)
            ids = list(prompt.ids) + reply
            cache = DynamicKVCache(lm)
            hidden = runner.embed(ids[:-1])
            rows = slice(len(prompt.ids) - 1, len(ids) - 1)  # rows that predict reply tokens
            for layer in range(exit_layers[-1]):
                hidden = runner.run_layer(cache, layer, hidden, 0)
                if layer + 1 in exit_layers:
                    feats[exit_layers.index(layer + 1)].append(hidden[0, rows].float().clone())
            targets.append(torch.tensor(reply))
            replies += 1
            conv.commit_turn(prompt, reply)
        if (n + 1) % 200 == 0:
            progress(f"features: {n + 1}/{len(dialogues)} dialogues, {sum(len(t) for t in targets)} positions")
    y = torch.cat(targets)
    return [torch.cat(f) for f in feats], y, {"dialogues": len(dialogues), "replies": replies,
                                              "positions": int(y.numel())}


def train_heads(heads, feats: list[torch.Tensor], y: torch.Tensor, config: HeadsTrainConfig,
                progress=print) -> list[float]:
    """Cross-entropy training of every head on its layer's states; the last epoch's mean losses."""
    gen = torch.Generator().manual_seed(config.seed)
    params = heads.parameters_to_train()
    for p in params:
        p.requires_grad_(True)
    heads.lm_head.weight.requires_grad_(False)
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    steps_per_epoch = (len(y) + config.batch_size - 1) // config.batch_size
    total = steps_per_epoch * config.epochs
    schedule = SimpleNamespace(lr=config.lr, warmup=0, steps=total)
    step, last = 0, [0.0] * len(feats)
    for epoch in range(config.epochs):
        order = torch.randperm(len(y), generator=gen)
        sums = [0.0] * len(feats)
        for lo in range(0, len(y), config.batch_size):
            idx = order[lo:lo + config.batch_size]
            for group in optimizer.param_groups:
                group["lr"] = warmup_cosine_lr(step, schedule, floor=0.1)
            losses = [F.cross_entropy(heads.logits(i, f[idx]), y[idx]) for i, f in enumerate(feats)]
            optimizer.zero_grad(set_to_none=True)
            sum(losses).backward()
            optimizer.step()
            sums = [s + loss.item() * len(idx) for s, loss in zip(sums, losses)]
            step += 1
        last = [s / len(y) for s in sums]
        progress(f"epoch {epoch + 1}/{config.epochs}: loss per head " + ", ".join(f"{v:.3f}" for v in last))
    for p in params:
        p.requires_grad_(False)
    return last


@torch.no_grad()
def fit_temperatures(heads, feats: list[torch.Tensor], y: torch.Tensor) -> tuple[list[float], list[dict]]:
    """Temperature scaling per head (the one minimizing validation NLL, on a log grid), and each
    head's validation top-1 agreement with the model and calibration at a few thresholds."""
    grid = [0.5 * 1.06 ** k for k in range(60)]
    temps, report = [], []
    for i, f in enumerate(feats):
        logits = heads.logits(i, f)
        nll = [F.cross_entropy(logits / t, y).item() for t in grid]
        t = grid[min(range(len(grid)), key=nll.__getitem__)]
        temps.append(t)
        p, top = torch.softmax(logits / t, -1).max(-1)
        right = top == y
        at = {}
        for thr in (0.5, 0.6, 0.8, 0.9):
            sel = p >= thr
            at[str(thr)] = {"exit_share": round(sel.float().mean().item(), 3),
                            "right_when_exiting": round(right[sel].float().mean().item(), 3) if sel.any() else None}
        report.append({"exit_layer": heads.exit_layers[i], "top1_agreement": round(right.float().mean().item(), 3),
                       "temperature": round(t, 3), "at_threshold": at})
    return temps, report


def run_training(config: HeadsTrainConfig, model: str, out: Path, progress=print) -> dict:
    from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
    from foresay.engine.llm.config import LLMConfig
    from foresay.engine.llm.backend import load_llm
    from foresay.engine.predgen.exit_heads import ExitHeads

    if config.threads:
        torch.set_num_threads(config.threads)
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    random.seed(config.seed)
    lm = load_llm(LLMConfig(model=model, device="cpu", dtype="float32", threads=config.threads, cache="dynamic"))
    heads = ExitHeads(lm, config.exit_layers, config.rank)  # checks the exit layers against the model
    train = DialogueGenerator(DomainConfig(seed=config.seed), "train").dialogues(config.dialogues)
    val = DialogueGenerator(DomainConfig(seed=config.seed), "val").dialogues(config.val_dialogues)
    feats, y, data = cache_features(lm, train, config.exit_layers, config.max_reply, progress)
    vfeats, vy, vdata = cache_features(lm, val, config.exit_layers, config.max_reply, progress)
    data_seconds = time.perf_counter() - started
    progress(f"cached {data['positions']} training and {vdata['positions']} validation positions "
             f"in {data_seconds:.0f} s")
    _, untrained = fit_temperatures(heads, vfeats, vy)
    losses = train_heads(heads, feats, y, config, progress)
    temps, report = fit_temperatures(heads, vfeats, vy)
    heads.set_temperatures(temps)
    card = {"config": asdict(config), "model": model, "train": data, "val": vdata,
            "final_losses": [round(v, 4) for v in losses], "validation": report,
            "validation_untrained": untrained, "annealed_temperatures": [round(t, 3) for t in heads.temperatures],
            "data_seconds": round(data_seconds, 1), "seconds": round(time.perf_counter() - started, 1),
            "load_average": [round(v, 2) for v in os.getloadavg()], "torch": torch.__version__}
    out.parent.mkdir(parents=True, exist_ok=True)
    heads.save(out, card)
    progress(json.dumps(card, indent=1))
    return card


def main(argv: list[str] | None = None) -> int:
    from foresay.engine.demo.cli import run

    parser = argparse.ArgumentParser(prog="python -m foresay.engine.demo.train_specbound", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    d = HeadsTrainConfig()
    parser.add_argument("--model", default="demo", help="the chat model (default: the demo model)")
    parser.add_argument("--out", help="the heads file (default: specbound.safetensors in the model's folder)")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--dialogues", type=int, default=d.dialogues)
    parser.add_argument("--val-dialogues", type=int, default=d.val_dialogues)
    parser.add_argument("--exit-layers", default=",".join(map(str, d.exit_layers)),
                        help="comma-separated, 1-based: a head after that many decoder layers")
    parser.add_argument("--rank", type=int, default=d.rank)
    parser.add_argument("--epochs", type=int, default=d.epochs)
    parser.add_argument("--batch-size", type=int, default=d.batch_size)
    parser.add_argument("--lr", type=float, default=d.lr)
    parser.add_argument("--threads", type=int, default=d.threads)
    parser.add_argument("--json", metavar="OUT", help="also write the card as JSON")

    def go(args) -> int:
        try:
            layers = tuple(int(x) for x in args.exit_layers.split(",") if x.strip())
        except ValueError:
            raise ForesayError(f"--exit-layers {args.exit_layers!r}: write whole numbers, e.g. 1,2,3") from None
        config = HeadsTrainConfig(seed=args.seed, dialogues=args.dialogues, val_dialogues=args.val_dialogues,
                                  exit_layers=layers, rank=args.rank, epochs=args.epochs,
                                  batch_size=args.batch_size, lr=args.lr, threads=args.threads)
        out = Path(args.out) if args.out else None
        if out is None:
            from foresay.engine.demo.models import DEMO_CHAT, demo_model_dir
            if args.model not in DEMO_CHAT:
                raise ForesayError("--out is needed for a model that is not a shipped demo model")
            out = Path(demo_model_dir(args.model, DEMO_CHAT)) / "specbound.safetensors"
        card = run_training(config, args.model, out)
        if args.json:
            Path(args.json).write_text(json.dumps(card, indent=2))
        print(f"wrote {out}")
        return 0

    parser.set_defaults(func=go)
    return run(parser, argv, ("dialogues", "val_dialogues", "rank", "epochs", "batch_size"))


if __name__ == "__main__":
    raise SystemExit(main())

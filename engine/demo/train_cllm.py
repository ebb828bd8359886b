"""Fine-tune the demo chat model as a consistency LLM (CLLM, Kou et al. 2024) for PredGen's
Jacobi continuation.

Data: Jacobi trajectories of the model itself, collected exactly as PredGen runs them. For each
training request, the model drafts a reply to a cut-off version of it (as it would while the user
is still speaking), then the full request's greedy reply y* is the fixed point; the final
verification keeps the common prefix and the Jacobi continuation (`JacobiFromDraft`, window 16,
unknown positions filled) starts from the stale draft's tail. Every pass's input state becomes one
training sequence: prompt, the accepted part of y*, then the window as the model saw it
(`cllm_data.py`). On-policy (`refresh_every`, as CLLM, the default) they are collected again
from the model being trained every so many steps, so the states it learns from are those its own
Jacobi iterations pass through; off-policy (`refresh_every` 0) only once, from the base, which
lowered the passes per token but not NFETFS on the same turns (docs/benchmarks.md).

Loss, two cross-entropies, each a mean over its own tokens of a batch (CLLM's two terms):
- consistency: every window position after the first wrong guess is labelled with y*'s token
  there, so the model learns to map an intermediate Jacobi state to the fixed point in one step
  (CLLM's global consistency loss, with hard targets), times `consistency_weight`;
- AR: every position whose context is right (the accepted prefix of y*, the window up to its first
  wrong guess) and, in the same batch, ordinary training dialogues laid out as the base model was
  trained (cut-off requests, where a user message ends); with `distill`, the targets there are the
  base model's whole distributions (a frozen copy runs beside), so the greedy replies, the drafts
  of cut-off requests and P(end of turn) stay the base's; without, the labels.
A single mean over both terms with reference labels (the first version of this trainer) left the
consistency positions about an eighth of the gradient and moved the greedy replies away from the
base's: the passes per token did not move.

Runtime code never imports this module; the result is an ordinary model folder.
"""
from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from foresay.engine.demo.chat_data import IGNORE, ChatEncoder, Example
from foresay.engine.demo.cllm_data import collect, split_labels
from foresay.engine.demo.cli import check_schedule
from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
from foresay.engine.demo.train_chat import _batch, _label_loss, _lr_at, _shared_prefix, _step_logits
from foresay.engine.errors import ForesayError


@dataclass(frozen=True)
class CllmTrainConfig:
    """seed: data, trajectories and batch order follow from it.
    dialogues: training dialogues whose last request gives trajectories.
    window / fill: the Jacobi continuation the trajectories come from (as at inference:
        `jacobi:16` without fill, `jacobi:16:fill` with it).
    draft_tokens: how much of the cut-off request's reply serves as the stale draft.
    cuts: cut-off versions of each request (1 to 3 words dropped, drawn anew each time); every
        distinct draft gives its own trajectory (more states from the same requests).
    consistency_weight: the consistency term's weight against the AR term's.
    consistency_span: how many positions after a state's first wrong input carry a consistency
        label (0: all). A guess only saves a pass if every guess before it is right too, so the
        positions right after the first wrong one are those worth learning; far ones are mostly
        unlearnable for a small model and pull its greedy replies away.
    distill: AR targets are the base model's distributions (else the labels).
    refresh_every: on-policy, as CLLM: every that many steps the trajectories of the same requests
        (new cut-offs) are collected again from the model being trained, its own greedy replies
        as fixed points, and replace the previous ones (0: collected once, from the base).
    steps / batch_size: optimizer steps; trajectory states per step (as many AR dialogues join).
    lr / warmup: AdamW peak learning rate, linear warmup, cosine decay to 10%."""
    seed: int = 0
    dialogues: int = 500
    window: int = 16
    fill: bool = False
    draft_tokens: int = 24
    cuts: int = 2
    max_reply: int = 48
    consistency_weight: float = 0.05
    consistency_span: int = 3
    distill: bool = True
    refresh_every: int = 150
    steps: int = 450
    batch_size: int = 16
    lr: float = 3e-4
    warmup: int = 10
    weight_decay: float = 0.01
    threads: int = 1
    stop_at: int | None = None
    checkpoint_every: int = 0

    def __post_init__(self):
        check_schedule("CLLM training", self)
        if (self.dialogues < 1 or self.window < 2 or self.draft_tokens < 1 or self.max_reply < 2
                or self.cuts < 1 or self.consistency_weight < 0
                or self.consistency_span < 0 or self.refresh_every < 0):
            raise ForesayError("CLLM training: dialogues >= 1, window >= 2, draft_tokens >= 1, "
                               "max_reply >= 2, cuts >= 1, consistency_weight >= 0, consistency_span >= 0, "
                               "refresh_every >= 0")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _soft_loss(logits: torch.Tensor, teacher: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy against the teacher's distributions at the labelled positions."""
    keep = labels[:, 1:] != IGNORE
    student = logits[:, :-1][keep].float().log_softmax(-1)
    return -(teacher[:, :-1][keep].float().softmax(-1) * student).sum(-1).mean()


def _cllm_loss(model, prefix_ids: torch.Tensor, states: list[Example], ar: list[Example], start: int,
               pad_id: int, weight: float, teacher=None, span: int = 0) -> torch.Tensor:
    """AR mean + weight x consistency mean over one batch of states and AR dialogues; the AR term
    against `teacher`'s distributions when one is given."""
    halves = [split_labels(state, span) for state in states]
    nothing = [Example(ex.ids, [IGNORE] * len(ex.ids)) for ex in ar]
    ids, ar_labels, mask = _batch([a for a, _ in halves] + ar, start, pad_id)
    _, consistency_labels, _ = _batch([c for _, c in halves] + nothing, start, pad_id)
    logits = _step_logits(model, prefix_ids, ids, mask)
    if teacher is None:
        loss = _label_loss(logits, ar_labels)
    else:
        with torch.no_grad():
            targets = _step_logits(teacher, prefix_ids, ids, mask)
        loss = _soft_loss(logits, targets, ar_labels)
    if weight and (consistency_labels[:, 1:] != IGNORE).any():
        loss = loss + weight * _label_loss(logits, consistency_labels)
    return loss


def _trajectories(lm, encoder: ChatEncoder, config: CllmTrainConfig, dialogues, rng: random.Random,
                  prefix: list[int], progress) -> tuple[list[Example], dict]:
    """The states of `lm`'s (current) Jacobi trajectories on `dialogues`, shuffled."""
    states, stats = collect(lm, encoder, config, dialogues, rng, progress)
    if not states:
        raise ForesayError("CLLM training: no trajectory had a state to learn from")
    rng.shuffle(states)
    _shared_prefix(states, prefix)
    return states, stats


def train_cllm(config: CllmTrainConfig, base: Path, out: Path, system_prompt: str,
               domain: DomainConfig, progress=print) -> dict:
    """Fine-tune the model in `base` into `out` (saved in float16); returns the statistics."""
    from foresay.engine.llm.config import LLMConfig
    from foresay.engine.llm.backend import load_llm

    if config.threads:
        torch.set_num_threads(config.threads)
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    lm = load_llm(LLMConfig(model=str(base), device="cpu", dtype="float32", threads=config.threads))
    tokenizer, model = lm.tokenizer, lm.model
    encoder = ChatEncoder(tokenizer, system_prompt)
    prefix = encoder._encode(tokenizer.apply_chat_template(
        [{"role": "system", "content": system_prompt}], tokenize=False))
    dialogues = DialogueGenerator(domain, "train").dialogues(config.dialogues)
    states, data_stats = _trajectories(lm, encoder, config, dialogues, rng, prefix, progress)
    # laid out as the base was trained (ChatTrainConfig's defaults): cut-off last requests, and
    # where a user message ends, so P(end of turn) stays in the AR term
    ar = encoder.training_examples(DialogueGenerator(DomainConfig(seed=domain.seed + 100), "train")
                                   .dialogues(config.steps * config.batch_size), 0.3, rng,
                                   end_of_message=True, unpunctuated_prob=0.25)
    _shared_prefix(ar, prefix)
    data_seconds = time.perf_counter() - started
    progress(f"{data_stats['states']} states from {data_stats['requests']} requests in {data_seconds:.0f} s")

    teacher = None
    if config.distill:
        teacher = load_llm(LLMConfig(model=str(base), device="cpu", dtype="float32", threads=config.threads)).model
        teacher.eval().requires_grad_(False)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay,
                                  betas=(0.9, 0.98))
    prefix_ids = torch.tensor([prefix])
    losses: list[float] = []
    last = config.stop_at or config.steps
    out.mkdir(parents=True, exist_ok=True)

    def save(step: int) -> dict:
        model.save_pretrained(out, state_dict={k: v.detach().to(torch.float16)
                                               for k, v in model.state_dict().items()})
        tokenizer.save_pretrained(out)
        for name in ("chat_template.jinja", "foresay.json"):  # the template, the history it handles
            if (base / name).exists():
                shutil.copy(base / name, out / name)
        stats = {"config": asdict(config), "domain": asdict(domain), "base_sha256": sha256(base / "model.safetensors"),
                 "data": data_stats, "refreshes": refreshes, "steps_done": step,
                 "final_loss": sum(losses[-25:]) / max(1, len(losses[-25:])),
                 "data_seconds": round(data_seconds, 1), "seconds": round(time.perf_counter() - started, 1),
                 "torch": torch.__version__}
        (out / "training.json").write_text(json.dumps(stats, indent=2))
        return stats

    refreshes: list[dict] = []
    since = 0  # the step the current states were collected at
    for step in range(last):
        if config.refresh_every and step and step % config.refresh_every == 0:
            model.eval()
            states, fresh = _trajectories(lm, encoder, config, dialogues, rng, prefix, progress)
            model.train()
            refreshes.append({"step": step, **fresh})
            since = step
            progress(f"step {step}: {fresh['states']} states of the model being trained, "
                     f"{fresh['passes_per_token']:.3f} passes per token")
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step, config)
        lo = ((step - since) * config.batch_size) % max(1, len(states) - config.batch_size + 1)
        loss = _cllm_loss(model, prefix_ids, states[lo:lo + config.batch_size],
                          ar[step * config.batch_size:(step + 1) * config.batch_size], len(prefix),
                          tokenizer.pad_token_id, config.consistency_weight, teacher, config.consistency_span)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if (step + 1) % 25 == 0 or step + 1 == last:
            progress(f"step {step + 1}/{config.steps}  loss {sum(losses[-25:]) / len(losses[-25:]):.4f}  "
                     f"{time.perf_counter() - started:.0f} s")
        if config.checkpoint_every and (step + 1) % config.checkpoint_every == 0 and step + 1 < last:
            save(step + 1)
    return save(last)


def main(argv: list[str] | None = None) -> int:
    """python -m foresay.engine.demo.train_cllm --out assets/models/demo-chat-cllm"""
    import argparse
    import sys

    from foresay.engine.demo.cli import run
    from foresay.engine.demo.models import DEMO_CHAT, demo_model_dir
    from foresay.engine.predgen.conversation import default_system_prompt

    root = argparse.ArgumentParser(prog="python -m foresay.engine.demo.train_cllm", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = root.add_subparsers(dest="command", required=True)
    parser = commands.add_parser("train", help="fine-tune a demo chat model as a CLLM")
    ev = commands.add_parser("eval", help="Jacobi passes per token after the final verification, on "
                             "held-out requests drafted from a cut-off version of each")
    parser.add_argument("--out", required=True, help="folder for the model (e.g. assets/models/demo-chat-cllm)")
    parser.add_argument("--base", default="demo", help="the model to fine-tune: demo or a folder")
    ev.add_argument("--model", default="demo", help="demo, demo-cllm or a folder")
    ev.add_argument("--split", default="test")
    defaults = CllmTrainConfig()
    parser.add_argument("--refresh-every", type=int, default=defaults.refresh_every,
                        help="on-policy: collect the trajectories again from the model being trained every N steps")
    for sub in (parser, ev):
        for name in ("seed", "dialogues", "window", "draft_tokens", "cuts", "consistency_span", "max_reply",
                     "steps", "batch_size", "warmup", "threads", "stop_at", "checkpoint_every"):
            sub.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(defaults, name))
        sub.add_argument("--lr", type=float, default=defaults.lr)
        sub.add_argument("--consistency-weight", type=float, default=defaults.consistency_weight)
        sub.add_argument("--fill", action="store_true", help="trajectories of jacobi:W:fill")
        sub.add_argument("--no-distill", dest="distill", action="store_false",
                         help="AR term on the labels, not on the base model's distributions")
        sub.add_argument("--data-seed", type=int, default=0, help="seed of the dialogue generator")

    def evaluate(args) -> int:
        from foresay.engine.llm.config import LLMConfig
        from foresay.engine.llm.backend import load_llm
        fields = {k: getattr(args, k) for k in asdict(defaults) if hasattr(args, k)}
        config = CllmTrainConfig(**fields)
        lm = load_llm(LLMConfig(model=args.model, device="cpu", threads=config.threads))
        dialogues = DialogueGenerator(DomainConfig(seed=args.data_seed), args.split).dialogues(config.dialogues)
        _, stats = collect(lm, ChatEncoder(lm.tokenizer, default_system_prompt()), config, dialogues,
                           random.Random(config.seed), lambda line: print(line, file=sys.stderr, flush=True))
        print(json.dumps({"model": args.model, "split": args.split, "window": config.window,
                          "fill": config.fill, **stats}, indent=2))
        return 0

    ev.set_defaults(func=evaluate, cuts=1)  # held out: one cut-off version per request, as a turn has

    def command(args) -> int:
        fields = {k: getattr(args, k) for k in asdict(defaults) if hasattr(args, k)}
        base = demo_model_dir(args.base, DEMO_CHAT) if args.base in DEMO_CHAT else Path(args.base)
        stats = train_cllm(CllmTrainConfig(**fields), base, Path(args.out), default_system_prompt(),
                           DomainConfig(seed=args.data_seed),
                           progress=lambda line: print(line, file=sys.stderr, flush=True))
        print(json.dumps(stats, indent=2))
        return 0

    parser.set_defaults(func=command)
    return run(root, argv, positive=("dialogues", "steps", "batch_size"))


if __name__ == "__main__":
    raise SystemExit(main())

"""Fine-tune the demo chat model for Speculative Streaming (Bhendawade et al., 2024).

The model learns future n-gram prediction: gamma stream embeddings enter its top layers
(multi-stream attention, `engine.predgen.stream_model`), and stream j at position t learns the
token t + 1 + j while the main stream keeps its next-token objective. Loss, per batch:
cross-entropy of the main stream (AR, the base model's own objective on the same kind of
dialogues) plus `stream_weight` times each stream's cross-entropy. The whole model is tuned
(AdamW, the stream embeddings at `stream_lr_scale` times the learning rate): the main stream's
output therefore changes a little, and the result is a different model than the base, whose
greedy decoding Speculative Streaming reproduces exactly.

`tune` chooses what learns. "streams" (the default, the paper's lossless mode): the base weights
stay frozen and the streams get low-rank adapters of `rank` on the top layers' linear maps,
applied to stream rows only, so the main stream IS the base model (its replies and accuracy
unchanged) and a step has no backward pass through the main stream. "top" (the top `layers`
layers and the final norm) and "all" (every weight) are the paper's shared mode: on the demo
model both cost exact-match accuracy (the top layers serve the streams at the expense of the
next-token objective; measured in the model card).

Like the base trainer, every sequence starts with the system prompt, whose KV is computed once
per step and shared across the batch. Runtime code never imports this module; the result is an
ordinary model folder plus `streams.json` / `streams.safetensors`.

    nice -n 19 python -m foresay.engine.demo.train_streams train --out assets/models/demo-chat-streams
"""
from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from foresay.engine.demo.chat_data import IGNORE, ChatEncoder
from foresay.engine.demo.cli import check_schedule, warmup_cosine_lr
from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
from foresay.engine.demo.train_chat import _batch, _shared_prefix
from foresay.engine.errors import ForesayError
from foresay.engine.predgen.stream_model import StreamHeads, StreamsSpec, check_model, multi_stream_forward


@dataclass(frozen=True)
class StreamsTrainConfig:
    """seed: data, stream initialisation and batch order follow from it.
    streams / layers: gamma streams, carried by the top `layers` decoder layers.
    stream_weight: weight of each stream's loss (the main stream's weighs 1).
    steps / batch_size / lr / warmup: AdamW schedule (linear warm-up, cosine decay to 10%).
    stream_lr_scale: the stream embeddings' learning rate, as a multiple of `lr`.
    tune: streams (base frozen, stream adapters of `rank`) | top | all (see the module notes).
    truncate_prob / unpunctuated_prob: as the base model's training data (cut-off and
        unpunctuated last requests), so P(end of turn) keeps its meaning."""
    seed: int = 0
    streams: int = 3
    layers: int = 2
    stream_weight: float = 0.3
    steps: int = 200
    batch_size: int = 16
    lr: float = 1e-3
    warmup: int = 10
    stream_lr_scale: float = 5.0
    tune: str = "streams"
    rank: int = 8
    weight_decay: float = 0.01
    truncate_prob: float = 0.3
    unpunctuated_prob: float = 0.25
    threads: int = 1
    stop_at: int | None = None
    checkpoint_every: int = 0

    def __post_init__(self):
        check_schedule("streams training", self)
        StreamsSpec(self.streams, self.layers, self.rank)
        if self.tune not in ("streams", "top", "all"):
            raise ForesayError("streams training: tune is streams, top or all")
        if self.tune == "streams" and not self.rank:
            raise ForesayError("streams training: tune=streams needs adapters (rank >= 1)")
        if self.stream_weight <= 0 or self.stream_lr_scale <= 0:
            raise ForesayError("streams training: stream_weight and stream_lr_scale must be positive")


def stream_losses(model, heads: StreamHeads, prefix: torch.Tensor, ids: torch.Tensor,
                  labels: torch.Tensor) -> list[torch.Tensor]:
    """[main stream's loss, stream 1's, ..., stream gamma's] over a batch after the shared prefix.
    Right padding needs no mask: a real position never sees a later one."""
    from transformers import DynamicCache

    shared = model(input_ids=prefix, use_cache=True).past_key_values
    cache = DynamicCache(config=model.config)
    for layer, entry in enumerate(shared.layers):
        cache.update(entry.keys.expand(ids.shape[0], -1, -1, -1),
                     entry.values.expand(ids.shape[0], -1, -1, -1), layer)
    main, streams = multi_stream_forward(model, heads, cache, ids)
    vocab = model.config.vocab_size

    def ce(hidden, target):
        return torch.nn.functional.cross_entropy(model.lm_head(hidden).reshape(-1, vocab).float(),
                                                 target.reshape(-1), ignore_index=IGNORE)

    # main at t predicts t + 1; stream j at t predicts t + 1 + j (the prompt's last token starts the reply)
    losses = [ce(main[:, :-1], labels[:, 1:])]
    for j in range(1, heads.spec.streams + 1):
        if labels.shape[1] <= 1 + j:
            break
        losses.append(ce(streams[:, :-1 - j, j - 1], labels[:, 1 + j:]))
    return losses


def _length_batches(examples: list, size: int, rng: random.Random, pool: int = 8) -> list[list]:
    """Batches of similar lengths (sorted within pools of `pool` batches, then shuffled): the
    streams quadruple the top layers' rows, so padding costs more than in the base trainer."""
    batches = []
    for lo in range(0, len(examples), size * pool):
        chunk = sorted(examples[lo:lo + size * pool], key=lambda ex: len(ex.ids))
        batches += [chunk[i:i + size] for i in range(0, len(chunk), size)]
    rng.shuffle(batches)
    return batches


def train_streams(config: StreamsTrainConfig, base: Path, out: Path, system_prompt: str,
                  domain: DomainConfig, progress=print) -> dict:
    """Fine-tune the model in `base` into `out`: with tune=streams its files are copied as they are
    (the main stream is the base model, bit for bit), else saved in float16; the stream
    parameters in float32."""
    from transformers import AutoTokenizer, Qwen2ForCausalLM

    if config.threads:
        torch.set_num_threads(config.threads)
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = Qwen2ForCausalLM.from_pretrained(base, dtype=torch.float32)
    spec = StreamsSpec(config.streams, config.layers, config.rank if config.tune == "streams" else 0)
    check_model(model, spec)
    encoder = ChatEncoder(tokenizer, system_prompt)
    prefix = tokenizer.encode(tokenizer.apply_chat_template(
        [{"role": "system", "content": system_prompt}], tokenize=False), add_special_tokens=False)
    # streams start at the scale of the hidden states they are added to, distinct from one another
    # (much smaller ones leave each stream predicting the main stream's next token for long)
    with torch.no_grad():
        states = model(input_ids=torch.tensor([prefix]), output_hidden_states=True).hidden_states
    scale = states[model.config.num_hidden_layers - config.layers].pow(2).mean().sqrt().item()
    heads = StreamHeads.random(spec, model.config.hidden_size, std=scale, seed=config.seed, model=model)
    dialogues = DialogueGenerator(domain, "train").dialogues(config.steps * config.batch_size)
    examples = encoder.training_examples(dialogues, config.truncate_prob, rng, True, config.unpunctuated_prob,
                                         random.Random(f"{config.seed}:punctuation"))
    _shared_prefix(examples, prefix)
    batches = _length_batches(examples, config.batch_size, rng)
    tuned = {"all": list(model.parameters()), "streams": [],
             "top": [p for m in (*model.model.layers[-config.layers:], model.model.norm) for p in m.parameters()]
             }[config.tune]
    chosen = {id(p) for p in tuned}
    for p in model.parameters():
        p.requires_grad_(id(p) in chosen)
    model.train()
    groups = [{"params": tuned, "scale": 1.0},
              {"params": [heads.embeddings], "scale": config.stream_lr_scale, "weight_decay": 0.0},
              {"params": list(heads.a.values()) + list(heads.b.values()), "scale": 1.0}]
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=config.lr,
                                  weight_decay=config.weight_decay, betas=(0.9, 0.98))
    prefix_ids = torch.tensor([prefix])
    history: list[list[float]] = []
    out.mkdir(parents=True, exist_ok=True)

    def recent() -> list[float]:
        window = history[-25:]
        return [sum(row[i] for row in window) / len(window) for i in range(len(window[0]))]

    def save(step: int) -> dict:
        if config.tune == "streams":
            for name in ("config.json", "generation_config.json", "model.safetensors"):
                shutil.copy(base / name, out / name)
        else:
            model.save_pretrained(out, state_dict={k: v.detach().to(torch.float16)
                                                   for k, v in model.state_dict().items()})
        heads.save(out)
        tokenizer.save_pretrained(out)
        for name in ("chat_template.jinja", "foresay.json"):
            if (base / name).exists():
                shutil.copy(base / name, out / name)
        losses = recent()
        stats = {"config": asdict(config), "domain": asdict(domain), "steps_done": step,
                 "base_parameters": sum(p.numel() for p in model.parameters()),
                 "tuned_parameters": sum(p.numel() for p in tuned),
                 "stream_parameters": sum(p.numel() for p in heads.parameters()),
                 "stream_embedding_parameters": heads.embeddings.numel(), "stream_init_std": round(scale, 4),
                 "final_loss_main": round(losses[0], 4),
                 "final_loss_streams": [round(x, 4) for x in losses[1:]],
                 "seconds": round(time.perf_counter() - started, 1), "torch": torch.__version__}
        (out / "training.json").write_text(json.dumps(stats, indent=2))
        return stats

    last = config.stop_at or config.steps
    for step in range(last):
        lr = warmup_cosine_lr(step, config, floor=0.1)
        for group in optimizer.param_groups:
            group["lr"] = lr * group["scale"]
        ids, labels, _ = _batch(batches[step], len(prefix), tokenizer.pad_token_id)
        losses = stream_losses(model, heads, prefix_ids, ids, labels)
        loss = losses[0] + config.stream_weight * sum(losses[1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(tuned + list(heads.parameters()), 1.0)
        optimizer.step()
        history.append([x.item() for x in losses])
        if (step + 1) % 25 == 0 or step + 1 == last:
            losses = recent()
            progress(f"step {step + 1}/{config.steps}  main {losses[0]:.4f}  streams "
                     + " ".join(f"{x:.3f}" for x in losses[1:]) + f"  {time.perf_counter() - started:.0f} s")
        if config.checkpoint_every and (step + 1) % config.checkpoint_every == 0 and step + 1 < last:
            save(step + 1)
    return save(last)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    from foresay.engine.demo.cli import run
    from foresay.engine.demo.models import DEMO_CHAT, demo_model_dir
    from foresay.engine.predgen.conversation import default_system_prompt

    root = argparse.ArgumentParser(prog="python -m foresay.engine.demo.train_streams", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = root.add_subparsers(dest="command", required=True)
    parser = commands.add_parser("train", help="fine-tune a demo chat model with speculative streams")
    parser.add_argument("--out", required=True, help="folder for the model (e.g. assets/models/demo-chat-streams)")
    parser.add_argument("--base", default="demo", help="the model to fine-tune: demo or a folder")
    parser.add_argument("--data-seed", type=int, default=2, help="seed of the dialogue generator "
                        "(the base model saw seeds 0 and 1)")
    defaults = StreamsTrainConfig()
    for name in ("seed", "streams", "layers", "rank", "steps", "batch_size", "warmup", "threads", "stop_at",
                 "checkpoint_every"):
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(defaults, name))
    for name in ("lr", "stream_weight", "stream_lr_scale"):
        parser.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(defaults, name))
    parser.add_argument("--tune", default=defaults.tune, choices=("streams", "top", "all"),
                        help="streams: base frozen, stream adapters (lossless mode); top / all: shared mode")

    def command(args) -> int:
        fields = {k: getattr(args, k) for k in asdict(defaults) if hasattr(args, k)}
        base = demo_model_dir(args.base, DEMO_CHAT) if args.base in DEMO_CHAT else Path(args.base)
        stats = train_streams(StreamsTrainConfig(**fields), base, Path(args.out), default_system_prompt(),
                              DomainConfig(seed=args.data_seed),
                              progress=lambda line: print(line, file=sys.stderr, flush=True))
        print(json.dumps(stats, indent=2))
        return 0

    parser.set_defaults(func=command)

    ev = commands.add_parser("eval", help="TTFS of the streams continuation vs plain steps on held-out "
                             "requests drafted from a cut-off version (and the best and worst cases)")
    ev.add_argument("--model", default="demo-streams")
    ev.add_argument("--requests", type=int, default=200, help="held-out dialogues (their first request)")
    ev.add_argument("--repeats", type=int, default=3)
    ev.add_argument("--seed", type=int, default=0, help="held-out data and cut-offs")
    ev.add_argument("--threads", type=int, default=1)
    ev.add_argument("--json", metavar="OUT")

    def evaluate(args) -> int:
        from foresay.engine.demo.streams_eval import held_out_requests, measure
        from foresay.engine.llm.config import LLMConfig
        from foresay.engine.llm.backend import load_llm
        from foresay.engine.predgen.streams import attach_stream_heads, stream_heads

        config = LLMConfig(model=args.model, device="cpu", threads=args.threads)
        lm, worst = load_llm(config), load_llm(config)
        heads = stream_heads(lm)
        attach_stream_heads(worst, StreamHeads.random(heads.spec, lm.model.config.hidden_size, seed=12345,
                                                      model=worst.model))
        specs = {"plain": ("trained", "plain"), "streams": ("trained", "streams"),
                 "best (every draft right)": ("trained", "streams"),
                 "worst, no fallback": ("random", "streams"), "worst, fallback": ("random", "streams")}
        requests = held_out_requests(args.requests, args.seed)
        report = measure({"trained": lm, "random": worst}, specs, requests,
                         args.repeats, progress=lambda line: print(line, file=sys.stderr, flush=True),
                         patience={"worst, no fallback": 0}, best=("best (every draft right)",))
        from foresay.engine.demo.streams_eval import pass_costs
        from foresay.engine.predgen.conversation import Conversation
        report["pass_costs"] = pass_costs(lm, list(Conversation(lm).prompt(requests[0][1]).ids))
        report.update(model=args.model, threads=args.threads)
        text = json.dumps(report, indent=2)
        print(text)
        if args.json:
            Path(args.json).write_text(text + "\n")
        return 0

    ev.set_defaults(func=evaluate)
    return run(root, argv, positive=("steps", "batch_size", "streams", "layers", "requests", "repeats"))


if __name__ == "__main__":
    raise SystemExit(main())

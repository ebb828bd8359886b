"""Fine-tune the demo chat model for Speculative Streaming (Bhendawade et al., 2024).

The model learns future n-gram prediction: gamma stream embeddings enter its top layers
(multi-stream attention, `engine.predgen.stream_model`), and stream j at position t learns the
token t + 1 + j while the main stream keeps its next-token objective. Loss, per batch:
cross-entropy of the main stream (AR, the base model's own objective on the same kind of
dialogues) plus `stream_weight` times each stream's cross-entropy. The whole model is tuned
(AdamW, the stream embeddings at `stream_lr_scale` times the learning rate): the main stream's
output therefore changes a little, and the result is a different model than the base, whose
greedy decoding Speculative Streaming reproduces exactly. By default only what the streams pass
through is tuned (the top `layers` decoder layers and the final norm; `tune_all` tunes every
weight): the lower layers, embeddings and output head stay the base model's, which keeps the
main stream close to it and makes a step cheaper (no backward pass below the streams).

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
    tune_all: tune every weight (False: only the top `layers` layers and the final norm).
    truncate_prob / unpunctuated_prob: as the base model's training data (cut-off and
        unpunctuated last requests), so P(end of turn) keeps its meaning."""
    seed: int = 0
    streams: int = 3
    layers: int = 2
    stream_weight: float = 0.3
    steps: int = 200
    batch_size: int = 16
    lr: float = 2e-4
    warmup: int = 10
    stream_lr_scale: float = 25.0
    tune_all: bool = False
    weight_decay: float = 0.01
    truncate_prob: float = 0.3
    unpunctuated_prob: float = 0.25
    threads: int = 1
    stop_at: int | None = None
    checkpoint_every: int = 0

    def __post_init__(self):
        check_schedule("streams training", self)
        StreamsSpec(self.streams, self.layers)
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
    """Fine-tune the model in `base` into `out` (weights in float16, stream embeddings in float32)."""
    from transformers import AutoTokenizer, Qwen2ForCausalLM

    if config.threads:
        torch.set_num_threads(config.threads)
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = Qwen2ForCausalLM.from_pretrained(base, dtype=torch.float32)
    spec = StreamsSpec(config.streams, config.layers)
    check_model(model, spec)
    # streams start near the scale of the token embeddings, distinct from one another
    scale = model.model.embed_tokens.weight.std().item()
    heads = StreamHeads.random(spec, model.config.hidden_size, std=scale, seed=config.seed)
    encoder = ChatEncoder(tokenizer, system_prompt)
    prefix = tokenizer.encode(tokenizer.apply_chat_template(
        [{"role": "system", "content": system_prompt}], tokenize=False), add_special_tokens=False)
    dialogues = DialogueGenerator(domain, "train").dialogues(config.steps * config.batch_size)
    examples = encoder.training_examples(dialogues, config.truncate_prob, rng, True, config.unpunctuated_prob,
                                         random.Random(f"{config.seed}:punctuation"))
    _shared_prefix(examples, prefix)
    batches = _length_batches(examples, config.batch_size, rng)
    tuned = list(model.parameters()) if config.tune_all else \
        [p for m in (*model.model.layers[-config.layers:], model.model.norm) for p in m.parameters()]
    chosen = {id(p) for p in tuned}
    for p in model.parameters():
        p.requires_grad_(id(p) in chosen)
    model.train()
    optimizer = torch.optim.AdamW([
        {"params": tuned, "scale": 1.0},
        {"params": list(heads.parameters()), "scale": config.stream_lr_scale, "weight_decay": 0.0}],
        lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.98))
    prefix_ids = torch.tensor([prefix])
    history: list[list[float]] = []
    out.mkdir(parents=True, exist_ok=True)

    def recent() -> list[float]:
        window = history[-25:]
        return [sum(row[i] for row in window) / len(window) for i in range(len(window[0]))]

    def save(step: int) -> dict:
        model.eval()
        model.save_pretrained(out, state_dict={k: v.detach().to(torch.float16)
                                               for k, v in model.state_dict().items()})
        model.train()
        heads.save(out)
        tokenizer.save_pretrained(out)
        for name in ("chat_template.jinja", "foresay.json"):
            if (base / name).exists():
                shutil.copy(base / name, out / name)
        losses = recent()
        stats = {"config": asdict(config), "domain": asdict(domain), "steps_done": step,
                 "base_parameters": sum(p.numel() for p in model.parameters()),
                 "tuned_parameters": sum(p.numel() for p in tuned),
                 "stream_parameters": heads.embeddings.numel(),
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
    for name in ("seed", "streams", "layers", "steps", "batch_size", "warmup", "threads", "stop_at",
                 "checkpoint_every"):
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(defaults, name))
    for name in ("lr", "stream_weight", "stream_lr_scale"):
        parser.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(defaults, name))
    parser.add_argument("--tune-all", action="store_true", help="tune every weight, not only the stream layers")

    def command(args) -> int:
        fields = {k: getattr(args, k) for k in asdict(defaults) if hasattr(args, k)}
        base = demo_model_dir(args.base, DEMO_CHAT) if args.base in DEMO_CHAT else Path(args.base)
        stats = train_streams(StreamsTrainConfig(**fields), base, Path(args.out), default_system_prompt(),
                              DomainConfig(seed=args.data_seed),
                              progress=lambda line: print(line, file=sys.stderr, flush=True))
        print(json.dumps(stats, indent=2))
        return 0

    parser.set_defaults(func=command)
    return run(root, argv, positive=("steps", "batch_size", "streams", "layers"))


if __name__ == "__main__":
    raise SystemExit(main())

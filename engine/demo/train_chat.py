"""Train the demo chat model: a byte-level BPE tokenizer and a small Qwen2 on the demo dialogues.

Every sequence starts with the same system prompt, so each step computes its KV once (batch 1)
and shares it across the batch (gradients flow through it): on CPU the system prompt would
otherwise be most of the work.
"""
from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from foresay.engine.demo.chat_data import IGNORE, ChatEncoder, Example, corpus_lines
from foresay.engine.demo.cli import check_schedule, warmup_cosine_lr
from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
from foresay.engine.errors import ForesayError
from foresay.engine.llm.fixtures import FixtureSpec, build_tokenizer, qwen2_config, save_chat_tokenizer

log = logging.getLogger(__name__)

DEMO_CHAT_SPEC = FixtureSpec("demo-chat", vocab_size=1024, hidden_size=160, intermediate_size=448,
                             num_layers=4, num_heads=5, num_kv_heads=1, init_std=0.02,
                             max_positions=2048)
# Lines repeated so BPE gives the system prompt and the template's words whole tokens.
_FREQUENT_REPEATS = 200


@dataclass(frozen=True)
class ChatTrainConfig:
    """How the demo chat model is trained.

    seed: data, init and batch order all follow from it.
    steps: optimizer steps; batch_size: dialogues per step.
    lr: peak AdamW learning rate (linear warmup over `warmup` steps, cosine decay to 10%).
    truncate_prob: share of dialogues whose last user turn is cut off (reply unchanged).
    end_of_message: also learn where a user message ends (`<|im_end|>` after a whole request,
        the cut-off words' next token after a cut one), so P(end of turn) means something.
    unpunctuated_prob: share of the other dialogues whose last request loses its final
        punctuation, so that P(end of turn) rests on the words, not only on a "?" or ".".
    threads: torch CPU threads (0: torch's default).
    stop_at: stop after this many steps of the `steps`-long schedule (None: run it all); with
        `checkpoint_every`, the model is also saved every that many steps, so a run on a busy
        machine can be cut short and its last checkpoint reproduced exactly with this field.
    """
    seed: int = 0
    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 40
    weight_decay: float = 0.01
    truncate_prob: float = 0.3
    end_of_message: bool = True
    unpunctuated_prob: float = 0.25
    threads: int = 2
    stop_at: int | None = None
    checkpoint_every: int = 0

    def __post_init__(self):
        check_schedule("chat training", self)
        for name in ("truncate_prob", "unpunctuated_prob"):
            if not 0 <= getattr(self, name) <= 1:
                raise ForesayError(f"chat training: {name} must lie in [0, 1]")


def build_demo_tokenizer(system_prompt: str, seed: int):
    frequent = [system_prompt, "system user assistant"] * _FREQUENT_REPEATS
    return build_tokenizer(DEMO_CHAT_SPEC.vocab_size, seed, frequent + corpus_lines(system_prompt))


def _lr_at(step: int, config: ChatTrainConfig) -> float:
    return warmup_cosine_lr(step, config, floor=0.1)


def _shared_prefix(examples: list[Example], prefix: list[int]) -> None:
    for ex in examples:
        if ex.ids[:len(prefix)] != prefix:
            raise RuntimeError("a training sequence does not start with the system prompt's tokens")


def _batch(examples: list[Example], start: int, pad_id: int):
    rows = [(ex.ids[start:], ex.labels[start:]) for ex in examples]
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(rows), start + width), dtype=torch.long)
    mask[:, :start] = 1
    for r, (row_ids, row_labels) in enumerate(rows):
        ids[r, :len(row_ids)] = torch.tensor(row_ids)
        labels[r, :len(row_labels)] = torch.tensor(row_labels)
        mask[r, start:start + len(row_ids)] = 1
    return ids, labels, mask


def _step_logits(model, prefix: torch.Tensor, ids, mask) -> torch.Tensor:
    """Logits of a batch whose rows all start with `prefix` (run once, its KV shared)."""
    from transformers import DynamicCache

    shared = model(input_ids=prefix, use_cache=True).past_key_values
    cache = DynamicCache(config=model.config)
    for layer, entry in enumerate(shared.layers):
        batch = ids.shape[0]
        cache.update(entry.keys.expand(batch, -1, -1, -1), entry.values.expand(batch, -1, -1, -1), layer)
    return model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True).logits


def _label_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    # position t predicts token t+1; the first reply token is predicted by the position before it
    # (the prompt's last token), which is inside this batch since replies never start a sequence.
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), labels[:, 1:].reshape(-1), ignore_index=IGNORE)


def _step_loss(model, prefix: torch.Tensor, ids, labels, mask) -> torch.Tensor:
    return _label_loss(_step_logits(model, prefix, ids, mask), labels)


def train_chat(config: ChatTrainConfig, out: Path, system_prompt: str, domain: DomainConfig,
               progress=print, resume: Path | None = None) -> dict:
    """Train the tokenizer and model, save both to `out`; returns the training statistics.

    `resume`: continue training the model (and keep the tokenizer) saved in that folder; give the
    domain another seed, so the continuation sees new dialogues (splits do not depend on it)."""
    from transformers import Qwen2ForCausalLM

    if config.threads:
        torch.set_num_threads(config.threads)
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    out.mkdir(parents=True, exist_ok=True)
    if resume is None:
        tok = build_demo_tokenizer(system_prompt, config.seed)
        tokenizer = save_chat_tokenizer(tok, out)
    else:
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(resume)
        tokenizer.save_pretrained(out)
    encoder = ChatEncoder(tokenizer, system_prompt)
    prefix = tokenizer.encode(tokenizer.apply_chat_template(
        [{"role": "system", "content": system_prompt}], tokenize=False), add_special_tokens=False)

    dialogues = DialogueGenerator(domain, "train").dialogues(config.steps * config.batch_size)
    examples = encoder.training_examples(dialogues, config.truncate_prob, rng, config.end_of_message,
                                         config.unpunctuated_prob, random.Random(f"{config.seed}:punctuation"))
    _shared_prefix(examples, prefix)
    if resume is None:
        model = Qwen2ForCausalLM(qwen2_config(DEMO_CHAT_SPEC, tok))
    else:
        model = Qwen2ForCausalLM.from_pretrained(resume, dtype=torch.float32)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay,
                                  betas=(0.9, 0.98))
    prefix_ids = torch.tensor([prefix])
    losses: list[float] = []

    def save(step: int) -> dict:
        model.eval()
        model.save_pretrained(out)
        model.train()
        stats = {"config": asdict(config), "domain": asdict(domain),
                 "parameters": sum(p.numel() for p in model.parameters()),
                 "train_dialogues": len(dialogues), "steps_done": step, "system_prompt_tokens": len(prefix),
                 "final_loss": sum(losses[-50:]) / len(losses[-50:]),
                 "seconds": round(time.perf_counter() - started, 1), "torch": torch.__version__}
        (out / "training.json").write_text(json.dumps(stats, indent=2))
        # what the model handles: the earlier turns its longest training dialogue had
        (out / "foresay.json").write_text(json.dumps({"max_history_turns": domain.max_turns - 1}, indent=2))
        return stats

    last = config.stop_at or config.steps
    for step in range(last):
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step, config)
        batch = examples[step * config.batch_size:(step + 1) * config.batch_size]
        loss = _step_loss(model, prefix_ids, *_batch(batch, len(prefix), tokenizer.pad_token_id))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if (step + 1) % 25 == 0 or step + 1 == last:
            recent = sum(losses[-50:]) / len(losses[-50:])
            progress(f"step {step + 1}/{config.steps}  loss {recent:.4f}  "
                     f"{time.perf_counter() - started:.0f} s")
        if config.checkpoint_every and (step + 1) % config.checkpoint_every == 0 and step + 1 < last:
            save(step + 1)
    model.eval()
    stats = save(last)
    if resume is not None:
        earlier = json.loads((Path(resume) / "training.json").read_text())
        stats["continued_from"] = earlier
        (out / "training.json").write_text(json.dumps(stats, indent=2))
    return stats

"""Train the demo LLM-based recognizer pair (Qwen3-ASR architecture, tiny) on espeak-ng speech.

The same data as the demo Whisper pair (`speech.py`: the domain's requests in many espeak-ng
voice settings, request prefixes spoken alone), the same augmentation and an auxiliary CTC loss
on the projected audio embeddings (training only), but the real Qwen3-ASR layout: transformers'
`Qwen3ASRForConditionalGeneration`, Qwen3-ASR's chat prompt and special tokens (`PromptLayout`),
80-bin log-mel features at 10 ms hops from `Qwen3ASRFeatureExtractor`. A target and a smaller
draft share one byte-level BPE vocabulary, so they form a SpecASR pair that
`foresay.engine.asr` loads like any Qwen3-ASR folder.
"""
from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from foresay.engine.demo.augment import AugmentConfig, augment
from foresay.engine.demo.cli import check_schedule, warmup_cosine_lr
from foresay.engine.demo.llm_asr_teacher import TeacherStates, aligned_targets, copy_encoder_layers, load_teacher
from foresay.engine.demo.speech import SAMPLE_RATE, SpeechSet
from foresay.engine.demo.train_whisper import resolve_precision
from foresay.engine.errors import ForesayError

MEL_BINS = 80
TEXT_TOKENS = 1000
VOCAB_ROWS = 1024
CHUNK = 100  # mel frames per encoder chunk (2 * n_window)


@dataclass(frozen=True)
class LlmAsrShape:
    """Width and depth of a demo LLM-based recognizer."""
    audio_d_model: int
    audio_layers: int
    audio_ffn: int
    conv_channels: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int


SHAPES = {
    "demo-llm-asr": LlmAsrShape(audio_d_model=160, audio_layers=3, audio_ffn=640, conv_channels=32,
                                hidden=192, layers=2, heads=4, kv_heads=2, ffn=512),
    # Two decoder layers: a decoder-only model's one layer would have to find its place in the audio
    # and read the next word there in a single attention (the demo Whisper draft's one layer has
    # two: self- and cross-attention). One layer: 18.2% validation WER, two: 5.2% (same recipe).
    "demo-llm-asr-draft": LlmAsrShape(audio_d_model=96, audio_layers=2, audio_ffn=384, conv_channels=16,
                                      hidden=96, layers=2, heads=4, kv_heads=2, ffn=256),
}
# Up to 0.8 s of silence before and 2 s after the speech: without them (0.4 s and none), the pair's
# WER on held-out clips rose from 4.3% to 8.9% with 0.5 s of silence on both sides and to 40% with
# 0.5 s before and 2 s after (the streaming final hears the endpointer's hangover).
AUGMENT = AugmentConfig(max_shift=80, warp=0.12, freq_mask=8, time_mask=20, time_masks=2, max_tail=200)


@dataclass(frozen=True)
class LlmAsrTrainConfig:
    """How one demo recognizer is trained (fields as `WhisperTrainConfig`'s)."""
    seed: int = 0
    steps: int = 1500
    batch_size: int = 32
    lr: float = 2e-3
    warmup: int = 50
    threads: int = 2
    checkpoint_every: int = 0
    ctc_weight: float = 0.5
    ctc_warmup: int = 0  # first steps train the encoder and projector alone (CTC and the teacher's loss)
    distill_weight: float = 0.0  # weight of the squared distance to the teacher's encoder states
    stop_at: int | None = None
    precision: str = "auto"
    augmentation: AugmentConfig | None = AUGMENT
    log_every: int = 25  # steps between progress lines
    decoder_layers: int | None = None  # the decoder's depth instead of the shape's (an experiment's knob)

    def __post_init__(self):
        check_schedule("LLM-ASR training", self)
        if self.log_every < 1:
            raise ForesayError("LLM-ASR training: log_every must be >= 1")
        if self.ctc_warmup < 0 or (self.ctc_warmup and not self.ctc_weight):
            raise ForesayError("LLM-ASR training: ctc_warmup must be >= 0 and needs a ctc_weight")
        if self.decoder_layers is not None and self.decoder_layers < 1:
            raise ForesayError("LLM-ASR training: decoder_layers must be >= 1")
        if self.precision not in ("auto", "bf16", "fp32"):
            raise ForesayError(f"LLM-ASR training: precision must be auto, bf16 or fp32, not {self.precision!r}")


def build_tokenizer(texts: list[str]):
    from foresay.engine.asr.llm.fixtures import build_tokenizer as bpe

    return bpe(TEXT_TOKENS, corpus=texts)


def feature_extractor():
    from transformers import Qwen3ASRFeatureExtractor
    return Qwen3ASRFeatureExtractor(feature_size=MEL_BINS)


def features(audio: list[np.ndarray]) -> list[torch.Tensor]:
    """Per clip, log-mel features [mels, frames] (float16), as `LoadedLlmAsr.features` computes them."""
    extractor = feature_extractor()
    out = []
    for clip in audio:
        feats = extractor(clip, sampling_rate=SAMPLE_RATE, padding="longest", return_attention_mask=True,
                          return_tensors="pt")
        valid = int(feats.attention_mask.sum())
        out.append(feats.input_features[0, :, :valid].to(torch.float16))
    return out


def model_config(shape: LlmAsrShape, tok):
    from foresay.engine.asr.llm.fixtures import LlmFixtureRecipe, qwen3_asr_config

    recipe = LlmFixtureRecipe(seed=0, text_tokens=TEXT_TOKENS, vocab_rows=VOCAB_ROWS, hidden=shape.hidden,
                              layers=shape.layers, heads=shape.heads, kv_heads=shape.kv_heads, ffn=shape.ffn,
                              audio_d_model=shape.audio_d_model, audio_layers=shape.audio_layers, init_std=0.02)
    config = qwen3_asr_config(tok, recipe)
    config.audio_config.num_mel_bins = MEL_BINS
    config.audio_config.encoder_ffn_dim = shape.audio_ffn
    config.audio_config.downsample_hidden_size = shape.conv_channels
    config.tie_word_embeddings = config.text_config.tie_word_embeddings = True
    return config


def audio_tokens(frames: torch.Tensor) -> torch.Tensor:
    """Audio embeddings the encoder makes of `frames` valid mel frames (full chunks give 13)."""
    rest = frames % CHUNK
    for _ in range(3):
        rest = torch.where(rest > 0, (rest - 1) // 2 + 1, torch.zeros_like(rest))
    return rest + (frames // CHUNK) * 13


@dataclass(frozen=True)
class LlmAsrTrainingData:
    features: list[torch.Tensor]  # per clip [mels, frames], float16
    texts: list[list[int]]  # transcript tokens per clip (without <asr_text> and the end token)
    prefix_clips: int = 0


def training_data(tok, speech: SpeechSet, prefix_clips: int = 0) -> LlmAsrTrainingData:
    return LlmAsrTrainingData(features(speech.audio),
                              [tok.encode(t, add_special_tokens=False).ids for t in speech.texts], prefix_clips)


def batch_inputs(batch: list[int], data: LlmAsrTrainingData, layout, audio_pad: int, config: LlmAsrTrainConfig,
                 gen: torch.Generator) -> dict:
    """Padded features (+ augmentation and mask), prompt token rows with audio placeholders, labels."""
    clips = [data.features[i].float() for i in batch]
    augmentation = config.augmentation
    shifts = [0] * len(clips)
    if augmentation and augmentation.max_shift:  # the endpointer's pre-roll varies: delay the speech
        shifts = torch.randint(0, augmentation.max_shift + 1, (len(clips),), generator=gen).tolist()
        clips = [torch.cat([c.min().expand(c.shape[0], s), c], 1) for c, s in zip(clips, shifts)]
    if augmentation and augmentation.max_tail:  # the endpointer's hangover: silence after the speech
        tails = torch.randint(0, augmentation.max_tail + 1, (len(clips),), generator=gen).tolist()
        clips = [torch.cat([c, c.min().expand(c.shape[0], t)], 1) for c, t in zip(clips, tails)]
    lengths = [c.shape[1] for c in clips]
    width = math.ceil(max(lengths) / CHUNK) * CHUNK
    feats = torch.stack([torch.cat([c, c.min().expand(c.shape[0], width - c.shape[1])], 1) for c in clips])
    if augmentation:  # mel warp and masks (the shift is done above)
        feats = augment(feats, lengths, replace(augmentation, max_shift=0), gen)
    valid = torch.tensor(lengths)
    mask = (torch.arange(width)[None] < valid[:, None]).long()
    n_audio = audio_tokens(valid).tolist()
    rows, starts = [], []
    for n, i in zip(n_audio, batch):
        head = [*layout.head, *layout.before_audio, *[audio_pad] * n, *layout.after_audio]
        starts.append(len(head))
        rows.append(head + layout.decoder_prefix(data.texts[i]) + [layout.end])
    longest = max(map(len, rows))
    ids = torch.full((len(rows), longest), layout.end, dtype=torch.long)
    labels = torch.full((len(rows), longest), -100, dtype=torch.long)
    attention = torch.zeros((len(rows), longest), dtype=torch.long)
    for r, (row, start) in enumerate(zip(rows, starts)):
        ids[r, :len(row)] = torch.tensor(row)
        attention[r, :len(row)] = 1
        labels[r, start + 1:len(row)] = torch.tensor(row[start + 1:])  # after <asr_text>: text and end
    return {"input_ids": ids, "attention_mask": attention, "input_features": feats,
            "input_features_mask": mask, "labels": labels, "n_audio": n_audio, "shifts": shifts}


def shape_of(name: str, config: LlmAsrTrainConfig) -> LlmAsrShape:
    shape = SHAPES[name]
    return replace(shape, layers=config.decoder_layers) if config.decoder_layers else shape


def _lr_at(step: int, config: LlmAsrTrainConfig) -> float:
    return warmup_cosine_lr(step, config, floor=0.05)


def train_llm_asr(name: str, config: LlmAsrTrainConfig, tok, data: LlmAsrTrainingData, out: Path,
                  progress=print, teacher: TeacherStates | None = None, on_checkpoint=None) -> dict:
    """Train demo recognizer `name` (a key of SHAPES); save it to `out`. With `teacher` (states of
    the demo Whisper of the same size over `data`'s clips), the encoder starts from the teacher's
    layers and learns to match its states (`llm_asr_teacher`). `on_checkpoint(out, stats)` runs
    after every save (the command line scores checkpoints there)."""
    from transformers import Qwen3ASRForConditionalGeneration

    from foresay.engine.asr.llm.models import PromptLayout

    if config.threads:
        torch.set_num_threads(config.threads)
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    precision = resolve_precision(config.precision)
    shape = shape_of(name, config)
    model = Qwen3ASRForConditionalGeneration(model_config(shape, tok))
    model.train()
    if teacher is not None:
        if len(teacher.states) != len(data.texts) or not config.distill_weight:
            raise ForesayError("LLM-ASR training: teacher states must cover every clip, with a distill_weight")
        copy_encoder_layers(load_teacher(Path(teacher.folder)), model.model.audio_tower)
    layout = PromptLayout.from_tokenizer(tok, VOCAB_ROWS, "English")
    audio_pad = tok.token_to_id("<|audio_pad|>")
    # As for the demo Whisper, a CTC loss on the audio embeddings (training only) makes the encoder
    # align with the text before the decoder settles into the domain's language model. Its classes
    # are the decoder's own output rows (tied to the token embeddings) plus a blank: the audio
    # embeddings then live where the token embeddings do, and the decoder has only to copy them.
    blank = torch.nn.Linear(shape.hidden, 1)
    optimizer = torch.optim.AdamW([*model.parameters(), *blank.parameters()], lr=config.lr,
                                  weight_decay=0.01, betas=(0.9, 0.98))
    order: list[int] = []
    losses, part_losses = [], {}
    last = config.stop_at or config.steps
    stats = {}
    for step in range(last):
        if len(order) < config.batch_size:
            order += rng.sample(range(len(data.texts)), len(data.texts))
        batch, order = order[:config.batch_size], order[config.batch_size:]
        inputs = batch_inputs(batch, data, layout, audio_pad, config, gen)
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step, config)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss, parts = _step_loss(model, blank, inputs, [data.texts[i] for i in batch], config,
                              step < config.ctc_warmup, teacher and aligned_targets(teacher, batch, inputs["n_audio"],
                                                                                    inputs["shifts"]))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        for key, value in parts.items():
            part_losses.setdefault(key, []).append(value)
        if (step + 1) % config.log_every == 0 or step + 1 == last:
            shown = "".join(f" {key} {np.mean(values[-25:]):.3f}" for key, values in part_losses.items())
            progress(f"{name}: step {step + 1}/{config.steps}  loss {np.mean(losses[-25:]):.4f} ({shown.strip()})  "
                     f"{time.perf_counter() - started:.0f} s")
        if step + 1 == last or (config.checkpoint_every and (step + 1) % config.checkpoint_every == 0):
            stats = _save(name, model, tok, out, config, precision, step + 1, data, losses, started)
            if on_checkpoint is not None:
                on_checkpoint(out, stats)
    return stats


def _step_loss(model, blank, inputs: dict, texts: list[list[int]], config: LlmAsrTrainConfig, encoder_only: bool,
               targets: torch.Tensor | None) -> tuple[torch.Tensor, dict[str, float]]:
    """CTC (+ the teacher's loss) on the encoder; after the warm-up, the decoder's cross-entropy too.
    Returns the weighted sum and each part's value."""
    audio = model.get_audio_features(inputs["input_features"], inputs["input_features_mask"])
    ctc = _ctc(model.lm_head, blank, audio.pooler_output.float(), inputs["n_audio"], texts)
    loss, parts = ctc * (1.0 if encoder_only else config.ctc_weight), {"ctc": ctc.item()}
    if targets is not None:
        distance = (audio.last_hidden_state.float() - targets).pow(2).mean()
        loss, parts["teacher"] = loss + config.distill_weight * distance, distance.item()
    if encoder_only:  # the decoder's loss would teach the encoder to guess from the language
        return loss, parts
    ids = inputs["input_ids"]
    embeds = model.get_input_embeddings()(ids)
    embeds = embeds.masked_scatter((ids == model.config.audio_token_id)[..., None].expand_as(embeds),
                                   audio.pooler_output.to(embeds.dtype))
    hidden = model.model(inputs_embeds=embeds, attention_mask=inputs["attention_mask"]).last_hidden_state
    labels = inputs["labels"][:, 1:]
    scored = labels != -100  # the output layer only where a token is predicted (a fifth of the rows)
    ce = torch.nn.functional.cross_entropy(model.lm_head(hidden[:, :-1][scored]).float(), labels[scored])
    parts["ce"] = ce.item()
    return loss + ce, parts


def ctc_log_probs(lm_head, blank, audio: torch.Tensor, n_audio: list[int]) -> torch.Tensor:
    """[time, batch, rows + 1] CTC log-probabilities of packed audio embeddings (blank last)."""
    padded = torch.nn.utils.rnn.pad_sequence(list(torch.split(audio, n_audio)))  # [time, batch, hidden]
    return torch.cat([lm_head(padded).float(), blank(padded).float()], -1).log_softmax(-1)


def _ctc(lm_head, blank, audio: torch.Tensor, n_audio: list[int], texts: list[list[int]]) -> torch.Tensor:
    return torch.nn.functional.ctc_loss(
        ctc_log_probs(lm_head, blank, audio, n_audio), torch.tensor([t for text in texts for t in text]),
        torch.tensor(n_audio), torch.tensor([len(text) for text in texts]), blank=VOCAB_ROWS, zero_infinity=True)


def _save(name, model, tok, out: Path, config, precision: str, steps_done: int, data, losses, started) -> dict:
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.float16).save_pretrained(out)  # half the size; decoding loads float32 on CPU
    model.to(torch.float32).train()
    tok.save(str(out / "tokenizer.json"))
    feature_extractor().save_pretrained(out)
    stats = {"name": name, "shape": asdict(shape_of(name, config)), "config": asdict(config), "precision": precision,
             "parameters": sum(p.numel() for p in model.parameters()), "train_clips": len(data.texts),
             "prefix_clips": data.prefix_clips, "steps_done": steps_done,
             "final_loss": float(np.mean(losses[-25:])), "seconds": round(time.perf_counter() - started, 1),
             "torch": torch.__version__}
    (out / "training.json").write_text(json.dumps(stats, indent=2))
    return stats

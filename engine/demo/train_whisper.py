"""Train the demo Whisper pair (a target and a smaller draft with one tokenizer) on espeak-ng speech.

Both models read a 6 s window at 20 ms mel hops (the demo's requests last 1 to 5 s), which keeps
the encoder short enough to train on a CPU. They share a byte-level BPE vocabulary trained on the
domain's requests, followed by Whisper's special tokens (no timestamp tokens: Foresay decodes
without them), so `foresay.engine.asr` loads them like any English-only Whisper.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from foresay.engine.demo.augment import AugmentConfig, augment
from foresay.engine.demo.cli import check_schedule, warmup_cosine_lr
from foresay.engine.demo.speech import SAMPLE_RATE, SpeechSet
from foresay.engine.errors import ForesayError

WINDOW_SECONDS = 6
HOP_LENGTH = 320
MEL_BINS = 80
VOCAB_SIZE = 1024
# Whisper's special tokens Foresay's decoders use, after the text vocabulary (eot first).
SPECIAL_TOKENS = ("<|endoftext|>", "<|startoftranscript|>", "<|translate|>", "<|transcribe|>",
                  "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>")


@dataclass(frozen=True)
class WhisperShape:
    """Width and depth of a demo Whisper."""
    d_model: int
    encoder_layers: int
    decoder_layers: int
    heads: int
    ffn: int
    max_target_positions: int = 128


SHAPES = {
    "demo-whisper": WhisperShape(d_model=160, encoder_layers=3, decoder_layers=2, heads=4, ffn=640),
    "demo-whisper-draft": WhisperShape(d_model=96, encoder_layers=2, decoder_layers=1, heads=4, ffn=384),
}


@dataclass(frozen=True)
class WhisperTrainConfig:
    """How one demo Whisper is trained.

    seed: init and batch order. steps / batch_size: optimizer steps and clips per step.
    lr: peak AdamW learning rate (warmup over `warmup` steps, cosine decay to 5%).
    threads: torch CPU threads (0: torch's default).
    precision: "bf16" runs forward and backward under bfloat16 autocast (weights and optimizer stay
        float32), "fp32" does not, "auto" picks bf16 where the CPU computes it natively.
    augmentation: per-batch feature augmentation (None: none), see `augment`.
    checkpoint_every: also save the model every that many steps (0: only at the end), so a run on
        a busy machine can be cut short; its training.json says how many steps it had done.
    init_from: fine-tune this saved model (same shape and vocabulary) rather than a fresh one.
    """
    seed: int = 0
    steps: int = 600
    batch_size: int = 32
    lr: float = 2e-3
    warmup: int = 50
    threads: int = 2
    checkpoint_every: int = 0
    ctc_weight: float = 0.5  # weight of an auxiliary CTC loss on the encoder (0: none), see below
    stop_at: int | None = None  # stop after this many steps of the schedule (reproduces a cut-short run)
    precision: str = "auto"
    augmentation: AugmentConfig | None = AugmentConfig()
    init_from: str | None = None  # a saved demo Whisper folder to fine-tune instead of starting from scratch

    def __post_init__(self):
        check_schedule("whisper training", self)
        if self.precision not in ("auto", "bf16", "fp32"):
            raise ForesayError(f"whisper training: precision must be auto, bf16 or fp32, not {self.precision!r}")


def native_bf16() -> bool:
    """Whether this CPU has bfloat16 arithmetic (AVX-512 BF16 or AMX); elsewhere autocast to
    bf16 is emulated and slower than float32."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str) -> str:
    if precision == "auto":
        return "bf16" if native_bf16() else "fp32"
    return precision


def build_whisper_tokenizer(texts: list[str]):
    """Byte-level BPE over the requests (each with Whisper's leading space), specials appended."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - len(SPECIAL_TOKENS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([" " + t for t in texts], trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return tok


def feature_extractor():
    from transformers import WhisperFeatureExtractor
    return WhisperFeatureExtractor(feature_size=MEL_BINS, hop_length=HOP_LENGTH, chunk_length=WINDOW_SECONDS)


def features(audio: list[np.ndarray], batch: int = 256) -> torch.Tensor:
    """Log-mel features [n, mels, frames] (float16 to halve memory), as `LoadedWhisper` computes them."""
    extractor = feature_extractor()
    samples = WINDOW_SECONDS * SAMPLE_RATE
    out = []
    for at in range(0, len(audio), batch):
        clips = [a[:samples] for a in audio[at:at + batch]]
        feats = extractor(clips, sampling_rate=SAMPLE_RATE, return_tensors="pt", padding="max_length",
                          max_length=samples).input_features
        out.append(feats.to(torch.float16))
    return torch.cat(out)


def speech_frames(audio: list[np.ndarray]) -> list[int]:
    """Mel frames each clip's audio covers in the window (the rest of the window is padding)."""
    window = WINDOW_SECONDS * SAMPLE_RATE // HOP_LENGTH
    return [min(window, len(a) // HOP_LENGTH + 1) for a in audio]


def _config(shape: WhisperShape, tok):
    from transformers import WhisperConfig

    ids = tok.get_vocab()
    return WhisperConfig(
        vocab_size=tok.get_vocab_size(), num_mel_bins=MEL_BINS, d_model=shape.d_model,
        encoder_layers=shape.encoder_layers, decoder_layers=shape.decoder_layers,
        encoder_attention_heads=shape.heads, decoder_attention_heads=shape.heads,
        encoder_ffn_dim=shape.ffn, decoder_ffn_dim=shape.ffn,
        max_source_positions=WINDOW_SECONDS * SAMPLE_RATE // HOP_LENGTH // 2,
        max_target_positions=shape.max_target_positions,
        pad_token_id=ids["<|endoftext|>"], bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|endoftext|>"], decoder_start_token_id=ids["<|startoftranscript|>"],
        suppress_tokens=[], begin_suppress_tokens=[ids["Ġ"], ids["<|endoftext|>"]])


def token_rows(tok, texts: list[str]) -> list[list[int]]:
    """[start of transcript, no timestamps, text..., end of text] per request."""
    ids = tok.get_vocab()
    head = [ids["<|startoftranscript|>"], ids["<|notimestamps|>"]]
    return [head + tok.encode(" " + t, add_special_tokens=False).ids + [ids["<|endoftext|>"]] for t in texts]


def _lr_at(step: int, config: WhisperTrainConfig) -> float:
    return warmup_cosine_lr(step, config, floor=0.05)


def train_whisper(name: str, config: WhisperTrainConfig, tok, data: "WhisperTrainingData", out: Path,
                  progress=print) -> dict:
    """Train demo Whisper `name` (a key of SHAPES) on precomputed features; save it to `out`."""
    from transformers import WhisperForConditionalGeneration

    if config.threads:
        torch.set_num_threads(config.threads)
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    augment_rng = torch.Generator().manual_seed(config.seed)
    precision = resolve_precision(config.precision)
    if config.init_from:
        model = WhisperForConditionalGeneration.from_pretrained(config.init_from, dtype=torch.float32)
        if model.config.d_model != SHAPES[name].d_model or model.config.vocab_size != tok.get_vocab_size():
            raise ValueError(f"{config.init_from} is not a {name} of this vocabulary to fine-tune")
    else:
        model = WhisperForConditionalGeneration(_config(SHAPES[name], tok))
    model.train()
    # From scratch, the decoder learns the domain's language model long before it learns to
    # listen (it plateaus ignoring the audio). A CTC head on the encoder, used only in training,
    # makes the encoder align with the text from the start; it is not saved.
    ctc_head = torch.nn.Linear(SHAPES[name].d_model, tok.get_vocab_size() + 1)
    blank = tok.get_vocab_size()
    optimizer = torch.optim.AdamW([*model.parameters(), *ctc_head.parameters()], lr=config.lr,
                                  weight_decay=0.01, betas=(0.9, 0.98))
    eot = tok.token_to_id("<|endoftext|>")
    rows = data.rows
    order: list[int] = []
    losses = []
    last = config.stop_at or config.steps
    for step in range(last):
        if len(order) < config.batch_size:
            order += rng.sample(range(len(rows)), len(rows))
        batch, order = order[:config.batch_size], order[config.batch_size:]
        width = max(len(rows[i]) for i in batch)
        ids = torch.full((len(batch), width), eot, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        for r, i in enumerate(batch):
            ids[r, :len(rows[i])] = torch.tensor(rows[i])
            labels[r, 1:len(rows[i])] = torch.tensor(rows[i][1:])
        labels[:, 1] = -100  # <|notimestamps|> is forced, never predicted
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step, config)
        feats = data.features[batch].float()
        if config.augmentation:
            feats = augment(feats, [data.frames[i] for i in batch], config.augmentation, augment_rng)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            result = model(input_features=feats, decoder_input_ids=ids[:, :-1])
        logits = result.logits.float()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                                                 ignore_index=-100)
        if config.ctc_weight:
            texts = [rows[i][2:-1] for i in batch]
            log_probs = ctc_head(result.encoder_last_hidden_state.float()).log_softmax(-1).transpose(0, 1)
            ctc = torch.nn.functional.ctc_loss(
                log_probs, torch.tensor([t for text in texts for t in text]),
                torch.full((len(batch),), log_probs.shape[0], dtype=torch.long),
                torch.tensor([len(text) for text in texts]), blank=blank, zero_infinity=True)
            loss = loss + config.ctc_weight * ctc
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if (step + 1) % 25 == 0 or step + 1 == last:
            progress(f"{name}: step {step + 1}/{config.steps}  loss {np.mean(losses[-25:]):.4f}  "
                     f"{time.perf_counter() - started:.0f} s")
        if step + 1 == last or (config.checkpoint_every and (step + 1) % config.checkpoint_every == 0):
            stats = _save(name, model, tok, out, config, precision, step + 1, data, losses, started)
    return stats


def _save(name, model, tok, out: Path, config: WhisperTrainConfig, precision: str, steps_done: int,
          data: WhisperTrainingData, losses, started: float) -> dict:
    model.eval()
    save_whisper(model, tok, out)
    model.train()
    stats = {"name": name, "shape": asdict(SHAPES[name]), "config": asdict(config),
             "precision": precision, "parameters": sum(p.numel() for p in model.parameters()),
             "train_clips": len(data.rows), "prefix_clips": data.prefix_clips,
             "fragment_clips": data.fragment_clips, "paused_clips": data.paused_clips,
             "room_lead_s": data.room_lead_s, "room_tail_s": data.room_tail_s,
             "room_silent_share": data.room_silent_share, "paused_requested": data.paused_requested,
             "steps_done": steps_done, "final_loss": float(np.mean(losses[-25:])),
             "seconds": round(time.perf_counter() - started, 1), "torch": torch.__version__}
    (out / "training.json").write_text(json.dumps(stats, indent=2))
    return stats


def save_whisper(model, tok, out: Path) -> None:
    """Weights in float16 (half the size; decoding loads them as float32), tokenizer, generation
    config and feature extractor, laid out as `foresay.engine.asr.whisper.models.load_whisper` reads them."""
    ids = tok.get_vocab()
    out.mkdir(parents=True, exist_ok=True)
    generation = model.generation_config
    generation.suppress_tokens = []
    generation.begin_suppress_tokens = [ids["Ġ"], ids["<|endoftext|>"]]
    generation.decoder_start_token_id = ids["<|startoftranscript|>"]
    generation.no_timestamps_token_id = ids["<|notimestamps|>"]
    generation.is_multilingual = False
    model.to(torch.float16).save_pretrained(out)
    model.to(torch.float32)
    tok.save(str(out / "tokenizer.json"))
    feature_extractor().save_pretrained(out)


@dataclass(frozen=True)
class WhisperTrainingData:
    """Training clips as features [clips, mels, frames] (float16), token rows, and the frames
    each clip's speech covers."""
    features: torch.Tensor
    rows: list[list[int]]
    frames: list[int]
    prefix_clips: int = 0  # how many of the clips are request prefixes (kind "prefixes")
    fragment_clips: int = 0  # how many are requests cut at a pause (kind "fragments")
    paused_clips: int = 0  # how many are whole requests with a pause inside (kind "paused")
    room_lead_s: float = 0.0  # each clip has up to this much room noise before it (`SpeechSet.in_room`)
    room_tail_s: float = 0.0  # and up to this much after it
    room_silent_share: float = 0.0  # the share of clips framed in digital silence instead of noise
    paused_requested: int = 0  # paused clips asked for (`paused_clips` is what fits the window)


def training_data(tok, speech: SpeechSet, prefix_clips: int = 0, fragment_clips: int = 0,
                  paused_clips: int = 0, room_lead_s: float = 0.0, room_tail_s: float = 0.0,
                  room_seed: int = 0, room_silent_share: float = 0.0, paused_requested: int = 0) -> WhisperTrainingData:
    """`room_lead_s` / `room_tail_s`: each clip gains a lead and a tail of its own noise, drawn
    uniformly up to these (seeded by `room_seed`), within the window: the endpointer's pre-roll
    holds the room's noise before the first word, which a model trained on espeak-ng's clips alone
    (they begin at the first sound) takes for words. `room_silent_share` of the clips are framed in
    digital silence instead (a noise-suppressed microphone, a rendered file): a model that only
    ever heard noise before a word hears whole sentences of its own in a silent lead."""
    if room_lead_s or room_tail_s:
        speech = speech.in_room((0.0, room_lead_s), (0.0, room_tail_s), room_seed, limit_s=WINDOW_SECONDS,
                                silent_share=room_silent_share)
    elif room_silent_share:
        raise ForesayError("a silent share of the room needs a room: room_lead_s or room_tail_s above 0")
    return WhisperTrainingData(features(speech.audio), token_rows(tok, speech.texts), speech_frames(speech.audio),
                               prefix_clips, fragment_clips, paused_clips, room_lead_s, room_tail_s,
                               room_silent_share, paused_requested)

"""Light early-exit heads for SpecBound: the base model's own LM head read at intermediate layers.

A head at exit layer e (the residual stream after e decoder layers) is an RMSNorm of its own, a
low-rank residual adapter (zero-initialized: untrained, the head reads the layer through the
model's final norm and LM head as they are) and the base model's frozen LM head. The base model
is not changed. Each head carries a temperature; shallow layers are overconfident, so the
temperatures anneal: a shallower head's is never below a deeper one's.

The file (`specbound.safetensors` beside the model's weights) holds the heads' tensors and, as
metadata, the exit layers, the rank, the temperatures and a fingerprint of the model they were
trained for.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from foresay.engine.errors import ForesayError, ModelUnavailable

HEADS_FILE = "specbound.safetensors"
FOLD_LIMIT = 1 << 24  # LM heads up to this many weights are folded into each exit head
TRAIN_COMMAND = "python -m foresay.engine.demo.train_specbound --model {model} --out {path}"


class ExitHeads(nn.Module):
    """Heads at `exit_layers` (1-based: after that many decoder layers) of `lm`'s model."""

    def __init__(self, lm, exit_layers: tuple[int, ...], rank: int = 16,
                 temperatures: tuple[float, ...] | None = None):
        super().__init__()
        config = lm.model.config
        n_layers, hidden = config.num_hidden_layers, config.hidden_size
        exit_layers = tuple(int(e) for e in exit_layers)
        if not exit_layers or list(exit_layers) != sorted(set(exit_layers)) \
                or exit_layers[0] < 1 or exit_layers[-1] >= n_layers:
            raise ForesayError(f"exit layers {exit_layers} must rise strictly within 1 .. {n_layers - 1} "
                               f"({n_layers} decoder layers)")
        if rank < 1:
            raise ForesayError("exit heads: the adapter rank must be >= 1")
        self.exit_layers = exit_layers
        self.rank = rank
        self.eps = getattr(config, "rms_norm_eps", 1e-6)
        final_norm = lm.model.model.norm.weight.detach()
        self.norms = nn.ParameterList(nn.Parameter(final_norm.clone().float()) for _ in exit_layers)
        self.down = nn.ParameterList(nn.Parameter(torch.randn(rank, hidden) * hidden ** -0.5)
                                     for _ in exit_layers)
        self.up = nn.ParameterList(nn.Parameter(torch.zeros(hidden, rank)) for _ in exit_layers)
        self.set_temperatures(temperatures or (1.0,) * len(exit_layers))
        self._folded: list[torch.Tensor] | None = None  # made at first use, once the heads are final
        self.fingerprint = model_fingerprint(lm)
        self.to(device=lm.device, dtype=lm.dtype)
        # the base model's LM head, frozen and shared: not a submodule (not saved, not trained)
        object.__setattr__(self, "lm_head", lm.model.get_output_embeddings())

    def set_temperatures(self, temperatures) -> None:
        temps = [float(t) for t in temperatures]
        if len(temps) != len(self.exit_layers) or any(not t > 0 for t in temps):
            raise ForesayError(f"exit heads: need {len(self.exit_layers)} positive temperatures, got {temps}")
        for i in range(len(temps) - 2, -1, -1):  # anneal: shallower heads at least as cool-headed
            temps[i] = max(temps[i], temps[i + 1])
        self.temperatures = tuple(temps)

    def parameters_to_train(self) -> list[nn.Parameter]:
        return [*self.norms, *self.down, *self.up]

    def logits(self, i: int, hidden: torch.Tensor) -> torch.Tensor:
        """Raw logits of head i (exit layer `exit_layers[i]`) for hidden states (..., H)."""
        x = F.rms_norm(hidden.to(self.norms[i].dtype), hidden.shape[-1:], self.norms[i], self.eps)
        x = x + F.linear(F.linear(x, self.down[i]), self.up[i])
        return self.lm_head(x).float()

    @torch.no_grad()
    def confidence(self, i: int, hidden: torch.Tensor) -> tuple[int, float]:
        """(argmax token, its tempered probability) of head i at one position's state (1, 1, H)."""
        x = hidden[0, -1]
        if self._folded is None:
            self._folded = self._fold()
        if self._folded:  # one matrix product instead of norm weight, adapter and LM head
            logits = F.linear(F.rms_norm(x.to(self._folded[i].dtype), x.shape[-1:], eps=self.eps),
                              self._folded[i], self.lm_head.bias).float()
        else:
            logits = self.logits(i, x)
        probs = torch.softmax(logits / self.temperatures[i], -1)
        p, token = probs.max(-1)
        return int(token), float(p)

    def _fold(self) -> list[torch.Tensor]:
        """Per head, LM head x (I + up down) x diag(norm) as one (V, H) matrix, when that is small
        (a real model's vocabulary makes it as large as its LM head: then no folding)."""
        weight = self.lm_head.weight
        if weight.numel() > FOLD_LIMIT:
            return []
        eye = torch.eye(weight.shape[1], dtype=torch.float32, device=weight.device)
        return [(weight.float() @ (eye + self.up[i].float() @ self.down[i].float()) * self.norms[i].float())
                .to(weight.dtype) for i in range(len(self.exit_layers))]

    def save(self, path: Path, card: dict | None = None) -> None:
        from safetensors.torch import save_file
        tensors = {}
        for i, e in enumerate(self.exit_layers):
            tensors[f"exit.{e}.norm"] = self.norms[i].detach().float().cpu().contiguous()
            tensors[f"exit.{e}.down"] = self.down[i].detach().float().cpu().contiguous()
            tensors[f"exit.{e}.up"] = self.up[i].detach().float().cpu().contiguous()
        meta = {"exit_layers": list(self.exit_layers), "rank": self.rank,
                "temperatures": list(self.temperatures), "fingerprint": self.fingerprint,
                "card": card or {}}
        save_file(tensors, str(path), metadata={"specbound": json.dumps(meta)})


def model_fingerprint(lm) -> dict:
    """What heads must match: shapes, and a checksum of the LM head they read through."""
    config = lm.model.config
    head = lm.model.get_output_embeddings().weight.detach().float()
    return {"layers": config.num_hidden_layers, "hidden": config.hidden_size,
            "vocab": int(head.shape[0]), "head_sum": round(float(head.abs().sum()), 2)}


def same_model(a: dict, b: dict) -> bool:
    """Fingerprints of one model: same shapes, LM-head checksums equal up to rounding (the same
    weights in bfloat16 on a GPU and in float32 on a CPU)."""
    shapes = all(a.get(k) == b.get(k) for k in ("layers", "hidden", "vocab"))
    return shapes and abs(a["head_sum"] - b["head_sum"]) <= 1e-3 * max(1.0, abs(b["head_sum"]))


def heads_path(lm) -> Path | None:
    """Where the heads of `lm` live: beside its weights (None: the model has no local folder)."""
    folder = Path(str(getattr(lm.model, "name_or_path", "") or ""))
    return folder / HEADS_FILE if folder.is_dir() else None


def load_exit_heads(lm, path: Path | None = None) -> ExitHeads:
    """The heads trained for `lm` (cached on it once loaded)."""
    cached = getattr(lm, "_exit_heads", None)
    if cached is not None and path is None:
        return cached
    path = path or heads_path(lm)
    if path is None or not Path(path).is_file():
        where = path or f"{HEADS_FILE} in the model's folder"
        raise ModelUnavailable(
            f"SpecBound needs early-exit heads trained for {lm.name} ({where} is missing). Train them: "
            + TRAIN_COMMAND.format(model=lm.name, path=path or "<model folder>/" + HEADS_FILE)
            + " (or choose another continuation: plain, jacobi)")
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        meta = json.loads((f.metadata() or {}).get("specbound", "null") or "null")
        if not meta:
            raise ForesayError(f"{path} is not a SpecBound heads file (no 'specbound' metadata)")
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    if not same_model(meta["fingerprint"], model_fingerprint(lm)):
        raise ForesayError(f"{path} holds heads trained for another model ({meta['fingerprint']}, this one: "
                           f"{model_fingerprint(lm)}); train them again: "
                           + TRAIN_COMMAND.format(model=lm.name, path=path))
    heads = ExitHeads(lm, tuple(meta["exit_layers"]), meta["rank"], tuple(meta["temperatures"]))
    with torch.no_grad():
        for i, e in enumerate(heads.exit_layers):
            heads.norms[i].copy_(tensors[f"exit.{e}.norm"])
            heads.down[i].copy_(tensors[f"exit.{e}.down"])
            heads.up[i].copy_(tensors[f"exit.{e}.up"])
    heads.eval().requires_grad_(False)
    attach_exit_heads(lm, heads)
    return heads


def attach_exit_heads(lm, heads: ExitHeads) -> None:
    """Make `heads` the ones SpecBound uses for `lm` (loading does this; tests attach their own)."""
    if not same_model(heads.fingerprint, model_fingerprint(lm)):
        raise ForesayError("these exit heads were made for another model")
    lm._exit_heads = heads

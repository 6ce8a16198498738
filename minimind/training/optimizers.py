"""The optimizer of a run, chosen by `optim.name`.

- `adamw`: AdamW on every trainable weight; matrices decay, norms and biases
  do not. Fused where it can be.
- `muon`: Muon (momentum, then each update orthogonalised by Newton-Schulz iterations) on
  the 2-D weights inside the decoder layers, AdamW on the rest (the embedding, the output
  head, norms, LoRA factors, a classifier's head), as Muon's authors do. Its update is scaled
  to AdamW's RMS (Moonshot's 0.2 * sqrt(max(rows, columns))), so the same learning rate and
  weight decay apply to both halves and the schedule sets one rate.
- `auto` (the default): `muon` to pretrain a new transformer where its update is cheap beside the
  step (`choose_optimizer`), `adamw` otherwise.

`BatchedMuon` is `torch.optim.Muon`'s update (same momentum, coefficients, scaling and state,
tested against it) with the Newton-Schulz iterations of all same-shaped matrices run as one
batched matmul: a small model's step makes ~30 small matrices, and torch's one-by-one loop
cost a `pico` step 70 % more time on 2 CPU threads, where the batched one costs a few percent.
"""

from __future__ import annotations

import math
from collections import defaultdict

import torch

from ..errors import ConfigError
from .perf import flops_per_token

OPTIMIZERS = ("adamw", "muon")


# Muon's update costs its Newton-Schulz matmuls, about ns_steps x (4 m^2 n + 2 m^3) FLOPs for each hidden
# m x n matrix (m <= n) whatever the batch, while a step's forward and backward cost 6 FLOPs per weight and
# token. `auto` takes Muon where the update is at most this share of the step's FLOPs. Measured on the Tang
# poems, 5 minutes each, 2 threads, held-out BPC Muon / AdamW at the CPU default of 4 x 256 tokens a step
# (benchmarks/NOTES.md, 2026-12-05): nano (update 60 % of a step) 7.24 / 7.43, mini (113 %) 7.98 / 8.06,
# small (168 %) 8.38 / 8.32, where AdamW's cheaper steps win (418 steps against 189) and Muon made the
# default settings 2.2 times slower (benchmarks/train_throughput.py). A GPU's batches of 32 x 512 tokens
# bring every preset under 20 %.
MUON_MAX_SHARE = 1.5


def muon_update_flops(model, ns_steps: int) -> float:
    """FLOPs of one Muon update of the model's hidden matrices (its Newton-Schulz iterations)."""
    total = 0.0
    for name, p in model.named_parameters():
        if p.requires_grad and is_hidden_matrix(name, p):
            m, n = sorted(p.shape)
            total += ns_steps * (4 * m * m * n + 2 * m ** 3)
    return total


def muon_share(model, cfg, tokens_per_step: int) -> float:
    """Muon's update FLOPs over a training step's model FLOPs (perf.flops_per_token)."""
    step = flops_per_token(model.config, cfg.data.seq_len) * tokens_per_step
    return muon_update_flops(model, cfg.optim.ns_steps) / max(step, 1.0)


def choose_optimizer(cfg, model, tokens_per_step: int) -> str:
    """What `optim.name: auto` means for this model (TrainConfig.resolved leaves `auto` only where Muon
    may apply: pretraining a new transformer): `muon` where its update costs at most MUON_MAX_SHARE of a
    step, else `adamw`."""
    if cfg.optim.name != "auto":
        return cfg.optim.name
    return "muon" if muon_share(model, cfg, tokens_per_step) <= MUON_MAX_SHARE else "adamw"


def make_optimizer(model, cfg, device: str, low_precision: bool = False):
    """The optimizer `cfg.optim.name` names, over the model's trainable weights (`low_precision`:
    Muon's Newton-Schulz iterations in bfloat16, as torch's run them, where bf16 matmuls are fast)."""
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    if cfg.optim.name == "muon":
        if any(hasattr(p, "device_mesh") for _, p in named):
            raise ConfigError("optim.name muon does not run under FSDP here (its update needs whole matrices); "
                              "use distributed: ddp, or optim.name: adamw")
        hidden = [p for name, p in named if is_hidden_matrix(name, p)]
        if hidden:
            rest = [(name, p) for name, p in named if not is_hidden_matrix(name, p)]
            muon = BatchedMuon(hidden, lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay,
                               ns_steps=cfg.optim.ns_steps, ns_dtype=torch.bfloat16 if low_precision else torch.float32)
            return MuonWithAdamW(muon, adamw(rest, cfg, device))
    return adamw(named, cfg, device)


def is_hidden_matrix(name: str, p: torch.Tensor) -> bool:
    """A 2-D weight of a decoder layer (attention and MLP projections): what Muon updates. The
    embedding, the output head, position tables, LoRA factors and norms stay on AdamW."""
    return p.dim() == 2 and ".layers." in f".{name}" and "lora_" not in name


def is_classifier_head(name: str) -> bool:
    """A sequence classifier's new `score` head (under peft too: its trained copy in modules_to_save)."""
    return ".score." in f".{name}"


def adamw(named: list, cfg, device: str) -> torch.optim.AdamW:
    """AdamW on (name, parameter) pairs; matrices decay, norms and biases do not. Fused where it can be.
    A classifier's new head has a group of its own whose `lr_scale` (classify.head_lr_scale) the loop
    multiplies the schedule's rate by: it starts from random where the decoder starts trained."""
    scale = cfg.classify.head_lr_scale if cfg.task == "classify" else 1.0
    head = [p for name, p in named if scale != 1.0 and is_classifier_head(name)]
    params = [p for name, p in named if not any(p is h for h in head)]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.optim.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    if head:
        groups.append({"params": head, "weight_decay": cfg.optim.weight_decay, "lr_scale": scale})
    kwargs = dict(lr=cfg.optim.lr, betas=(cfg.optim.beta1, cfg.optim.beta2), eps=cfg.optim.eps)
    fused = device.startswith("cuda") or device == "cpu"
    if fused and not any(hasattr(p, "device_mesh") for p in params):  # DTensors (FSDP) take foreach
        try:
            return torch.optim.AdamW(groups, fused=True, **kwargs)
        except (RuntimeError, TypeError):
            pass
    return torch.optim.AdamW(groups, **kwargs)


NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # the quintic Newton-Schulz iteration of Keller Jordan's Muon


def newton_schulz(x: torch.Tensor, steps: int = 5, eps: float = 1e-7) -> torch.Tensor:
    """An approximately orthogonal matrix with `x`'s singular vectors, for a batch (n, rows, columns)
    with rows <= columns: `steps` quintic iterations after scaling each matrix to norm 1."""
    a, b, c = NS_COEFFICIENTS
    x = x / x.flatten(1).norm(dim=1).clamp(min=eps)[:, None, None]
    for _ in range(steps):
        gram = x @ x.transpose(1, 2)
        update = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)
        x = torch.baddbmm(x, update, x, beta=a)
    return x


class BatchedMuon(torch.optim.Optimizer):
    """Muon (nesterov momentum 0.95, 5 Newton-Schulz steps, AdamW-RMS scaling, decoupled weight
    decay) over 2-D weights, with same-shaped updates orthogonalised together."""

    def __init__(self, params, lr: float, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_steps: int = 5, ns_dtype: torch.dtype = torch.float32):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                                      ns_steps=ns_steps))
        self.ns_dtype = ns_dtype
        for group in self.param_groups:
            if any(p.dim() != 2 for p in group["params"]):
                raise ValueError("Muon updates 2-D weights only")

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            bufs = [self.state[p].setdefault("momentum_buffer", torch.zeros_like(p)) for p in params]
            torch._foreach_lerp_(bufs, grads, 1 - group["momentum"])
            updates = torch._foreach_lerp(grads, bufs, group["momentum"]) if group["nesterov"] else bufs
            by_shape = defaultdict(list)  # a tall matrix joins the wide ones of its transposed shape
            for i, u in enumerate(updates):
                by_shape[tuple(sorted(u.shape))].append(i)
            lr, decay = group["lr"], group["weight_decay"]
            torch._foreach_mul_(params, 1 - lr * decay)
            for members in by_shape.values():
                stacked = torch.stack([updates[i] if updates[i].shape[0] <= updates[i].shape[1] else updates[i].T
                                       for i in members]).to(self.ns_dtype)
                ortho = newton_schulz(stacked, group["ns_steps"])
                for j, i in enumerate(members):
                    p = params[i]
                    o = ortho[j] if p.shape[0] <= p.shape[1] else ortho[j].T
                    p.add_(o.to(p.dtype), alpha=-lr * 0.2 * math.sqrt(max(p.shape)))


class MuonWithAdamW:
    """Muon on the hidden matrices and AdamW on the rest, as one optimizer to the loop: one list of
    param groups (the schedule sets each group's lr), one step, one state dict."""

    def __init__(self, muon: torch.optim.Optimizer, adamw_: torch.optim.Optimizer):
        self.muon, self.adamw = muon, adamw_

    @property
    def param_groups(self) -> list[dict]:
        return self.muon.param_groups + self.adamw.param_groups

    @property
    def state(self):
        return {**self.muon.state, **self.adamw.state}

    def step(self, closure=None):
        self.muon.step()
        self.adamw.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.muon.zero_grad(set_to_none=set_to_none)
        self.adamw.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        """One state dict of the usual shape ({"state", "param_groups"}, parameters numbered across
        both halves, Muon's first), each group tagged with its optimizer: checkpoints save it as
        they save AdamW's."""
        muon, adamw_ = self.muon.state_dict(), self.adamw.state_dict()
        offset = sum(len(g["params"]) for g in muon["param_groups"])
        state = {**muon["state"], **{i + offset: v for i, v in adamw_["state"].items()}}
        groups = ([{**g, "optimizer": "muon"} for g in muon["param_groups"]]
                  + [{**g, "params": [i + offset for i in g["params"]], "optimizer": "adamw"}
                     for g in adamw_["param_groups"]])
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state: dict) -> None:
        groups = state["param_groups"]
        if not groups or any("optimizer" not in g for g in groups):
            raise ConfigError("this checkpoint's optimizer state is AdamW's alone; resume it with optim.name: adamw "
                              "(the name it was trained with)")
        halves = {}
        for name in ("muon", "adamw"):
            mine = [g for g in groups if g["optimizer"] == name]
            ids = [i for g in mine for i in g["params"]]
            offset = min(ids) if ids else 0
            halves[name] = {"state": {int(i) - offset: v for i, v in state["state"].items() if int(i) in ids},
                            "param_groups": [{**{k: v for k, v in g.items() if k != "optimizer"},
                                              "params": [i - offset for i in g["params"]]} for g in mine]}
        self.muon.load_state_dict(halves["muon"])
        self.adamw.load_state_dict(halves["adamw"])

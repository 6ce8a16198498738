"""Will a run fit? The memory a fine-tune needs, counted from the starting model's config.json and the
run's settings before a single weight is loaded, against what the device has free.

What is counted, per the mode: the weights as they are held (float32 for full and LoRA runs, which
load the base in float32; 4-bit NF4 linear layers plus float embeddings for QLoRA), a gradient and
two AdamW moments in float32 for every trainable weight (and its moving average with optim.ema), a frozen copy of the start for full-weight
DPO and GRPO with a KL term (adapter runs switch the adapter off instead), a distillation teacher,
and the activations backward keeps: per token and layer about 12 widths and 5 MLP widths at the
autocast precision (2 widths with gradient checkpointing, plus one layer recomputed), and the
float32 logits of the whole vocabulary three times (logits, their softmax, its gradient); with LoRA
dropout, each adapted layer's dropped float32 input and its mask. On top:
the checkpoint's own bytes while it loads (its file pages are resident, and QLoRA reads the
full-precision weights before it quantizes them) and what the process holds anyway (libraries, data).
It is a check that refuses what clearly cannot fit, not a promise to the megabyte: its coefficients
come from the model's structure; benchmarks/byom.py shows the plan beside measured peaks.
A new model is not counted: the studio sizes those itself, and they are small.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ..checkpoint import adapter_base, is_adapter
from ..errors import TrainingError

GB = 1024 ** 3
LAYER_WIDTHS, LAYER_MLP_WIDTHS = 12, 5       # activations kept per token and layer, in hidden / MLP widths
CHECKPOINTED_WIDTHS = 2                      # with gradient checkpointing: a layer's input and its norm
LOGIT_COPIES = 3                             # float32 logits, their softmax, its gradient
NF4_BYTES = 0.5 + 4 / 64 + 1 / 256           # 4-bit weights + a float32 absmax per 64 (double-quantized: less)
DROPOUT_BYTES = 4 + 1                        # LoRA dropout: the float32 input it drops, and the kept mask
PROCESS_BYTES = 600 * 1024 ** 2               # torch, transformers, peft, datasets and the prepared data


@dataclass
class MemoryPlan:
    """The bytes a run needs, by what holds them, and what the device has free (None: unknown)."""

    device: str
    parameters: int
    trainable: int
    weights: int
    gradients: int
    optimizer: int
    activations: int
    frozen_copies: int                  # a reference or a teacher
    available: int | None
    loading: int = 0                    # the checkpoint's bytes on disk, resident while it loads
    process: int = PROCESS_BYTES        # what the process holds anyway

    @property
    def total(self) -> int:
        return (self.weights + self.gradients + self.optimizer + self.activations + self.frozen_copies
                + self.loading + self.process)

    @property
    def fits(self) -> bool:
        return self.available is None or self.total <= self.available

    def describe(self) -> str:
        parts = [f"weights {self.weights / GB:.1f}", f"gradients and optimizer "
                 f"{(self.gradients + self.optimizer) / GB:.1f}", f"activations {self.activations / GB:.1f}"]
        if self.frozen_copies:
            parts.append(f"frozen reference/teacher {self.frozen_copies / GB:.1f}")
        parts.append(f"loading and the process {(self.loading + self.process) / GB:.1f}")
        where = "" if self.available is None else f" of the {self.available / GB:.1f} GB free on this {self.device}"
        return f"about {self.total / GB:.1f} GB ({', '.join(parts)} GB){where}"


def model_config(path: str | Path) -> dict:
    """config.json of a model folder (an adapter's base for an adapter folder); {} when unreadable."""
    folder = Path(adapter_base(path)) if is_adapter(path) else Path(path)
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def shape_of(config: dict) -> dict | None:
    """The sizes that set memory, from a Llama-family config.json (MiniMind's included); None when absent."""
    try:
        d, layers, vocab = int(config["hidden_size"]), int(config["num_hidden_layers"]), int(config["vocab_size"])
        heads = int(config["num_attention_heads"])
        kv = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or d // heads)
        mlp = int(config["intermediate_size"]) * (int(config.get("num_experts", 1)) if config.get("use_moe") else 1)
    except (KeyError, TypeError, ValueError):
        return None
    linear = {"q_proj": (d, heads * head_dim), "k_proj": (d, kv * head_dim), "v_proj": (d, kv * head_dim),
              "o_proj": (heads * head_dim, d), "gate_proj": (d, mlp), "up_proj": (d, mlp), "down_proj": (mlp, d)}
    biased = config.get("attention_bias") or config.get("model_type") == "qwen2"   # q/k/v biases (Qwen2's always)
    per_layer = sum(i * o for i, o in linear.values()) + 2 * d + (heads + 2 * kv) * head_dim * bool(biased)
    per_layer += d * bool(config.get("attention_out_bias")) + 2 * head_dim * bool(config.get("qk_norm"))
    embedding = vocab * d * (1 if config.get("tie_word_embeddings", True) else 2)
    return {"d": d, "layers": layers, "vocab": vocab, "mlp": int(config["intermediate_size"]), "linear": linear,
            "layer_linear": per_layer - 2 * d, "parameters": embedding + layers * per_layer + d,
            "embedding": embedding}


def plan(cfg, device: str) -> MemoryPlan | None:
    """The memory plan of a resolved TrainConfig starting from a model folder (None for a new model, or a
    config that does not say its shape)."""
    if not cfg.model.init_from:
        return None
    shape = shape_of(model_config(cfg.model.init_from))
    if shape is None:
        return None
    params, layers = shape["parameters"], shape["layers"]
    adapter = cfg.adapter_kind
    half = cfg.precision in ("bf16", "fp16")
    if adapter:
        targets = set(cfg.lora.target_modules)
        trainable = layers * sum(cfg.lora.rank * (i + o) for name, (i, o) in shape["linear"].items()
                                 if name in targets)
    else:
        trainable = params
    if adapter == "qlora":
        linear = layers * shape["layer_linear"]
        weights = int(linear * NF4_BYTES + (params - linear) * (2 if half else 4))
    else:
        weights = params * 4
    rows = (cfg.batch_size or 1) * (cfg.grpo.group_size if cfg.mode == "grpo" else 1) * (2 if cfg.mode == "dpo" else 1)
    tokens = rows * (cfg.data.seq_len or 256)
    width = 2 if half else 4
    d, mlp = shape["d"], shape["mlp"]
    per_layer = (CHECKPOINTED_WIDTHS * d if cfg.grad_checkpointing else LAYER_WIDTHS * d + LAYER_MLP_WIDTHS * mlp)
    recomputed = (LAYER_WIDTHS * d + LAYER_MLP_WIDTHS * mlp) if cfg.grad_checkpointing else 0
    activations = tokens * width * (per_layer * layers + recomputed) + tokens * shape["vocab"] * 4 * LOGIT_COPIES
    if adapter and cfg.lora.dropout > 0:  # each adapted layer keeps its own dropped input and the mask
        dropped = sum(i for name, (i, _) in shape["linear"].items() if name in targets)
        activations += tokens * dropped * DROPOUT_BYTES * (1 if cfg.grad_checkpointing else layers)
    frozen = 0
    if not adapter and (cfg.mode == "dpo" or (cfg.mode == "grpo" and cfg.grpo.beta > 0)):
        frozen = params * 4
    if cfg.mode == "distill" and cfg.distill.teacher:
        teacher = shape_of(model_config(cfg.distill.teacher))
        frozen += teacher["parameters"] * 4 if teacher else 0
    moments = trainable * (12 if cfg.optim.ema else 8)  # two AdamW moments (and the weight average: ema.py)
    return MemoryPlan(device, params, trainable, weights, trainable * 4, moments, activations, frozen,
                      available_bytes(device), checkpoint_bytes(cfg.model.init_from))


def checkpoint_bytes(path: str | Path) -> int:
    """Bytes of a model folder's safetensors (an adapter's base's)."""
    folder = Path(adapter_base(path)) if is_adapter(path) else Path(path)
    return sum(f.stat().st_size for f in folder.glob("*.safetensors"))


def available_bytes(device: str) -> int | None:
    """Memory free for a run: the GPU's free memory, or the machine's available RAM (cgroup-limited)."""
    kind = device.split(":")[0]
    if kind == "cuda":
        return int(torch.cuda.mem_get_info()[0]) if torch.cuda.is_available() else None
    if kind != "cpu":
        return None
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except OSError:
        return None
    limit = _cgroup_room()
    return min(available, limit) if available is not None and limit is not None else available or limit


def _cgroup_room() -> int | None:
    """What a cgroup v2 memory limit leaves this process tree (a container's limit), None without one."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
    except (OSError, ValueError):
        return None
    return None if limit == "max" else max(0, int(limit) - used)


def check_fits(cfg, device: str, log=lambda _message: None) -> MemoryPlan | None:
    """The run's memory plan; gradient checkpointing is switched on where it pays (the run fits with it and
    not without); TrainingError, with the numbers and what to change, when it fits neither way.
    MINIMIND_SKIP_MEMORY_CHECK=1 starts it anyway."""
    found = plan(cfg, device)
    if found is None or found.fits or os.environ.get("MINIMIND_SKIP_MEMORY_CHECK") == "1":
        return found
    if not cfg.grad_checkpointing:
        cfg.grad_checkpointing = True
        checkpointed = plan(cfg, device)
        if checkpointed.fits:
            log(f"gradient checkpointing on: without it this run would need {found.describe()}")
            return checkpointed
        cfg.grad_checkpointing = False
    hints = []
    if not cfg.adapter_kind:
        hints.append("LoRA or QLoRA (only the adapters train)")
    elif cfg.adapter_kind == "lora":
        hints.append("QLoRA (a 4-bit base)")
    hints.append("a smaller batch or sequence length")
    raise TrainingError(f"this run needs {found.describe()}, even with gradient checkpointing: it would not fit. "
                        f"Try {' or '.join(hints)} (MINIMIND_SKIP_MEMORY_CHECK=1 starts it anyway)")

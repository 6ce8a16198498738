"""TrainConfig: everything a run needs, in one dataclass with a section per concern.

It round-trips through YAML/JSON (the run folder keeps `config.yaml`), fills
"auto" fields with defaults that suit the mode and the device, and refuses bad
values with a message that says the allowed range.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..config import CLASSIFIER_POOLINGS, PRESETS
from ..lstm import LSTM_PRESETS
from ..data.config import DataConfig
from ..errors import ConfigError
from .optimizers import OPTIMIZERS
from .reporting import check_report_to
from .rewards import build_rewards
from .sizing import pretrain_lr

MODES = ("pretrain", "sft", "lora", "qlora", "dpo", "distill", "grpo")
TASKS = ("generate", "classify")  # what the model does: write text (a causal LM) or label it (a classifier)
CLASSIFY_MODES = ("sft", "lora", "qlora")  # task classify: every weight, or LoRA / QLoRA (+ the head) trains
REWARD_AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")  # grpo.reward_aggregation
CLASS_WEIGHTS = ("", "balanced")  # classify.class_weights by name: none, or every class alike (else {label: weight})
ADAPTER_MODES = ("dpo", "distill", "grpo")  # modes that train every weight or, with `adapter`, LoRA / QLoRA
MODE_KINDS = {"dpo": "preference", "grpo": "prompts"}  # modes that learn from one corpus kind only, and that kind
ADAPTERS = ("", "lora", "qlora")
DPO_LOSSES = ("sigmoid",)
PRECISIONS = ("auto", "bf16", "fp16", "fp32")
DEVICES = ("auto", "cpu", "cuda", "mps")
DISTRIBUTED = ("ddp", "fsdp")
MAX_PROCESSES = 1024
COMPILE = ("auto", "on", "off")
EXTENDABLE = ("pretrain", "sft", "lora", "qlora")  # modes whose vocabulary may grow (model.extend_vocab)
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ARCHITECTURES = ("transformer", "lstm")  # a new model's family: MiniMindConfig or MiniMindLSTMConfig (minimind/lstm.py)


@dataclass
class ModelSection:
    architecture: str = "transformer"    # a new model's family: transformer (Llama-shaped) or lstm (minimind/lstm.py);
                                         # a fine-tune keeps its starting model's
    preset: str = "auto"                 # size of a new model: auto (from the budget, training/sizing.py) or a preset
                                         # of its architecture (config.PRESETS, or lstm.LSTM_PRESETS)
    init_from: str = ""                  # model folder to start from (required for sft/lora/qlora)
    overrides: dict = field(default_factory=dict)  # config fields for a new model (MiniMindConfig, or
                                         # MiniMindLSTMConfig for an lstm: e.g. use_attention: true)
    zero_init: bool = False              # a new transformer's attention output and MLP down projections start at
                                         # zero, so each block starts as the identity (modded-nanogpt's speedrun)
    tokenizer: str = ""                  # tokenizer folder; default: init_from's, else train one
    vocab_size: int = 6400               # vocabulary of a tokenizer trained for a new model
    min_char_count: int = 0              # > 0: that tokenizer keeps each character seen this often whole
    extend_vocab: int = 0                # fine-tuning: up to this many characters of the corpus that the starting
                                         # tokenizer spells in byte pieces become tokens of their own (0 = off;
                                         # minimind/vocabulary.py); with LoRA their rows train beside the adapter
    extend_min_count: int = 3            # ... each seen at least this often in the corpus


def run_data() -> "DataConfig":
    """A training run's data settings: the data package's DataConfig with the trainer's defaults
    (the row length follows the device, 2 % of the documents are held out with seed 1234)."""
    return DataConfig(seq_len=None, val_fraction=0.02, seed=1234)


@dataclass
class LoraSection:
    rank: int = 16                       # LoRA rank r
    alpha: int = 32                      # scaling numerator (scale = alpha / rank)
    dropout: float = 0.0                 # dropout on the LoRA input (0: on a CPU, 0.05 cost a LoRA step 1.5x its
                                         # time, for no gain within minutes: benchmarks/NOTES.md, classification)
    target_modules: list = field(default_factory=lambda: list(LORA_TARGETS))  # linear layers to adapt


@dataclass
class DpoSection:
    beta: float = 0.5                    # strength of the pull towards the reference policy (0.1 drifted: NOTES.md)
    label_smoothing: float = 0.0         # share of pairs assumed mislabelled (conservative DPO), 0..0.5
    sft_weight: float = 1.0              # + this x next-token loss on the chosen answers (RPO; 0 = plain DPO).
                                         # On: plain DPO with LoRA wrecked answers' form (benchmarks/NOTES.md)
    loss: str = "sigmoid"                # loss variant, recorded in the run config (sigmoid = the DPO paper's)


@dataclass
class DistillSection:
    teacher: str = ""                    # teacher model folder (a checkpoint or run); same tokenizer as the student
    temperature: float = 2.0             # softens both distributions; the KL term is scaled by T^2
    kl_weight: float = 0.5               # weight of KL(teacher || student) on the trained tokens
    ce_weight: float = 0.5               # weight of the ordinary next-token loss on the data
    cache_mb: float = 512.0              # keep the teacher's logits of rows seen, up to this many MiB (0 = off):
                                         # a small corpus pays for the teacher once, not every epoch


@dataclass
class GrpoSection:
    rewards: list = field(default_factory=list)  # [{name: form, weight: 1}, {name: contains, weight: .5, text: 月}]:
                                         # built-in rewards (training/rewards/), never user code
    group_size: int = 8                  # answers sampled per prompt; advantages are relative within the group
    max_new_tokens: int = 96             # longest answer a rollout may write
    temperature: float = 1.0             # rollout sampling (1.0 with no top-k/top-p samples the policy itself)
    top_k: int = 0
    top_p: float = 1.0
    beta: float = 0.1                    # weight of the KL penalty to the starting model (0 = none, no reference);
                                         # 0.04 let a 15-min round drift +5.8 % in held-out BPC, 0.1 +2.6 %
    clip: float = 0.2                    # policy-ratio clipping epsilon
    updates: int = 2                     # optimisation passes over each batch of rollouts
    scale_rewards: bool = True           # divide advantages by the group's reward std (false: Dr. GRPO)
    reward_aggregation: str = "sum_then_normalize"  # or normalize_then_sum: each reward relative to its group first
                                         # (GDPO); on the Tang rewards no better in 250 steps (benchmarks/NOTES.md)
    eval_samples: int = 4                # rollouts written to samples.jsonl at each evaluation


@dataclass
class ClassifySection:
    class_weights: Any = ""              # "" (none), "balanced" (n / (classes x count), from the training split)
                                         # or {label: weight} for every class; weights the cross-entropy
    head_lr_scale: float = 10.0          # the new head learns at optim.lr times this: it starts from random where the
                                         # decoder starts trained (10: +1.4 to +1.6 macro-F1 points, benchmarks/NOTES.md)
    label_smoothing: float = 0.0         # the training targets give this share of their mass evenly to every
                                         # class (0.1 on the 3-poet check: no better, benchmarks/NOTES.md)
    pooling: str = "last"                # what the head reads: the last real token's hidden state, or the mean
                                         # of every real token's (minimind/classifier.py, CLASSIFIER_POOLINGS)


@dataclass
class OptimSection:
    name: str = "auto"                   # adamw | muon (Muon on the decoder layers' matrices, AdamW on the rest:
                                         # training/optimizers.py) | auto: muon to pretrain a new transformer
                                         # whose Muon update is cheap beside a step, adamw otherwise
    lr: float | None = None              # peak learning rate (auto: by mode)
    min_lr_ratio: float = 0.1            # cosine decays to lr * min_lr_ratio
    warmup_steps: int | None = None      # linear warmup (auto: 5% of steps, at most 200)
    weight_decay: float = 0.1            # AdamW decay on matrices (not on norms/embeddings)
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0               # max global grad norm (0 = off)
    ns_steps: int = 5                    # Muon: Newton-Schulz iterations per update (fewer: cheaper, less orthogonal)
    ema: float | None = None             # evaluate and save a moving average of the weights with this decay (0 = the
                                         # last step's weights; auto: EMA_DECAY to pretrain a new model or train a
                                         # classifier, where it was measured to pay, 0 otherwise; training/ema.py)
    ema_from: int = 1000                 # ... from this step on (a shorter run's average lagged behind its last step)


@dataclass
class TrainConfig:
    mode: str = "pretrain"               # pretrain | sft | lora | qlora | dpo | distill | grpo
    task: str = "generate"               # generate (a language model) | classify (a sequence classifier on a labelled
                                         # corpus, minimind/classifier.py: mode sft trains every weight, lora/qlora
                                         # adapters; the classifier's `score` head always trains)
    adapter: str = ""                    # dpo / distill / grpo: "" (full weights), lora or qlora (lora/qlora modes imply it)
    model: ModelSection = field(default_factory=ModelSection)
    data: DataConfig = field(default_factory=run_data)
    lora: LoraSection = field(default_factory=LoraSection)
    optim: OptimSection = field(default_factory=OptimSection)
    dpo: DpoSection = field(default_factory=DpoSection)
    distill: DistillSection = field(default_factory=DistillSection)
    grpo: GrpoSection = field(default_factory=GrpoSection)
    classify: ClassifySection = field(default_factory=ClassifySection)
    max_steps: int = 0                   # optimizer steps (0: from epochs or time_budget_s)
    epochs: float = 1.0                  # passes over the training split when max_steps = 0
    time_budget_s: float = 0.0           # > 0: size max_steps to this wall-clock budget
    batch_size: int | None = None        # rows per micro-batch per process (auto by mode/device)
    grad_accum: int = 1                  # micro-batches per optimizer step
    precision: str = "auto"              # auto | bf16 | fp16 | fp32
    device: str = "auto"                 # auto | cpu | cuda | mps
    threads: int = 0                     # CPU threads of this run (0: PyTorch's default, fewer while others keep cores busy); pinned for reproducible step times
    grad_checkpointing: bool = False     # recompute activations in backward (less memory)
    compile: str = "auto"                # torch.compile the decoder layers: on | off | auto (runs of >= 300 steps)
    eval_every: int = 0                  # steps between evaluations (0: up to 10 per run, ~5% of its time)
    eval_batches: int = 20               # validation batches per evaluation (0 = all)
    log_every: int = 0                   # steps between metrics.jsonl lines (0: ~50 lines a run, at most every 10)
    save_every: int = 0                  # steps between checkpoints (0: ~5 per run)
    keep_checkpoints: int = 2            # newest checkpoints kept on disk
    max_bad_steps: int = 5               # consecutive non-finite losses before giving up
    seed: int = 42                       # model init, data order, dropout
    distributed: str = "ddp"             # under torchrun: ddp | fsdp
    processes: int = 1                   # > 1: the run is that many data-parallel processes; the web page starts
                                         # them with torchrun (and a resume with the same count). The CLI does not
                                         # launch: start it as `torchrun --nproc_per_node=N -m minimind train`; a
                                         # run started with another count is refused. 1: whatever torchrun gives
    report_to: list = field(default_factory=list)  # also write metrics.jsonl's figures to: tensorboard
                                         # (<run>/tensorboard/), trackio (<run>/trackio/, or $TRACKIO_DIR); [] = off.
                                         # A name or a comma list is accepted: report_to=tensorboard (reporting.py)
    run_dir: str = ""                    # folder of this run (default runs/<timestamp>)

    # ---- construction -------------------------------------------------

    @classmethod
    def from_dict(cls, raw: dict) -> "TrainConfig":
        return _build(cls, raw, "")

    @classmethod
    def load(cls, path: str | Path) -> "TrainConfig":
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
            raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError) as err:
            raise ConfigError(f"{path}: cannot read the config ({err})") from err
        return cls.from_dict(raw or {})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    def save(self, path: str | Path) -> None:
        path = Path(path)
        text = json.dumps(self.to_dict(), indent=2) if path.suffix == ".json" else self.to_yaml()
        path.write_text(text, encoding="utf-8")

    def with_overrides(self, assignments: list[str]) -> "TrainConfig":
        """Apply `key=value` strings (dotted keys, YAML values): `optim.lr=3e-4`, `data.files=[a,b]`."""
        raw = self.to_dict()
        for item in assignments:
            if "=" not in item:
                raise ConfigError(f"--set expects key=value, got {item!r}")
            key, value = item.split("=", 1)
            node = raw
            parts = key.strip().split(".")
            for part in parts[:-1]:
                if not isinstance(node.get(part), dict):
                    raise ConfigError(f"unknown config section {part!r} in {key!r}")
                node = node[part]
            if parts[-1] not in node and parts[:-1] != ["model", "overrides"]:  # overrides: model fields by name
                raise ConfigError(f"unknown config key {key!r}")
            node[parts[-1]] = yaml.safe_load(value)
        return TrainConfig.from_dict(raw)

    # ---- what the mode means --------------------------------------------

    @property
    def objective(self) -> str:
        """The loss the loop optimises: language_model (pretrain, sft, lora, qlora), dpo, distill, grpo, or
        classify (task classify: a sequence classifier on a labelled corpus, objectives/classify.py)."""
        if self.task == "classify":
            return "classify"
        return self.mode if self.mode in ADAPTER_MODES else "language_model"

    @property
    def adapter_kind(self) -> str:
        """"lora", "qlora" or "" (every weight trains)."""
        return self.mode if self.mode in ("lora", "qlora") else self.adapter

    @property
    def new_model(self) -> bool:
        """Whether the run starts from fresh weights (pretrain, or a distilled student of a preset)."""
        return self.mode in ("pretrain", "distill") and not self.model.init_from

    # ---- defaults and validation ---------------------------------------

    def resolved(self, device: str, bf16_ok: bool = True) -> "TrainConfig":
        """A copy with every auto field filled for this mode and device."""
        c = TrainConfig.from_dict(self.to_dict())
        on_gpu = device.startswith("cuda")
        new_model = c.new_model
        if c.optim.lr is None and new_model and c.model.preset != "auto":
            c.optim.lr = pretrain_lr(c.model.preset)
        elif c.optim.lr is None and c.task == "classify":
            c.optim.lr = _classify_lr(c.adapter_kind)
        elif c.optim.lr is None and not new_model:
            c.optim.lr = {"pretrain": 2e-3, "sft": 1e-4, "lora": 1e-3, "qlora": 1e-3,
                          "distill": 1e-4}.get(c.mode) or _policy_lr(c.mode, c.adapter_kind)
        # (a new model of size "auto" gets its learning rate once its size is chosen)
        if c.batch_size is None:
            # Pretraining on a CPU: 4 x 256 tokens per step. A CPU budget buys few steps, and a
            # small model gains more from 4x the updates than from 4x the rows per update
            # (benchmarks/quality.py: 2 min of nano on Tang, held-out BPC 8.40 at 4 rows, 8.62
            # at 8, 8.70 at 16, at the same tokens/s).
            c.batch_size = (32 if on_gpu else 4) if new_model else (16 if on_gpu else 8)
            if c.mode == "grpo":  # prompts per micro-batch: each becomes group_size rows
                c.batch_size = max(1, (64 if on_gpu else 32) // c.grpo.group_size)
        if c.data.seq_len is None:
            c.data.seq_len = 512 if on_gpu else 256
        if c.precision == "auto":
            c.precision = "bf16" if bf16_ok else ("fp16" if on_gpu else "fp32")
        if c.optim.ema is None:
            # measured (benchmarks/NOTES.md, 2026-12-07 · quality, classify: a moving average of the weights):
            # held-out BPC of a new model 0.3-1.4 % lower after 10 minutes (4,000-7,600 steps), a full
            # classifier's macro-F1 0.3-1.1 points higher after 4 (1,800 steps); other fine-tunes not measured.
            # FSDP shards the weights, which the average would have to follow: not done.
            c.optim.ema = EMA_DECAY if (new_model and c.mode == "pretrain" or c.task == "classify") and (
                c.distributed != "fsdp") else 0.0
        if c.optim.name == "auto":
            # Muon may pretrain a new transformer better in the same time: the set-up decides once the
            # model is built, from what its update costs beside a step (optimizers.choose_optimizer).
            # Fine-tunes keep AdamW (not measured); FSDP shards the matrices Muon needs whole; an LSTM
            # has no decoder layers for it.
            muon_may = (new_model and c.mode == "pretrain" and c.model.architecture != "lstm"
                        and c.distributed != "fsdp")
            c.optim.name = "auto" if muon_may else "adamw"
        c.validate()
        return c

    def validate(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ConfigError(msg)

        need(self.mode in MODES, f"mode must be one of {', '.join(MODES)} (got {self.mode!r})")
        need(self.model.min_char_count >= 0, "model.min_char_count must be >= 0 (0 = off)")
        need(0 <= self.model.extend_vocab <= 20_000, "model.extend_vocab must be 0..20000 (0 = off)")
        need(self.model.extend_min_count >= 1, "model.extend_min_count must be >= 1")
        need(not self.model.extend_vocab or (bool(self.model.init_from) and self.mode in EXTENDABLE),
             f"model.extend_vocab adds the corpus's characters to a starting model's vocabulary: it is for "
             f"modes {', '.join(EXTENDABLE)} with model.init_from set (mode {self.mode} "
             + ("has no starting model)" if not self.model.init_from else
                "compares the model with a reference or teacher that shares its vocabulary)"))
        need(not self.model.extend_vocab or not self.model.tokenizer,
             "model.extend_vocab extends the starting model's own tokenizer: leave model.tokenizer empty")
        need(self.model.architecture in ARCHITECTURES,
             f"model.architecture must be one of {', '.join(ARCHITECTURES)} (got {self.model.architecture!r})")
        presets = LSTM_PRESETS if self.model.architecture == "lstm" else PRESETS
        need(self.model.preset == "auto" or self.model.preset in presets,
             f"model.preset must be auto or one of {', '.join(presets)}"
             + (" (the LSTM sizes)" if self.model.architecture == "lstm" else "")
             + f" (got {self.model.preset!r})")
        need(not (self.grad_checkpointing and self.model.architecture == "lstm" and self.new_model),
             "grad_checkpointing recomputes transformer layers; an LSTM model has none: turn it off "
             "(lower batch_size or data.seq_len to save memory instead)")
        need(not self.model.zero_init or (self.new_model and self.model.architecture != "lstm"),
             "model.zero_init starts a new transformer's output projections at zero: it is for a new model "
             "(no model.init_from) of architecture transformer; turn it off")
        need(self.precision in PRECISIONS, f"precision must be one of {', '.join(PRECISIONS)}")
        need(self.device in DEVICES, f"device must be one of {', '.join(DEVICES)}")
        need(self.distributed in DISTRIBUTED, f"distributed must be one of {', '.join(DISTRIBUTED)}")
        need(self.compile in COMPILE, f"compile must be one of {', '.join(COMPILE)}")
        need(self.mode in ("pretrain", "distill") or bool(self.model.init_from),
             f"mode {self.mode} fine-tunes an existing model: set model.init_from to a model folder")
        need(self.adapter in ADAPTERS, f"adapter must be empty, lora or qlora (got {self.adapter!r})")
        need(not self.adapter or self.mode in ADAPTER_MODES,
             f"adapter is for modes dpo, distill and grpo; mode {self.mode} "
             + ("already names its adapter" if self.mode in ("lora", "qlora") else "trains every weight")
             + " (use mode lora or qlora for supervised fine-tuning with an adapter)")
        need(not self.adapter or bool(self.model.init_from),
             "an adapter fine-tunes an existing model: set model.init_from to a model folder")
        need(self.dpo.beta > 0, f"dpo.beta must be positive (got {self.dpo.beta!r})")
        need(0.0 <= self.dpo.label_smoothing < 0.5, "dpo.label_smoothing must be in [0, 0.5)")
        need(self.dpo.sft_weight >= 0, "dpo.sft_weight must be >= 0 (0 = plain DPO)")
        need(self.dpo.loss in DPO_LOSSES, f"dpo.loss must be one of {', '.join(DPO_LOSSES)}")
        need(self.mode != "distill" or bool(self.distill.teacher),
             "mode distill learns from a teacher: set distill.teacher to a model folder")
        need(self.distill.temperature > 0, "distill.temperature must be positive")
        need(self.distill.cache_mb >= 0, "distill.cache_mb must be >= 0 (0 = no cache)")
        need(self.distill.kl_weight >= 0 and self.distill.ce_weight >= 0
             and self.distill.kl_weight + self.distill.ce_weight > 0,
             "distill.kl_weight and distill.ce_weight must be >= 0, and not both 0")
        need(self.task in TASKS, f"task must be one of {', '.join(TASKS)} (got {self.task!r})")
        classify = self.task == "classify"
        need(not classify or self.mode in CLASSIFY_MODES,
             f"task classify fine-tunes a classifier with mode sft (every weight), lora or qlora (adapters; the head "
             f"trains whole); mode {self.mode} trains a language model")
        check_mode_kind(self.mode, self.data.kind, self.task, "the corpus (data.kind)")
        need(not classify or not self.model.extend_vocab,
             "model.extend_vocab is for language models: a classifier keeps its starting model's vocabulary")
        weights = self.classify.class_weights
        need(weights in CLASS_WEIGHTS or isinstance(weights, dict) and bool(weights) and all(
             isinstance(w, (int, float)) and not isinstance(w, bool) and w > 0 for w in weights.values()),
             "classify.class_weights must be empty (none), balanced, or {label: weight} with positive weights "
             f"(got {weights!r})")
        need(isinstance(self.classify.head_lr_scale, (int, float)) and not isinstance(self.classify.head_lr_scale, bool)
             and 0 < self.classify.head_lr_scale <= 1000,
             f"classify.head_lr_scale must be a number in (0, 1000] (got {self.classify.head_lr_scale!r})")
        smoothing = self.classify.label_smoothing
        need(0 <= smoothing < 1, f"classify.label_smoothing must be a number in [0, 1) (got {smoothing!r})")
        need(self.classify.pooling in CLASSIFIER_POOLINGS,
             f"classify.pooling must be one of {', '.join(CLASSIFIER_POOLINGS)} (got {self.classify.pooling!r})")
        g = self.grpo
        need(2 <= g.group_size <= 256, "grpo.group_size must be 2..256 (advantages compare answers to one prompt)")
        need(1 <= g.max_new_tokens <= 4096, "grpo.max_new_tokens must be 1..4096")
        need(0 < g.temperature <= 10, "grpo.temperature must be in (0, 10] (rollouts are sampled)")
        need(g.top_k >= 0, "grpo.top_k must be >= 0 (0 = off)")
        need(0 < g.top_p <= 1, "grpo.top_p must be in (0, 1]")
        need(g.beta >= 0, "grpo.beta must be >= 0 (0 = no KL penalty)")
        need(0 < g.clip < 1, "grpo.clip must be in (0, 1)")
        need(1 <= g.updates <= 16, "grpo.updates must be 1..16")
        need(g.eval_samples >= 0, "grpo.eval_samples must be >= 0")
        need(g.reward_aggregation in REWARD_AGGREGATIONS,
             f"grpo.reward_aggregation must be one of {', '.join(REWARD_AGGREGATIONS)} (how several rewards make "
             "one advantage: their weighted sum relative to the group, or each reward relative to the group first)")
        need(isinstance(self.processes, int) and 1 <= self.processes <= MAX_PROCESSES,
             f"processes must be a whole number 1..{MAX_PROCESSES} (got {self.processes!r})")
        check_report_to(self.report_to)  # names, and that their packages are installed, before any work
        need(self.mode != "grpo" or self.distributed == "ddp",
             "mode grpo runs under torchrun with distributed: ddp (each process samples with a whole copy of "
             "the weights; fsdp shards them)")
        if self.mode == "grpo":
            build_rewards(g.rewards)  # names, weights and parameters checked before any work
        need(bool(self.data.files), "data.files is empty: name at least one corpus file")
        need(self.max_steps >= 0, "max_steps must be >= 0")
        need(0 <= self.threads <= 1024, "threads must be 0 (PyTorch's default) .. 1024")
        need(self.max_steps > 0 or self.epochs > 0 or self.time_budget_s > 0,
             "set max_steps, epochs or time_budget_s")
        need(self.batch_size is None or 1 <= self.batch_size <= 4096, "batch_size must be 1..4096")
        need(1 <= self.grad_accum <= 1024, "grad_accum must be 1..1024")
        need(self.data.seq_len is None or 8 <= self.data.seq_len <= 65536, "data.seq_len must be 8..65536")
        need(0.0 < self.data.val_fraction < 0.5, "data.val_fraction must be between 0 and 0.5")
        need(self.optim.lr is None or 0 < self.optim.lr <= 1.0, "optim.lr must be in (0, 1]")
        need(1 <= self.optim.ns_steps <= 10, "optim.ns_steps must be 1..10 (Muon's Newton-Schulz iterations)")
        need(self.optim.name in ("auto", *OPTIMIZERS), f"optim.name must be one of auto, {', '.join(OPTIMIZERS)}, "
                                                     f"not {str(self.optim.name)[:40]!r}")
        need(0.0 <= self.optim.min_lr_ratio <= 1.0, "optim.min_lr_ratio must be 0..1")
        need(self.optim.warmup_steps is None or self.optim.warmup_steps >= 0, "optim.warmup_steps must be >= 0")
        need(self.optim.grad_clip >= 0, "optim.grad_clip must be >= 0 (0 turns clipping off)")
        need(0 <= self.optim.weight_decay < 1, "optim.weight_decay must be 0..1")
        ema = self.optim.ema
        need(ema is None or isinstance(ema, (int, float)) and not isinstance(ema, bool) and 0 <= ema < 1,
             f"optim.ema must be a decay in [0, 1): 0 saves the last step's weights, 0.999 their average over about "
             f"the last 1,000 steps (got {ema!r})")
        need(isinstance(self.optim.ema_from, int) and self.optim.ema_from >= 0,
             f"optim.ema_from must be a step number >= 0 (got {self.optim.ema_from!r})")
        need(not ema or self.distributed != "fsdp", "optim.ema does not work with distributed: fsdp (the average "
             "would have to follow the shards); set optim.ema to 0, or use ddp")
        need(1 <= self.lora.rank <= 256, "lora.rank must be 1..256")
        need(self.lora.alpha > 0, "lora.alpha must be positive")
        need(0.0 <= self.lora.dropout < 1.0, "lora.dropout must be in [0, 1)")
        unknown = set(self.lora.target_modules) - set(LORA_TARGETS)
        need(bool(self.lora.target_modules) and not unknown,
             f"lora.target_modules must be a non-empty subset of {', '.join(LORA_TARGETS)}"
             + (f" (unknown: {', '.join(sorted(unknown))})" if unknown else ""))
        need(self.keep_checkpoints >= 1, "keep_checkpoints must be >= 1")
        need(self.max_bad_steps >= 1, "max_bad_steps must be >= 1")
        need(self.log_every >= 0, "log_every must be >= 0 (0 = auto)")


class ModeKindError(ConfigError):
    """A corpus of one kind given to a mode (or task) that learns from another. `needed` is the kind
    the mode learns from, or None when it is the corpus that asks for another mode: a face can then
    say where to get a corpus of that kind."""

    def __init__(self, message: str, needed: str | None = None):
        super().__init__(message)
        self.needed = needed

    def __reduce__(self):  # pickled whole (a bounded child process hands it to the page)
        return type(self), (str(self), self.needed)


def check_mode_kind(mode: str, kind: str | None, task: str = "generate", corpus: str = "this corpus") -> None:
    """Refuse a corpus of `kind` for `mode` and `task` unless each is the other's: dpo learns from
    preference pairs only and grpo from prompts only, a classifier (task classify) from labelled
    text only, and such a corpus trains nothing else. `kind` None or "auto" is not known yet (the
    data decides once read: the loop asks again). `corpus` names the corpus in the message. The
    page asks before it writes a config, the config when it is validated, the loop once the data
    is read."""
    if kind in (None, "", "auto"):
        return
    needed = MODE_KINDS.get(mode)
    if needed == "preference" and kind != needed:
        raise ModeKindError(f"mode dpo learns from preference pairs (prompt, chosen, rejected); {corpus} is {kind}",
                            needed)
    if needed == "prompts" and kind != needed:
        raise ModeKindError(f"mode grpo learns from prompts (the model writes the answers); {corpus} is {kind}", needed)
    if kind == "preference" and mode != "dpo":
        raise ModeKindError(f"{corpus} holds preference pairs: train on it with mode dpo (not {mode})")
    if kind == "prompts" and mode != "grpo":
        raise ModeKindError(f"{corpus} holds prompts without answers: train on it with mode grpo (not {mode})")
    if task == "classify" and kind != "labelled":
        raise ModeKindError(f"a classifier learns from labelled text (a text field and a label field: label, class, "
                            f"category, ... or data.label_field); {corpus} is {kind}", "labelled")
    if kind == "labelled" and task != "classify":
        raise ModeKindError(f"{corpus} holds labelled text: train a classifier on it (task classify, with mode sft, "
                            f"lora or qlora), not mode {mode} alone; to train on its text only, read it as plain "
                            "text (data.kind text)")


EMA_DECAY = 0.999  # optim.ema's auto value where it applies: an average over about the last 1,000 steps


def _classify_lr(adapter: str) -> float:
    """Peak learning rate of a classifier: its head is new, so higher than a supervised fine-tune's
    (full: 5e-4 and 1e-3 both beat 2e-4 by 2.3 points of held-out macro-F1 in 4 minutes; LoRA:
    3e-3 diverged where 1e-3 did not; benchmarks/NOTES.md, classification)."""
    return 1e-3 if adapter else 5e-4


def _policy_lr(mode: str, adapter: str) -> float:
    """Peak learning rate of DPO and GRPO: small steps away from a model that already answers well."""
    if mode == "grpo":
        return 5e-4 if adapter else 1e-4  # full: measured (benchmarks/NOTES.md, GRPO)
    return 1e-4 if adapter else 1e-5


def _build(cls, raw: Any, where: str, default=None):
    """Build a (nested) dataclass from a dict, naming any unknown key; keys left out keep the values
    of `default` (a section's own defaults, e.g. the trainer's data settings)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where or 'config'} must be a mapping, got {type(raw).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(raw) - set(fields)
    if unknown:
        raise ConfigError(f"unknown config key(s) {', '.join(sorted(where + k for k in unknown))}")
    kwargs = {}
    for name, value in raw.items():
        section = fields[name].default_factory() if fields[name].default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(section):
            kwargs[name] = _build(type(section), value or {}, f"{where}{name}.", section)
        elif name == "compile" and isinstance(value, bool):
            kwargs[name] = "on" if value else "off"  # YAML `compile: true` means on
        elif name == "report_to" and (value is None or isinstance(value, str)):
            kwargs[name] = _names(value)  # `report_to: tensorboard`, `--set report_to=tensorboard,trackio`
        else:
            kwargs[name] = _coerce(value, fields[name].type, where + name)
    return dataclasses.replace(default, **kwargs) if default is not None else cls(**kwargs)


def _names(value: str | None) -> list[str]:
    """A list written as one string: "tensorboard,trackio" -> [tensorboard, trackio]; "none" or "" -> []."""
    names = [part.strip() for part in (value or "").split(",") if part.strip()]
    return [] if names in (["none"], ["off"]) else names


def _coerce(value: Any, annotation: str, name: str) -> Any:
    """Numbers written as strings (YAML reads `3e-4` as text) become numbers; wrong types are named."""
    kinds = {part.strip() for part in str(annotation).split("|")}
    if value is None or not kinds & {"int", "float", "bool"}:
        return value
    if "bool" in kinds:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number, got {value!r}") from None
    if "float" in kinds:
        return number
    if number != int(number):
        raise ConfigError(f"{name} must be a whole number, got {value!r}")
    return int(number)

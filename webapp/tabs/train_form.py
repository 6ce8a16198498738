"""The Train tab's form as one value: its controls' values by name, and the run they describe.

A dataclass rather than a handler with thirty positional parameters: the page builds it from a
dict keyed by field name (train.py), tests build it by keyword, and `to_config` checks every
value as it arrived from the browser or the API before the TrainConfig validates the whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from minimind.checkpoint import is_classifier
from minimind.config import PRESETS
from minimind.training import TrainConfig
from minimind.training.config import (
    ADAPTER_MODES,
    CLASS_WEIGHTS,
    CLASSIFY_MODES,
    DISTRIBUTED,
    EXTENDABLE,
    TASKS,
    DistillSection,
    DpoSection,
    ModeKindError,
    check_mode_kind,
)
from minimind.training.config import MODES as TRAIN_MODES
from minimind.training.distributed import local_capacity
from minimind.training.precision import bf16_supported, pick_device
from minimind.training.sizing import pretrain_lr
from minimind.vocabulary import MAX_NEW_TOKENS

from ..context import AppContext
from ..context import shown as _shown
from ..i18n import tr
from ..workspace import WorkspaceError
from ..workspace import run_name as folder_safe
from . import compare, grpo

MODES = list(TRAIN_MODES)  # pretrain, sft, lora, qlora, dpo, distill, grpo
WEIGHTS = {"full": "", "lora": "lora", "qlora": "qlora"}  # dpo / distill / grpo: what trains -> config adapter
STOP_AFTER = ("steps", "minutes")  # how a run's length is given: max_steps, or time_budget_s (minutes × 60)
MAX_MINUTES = 24 * 60  # the longest time budget the page takes (one day)
# where the page offers a corpus of the kind a mode needs (after "save a <kind> corpus on the Corpus tab")
SAVE_EXAMPLES = {"prompts": " (e.g. the Tang poem prompts sample)",
                 "labelled": " (e.g. a CSV with text and label columns)"}


HUB_CHOICE = "hub:"  # "a Hugging Face model: id or folder": shows the import row (train.py), not a model


def base_choices(ctx: AppContext) -> list[tuple[str, str]]:
    """New models by preset, a model to import, the shipped and imported models, and finished full-model runs."""
    choices = [(tr("new_model_auto"), "new:auto")]
    choices += [(tr("new_model", name=name), f"new:{name}") for name in PRESETS]
    return choices + [(tr("hub_model"), HUB_CHOICE)] + full_models(ctx)


def default_base(ctx: AppContext) -> str:
    """What the Train tab starts from before anyone chooses (the default mode fine-tunes): the first
    shipped or imported model, else a new model of the size the run's budget allows."""
    offered = [model_id for _, model_id in full_models(ctx) if model_id.startswith(("shipped:", "imported:"))]
    return offered[0] if offered else "new:auto"


def full_models(ctx: AppContext) -> list[tuple[str, str]]:
    """The offered full models (an adapter run is not a model of its own), classifiers included."""
    return [(label, model_id) for label, model_id, folder in ctx.offered_models()
            if not (folder / "adapter_config.json").is_file()]


def teacher_choices(ctx: AppContext) -> list[tuple[str, str]]:
    """Distillation teachers: the offered full models that write text (no classifier)."""
    return [(label, model_id) for label, model_id, folder in ctx.offered_models()
            if not (folder / "adapter_config.json").is_file() and not is_classifier(folder)]


def corpus_choices(ctx: AppContext) -> list[str]:
    return [c["name"] for c in ctx.workspace.list_corpora()]


def last_corpus(ctx: AppContext) -> str | None:
    """The corpus saved last (what the Train tab offers first), None before the first."""
    corpora = ctx.workspace.list_corpora()
    if not corpora:
        return None
    return max(corpora, key=lambda c: (c.get("created") or 0, c["name"]))["name"]


def corpus_kind(ctx: AppContext, corpus) -> str | None:
    """The kind a saved corpus was found to be (None for an unknown name or none chosen)."""
    if not isinstance(corpus, str) or not corpus:
        return None
    try:
        return ctx.workspace.corpus(corpus).get("summary", {}).get("kind")
    except (WorkspaceError, OSError, ValueError):
        return None


def trains_adapter(mode, weights="full") -> bool:
    """Does a LoRA / QLoRA adapter train (mode lora or qlora; dpo, distill or grpo with such weights)?"""
    return mode in ("lora", "qlora") or (mode in ADAPTER_MODES and WEIGHTS.get(weights or "full") in ("lora", "qlora"))


def shown_fields(mode, weights="full", base=None, task="generate") -> dict[str, bool]:
    """Which of the Train tab's mode-dependent fields show for this mode, weights, start and task:
    the LoRA rank and alpha when an adapter trains; the weights for dpo, distill and grpo; DPO's beta
    for dpo; the teacher, temperature and KL weight for distill; GRPO's settings and rewards for grpo;
    the architecture for a new model; adding the corpus's characters for a fine-tune that can grow
    its vocabulary; the class weights for a classifier. Nothing else depends on them."""
    new_model = isinstance(base, str) and base.startswith("new:")
    distill = mode == "distill"
    return {"weights": mode in ADAPTER_MODES, "rank": trains_adapter(mode, weights),
            "alpha": trains_adapter(mode, weights), "beta": mode == "dpo", "teacher": distill,
            "temperature": distill, "kl_weight": distill, "grpo": mode == "grpo", "architecture": new_model,
            "extend_vocab": mode in EXTENDABLE and not new_model, "class_weights": task == "classify"}


def max_processes() -> int:
    """The most processes the page starts for one run on this machine's device."""
    return local_capacity(pick_device())


def defaults_for(mode: str, weights: str = "full", task: str = "generate"):
    """lr, steps and batch size that suit the mode (and, for dpo/distill/grpo, its weights; for a
    classifier, its task) on this device: the trainer's own defaults. Distill with full weights is
    taken to train a new student."""
    device = pick_device()
    if task == "classify" and mode not in CLASSIFY_MODES:
        mode = "lora"
    adapter = WEIGHTS.get(weights or "full", "") if mode in ADAPTER_MODES else ""
    new_model = mode == "pretrain" or (mode == "distill" and not adapter)
    raw = {"mode": mode, "adapter": adapter, "max_steps": 1, "data": {"files": ["corpus"]},
           "model": {"init_from": "" if new_model else "base"}}  # fine-tunes need one to validate
    if task == "classify":
        raw["task"] = "classify"
    if mode == "distill":
        raw["distill"] = {"teacher": "teacher"}
    if mode == "grpo":
        raw["grpo"] = {"rewards": grpo.default_spec()}
    resolved = TrainConfig.from_dict(raw).resolved(device, bf16_supported(device))
    steps = 300 if new_model else 100
    return resolved.optim.lr or pretrain_lr("nano"), steps, resolved.batch_size  # auto size: lr set when chosen


def _number(value, what: str, low: float, high: float | None = None) -> float:
    """A number typed on the page: above `low`, or in [low, high] when `high` is given."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    ok = low <= number <= high if high is not None else number > low
    if not ok:  # NaN fails both
        span = f"between {low:g} and {high:g}" if high is not None else f"above {low:g}"
        raise WorkspaceError(f"{what} must be a number {span} (got {_shown(value)})")
    return number


def _whole(value, what: str, low: int, high: int) -> int:
    """A whole number typed on the page (an emptied box arrives as None), in [low, high]."""
    number = _number(value, what, low, high)
    if number != int(number):
        raise WorkspaceError(f"{what} must be a whole number (got {_shown(value)})")
    return int(number)


def _choices(**given) -> None:
    """Every dropdown and radio value is a name (text) or unset: a list or a number sent to the API
    is refused with the field's name."""
    for what, value in given.items():
        if value is not None and not isinstance(value, str):
            raise WorkspaceError(f"{what.replace('_', ' ')} must be one of the page's choices (got {_shown(value)})")


@dataclass
class TrainForm:
    """The Train tab's controls, as the browser or an API client sent them (unchecked: `to_config`
    checks them). Each field is named like its control in train.build; the field order is the
    order of the estimate and start_training API parameters (the newer ones last, so a client
    that sends the first twelve gets the defaults of the rest)."""

    base: str | None            # what to start from: new:<preset>, shipped:<name>, imported:<name> or run:<id>
    mode: str | None            # MODES
    corpus: str | None          # a saved corpus's name
    steps: float | None         # optimizer steps (stop_after "steps")
    batch: float | None         # rows per step (per process)
    seq_len: float | None       # tokens per row
    lr: float | None            # peak learning rate
    accum: float | None         # gradient accumulation
    precision: str | None       # auto, bf16, fp16, fp32
    rank: float | None          # LoRA rank
    alpha: float | None         # LoRA alpha
    eval_every: float | None    # steps between evaluations (0: auto)
    weights: str | None = "full"  # dpo / distill / grpo: full, lora or qlora (WEIGHTS)
    beta: float | None = DpoSection.beta  # dpo
    teacher: str | None = None  # distill: an offered full model that writes text
    temperature: float | None = DistillSection.temperature  # distill
    kl_weight: float | None = DistillSection.kl_weight  # distill: the next-token loss weighs 1 - kl_weight
    rewards: list | str | None = None  # grpo: the config's grpo.rewards as a list or JSON text (None: the default)
    group_size: float | None = grpo.DEFAULTS["group_size"]  # grpo
    grpo_beta: float | None = grpo.DEFAULTS["beta"]  # grpo
    max_new_tokens: float | None = grpo.DEFAULTS["max_new_tokens"]  # grpo
    stop_after: str | None = "steps"  # steps, or minutes (wall-clock; the trainer sizes the run)
    minutes: float | None = 10.0  # stop_after "minutes"
    processes: float | None = 1  # data-parallel processes (torchrun), at most one per GPU (or CPU core)
    parallel: str | None = "ddp"  # how they share the model: ddp or fsdp
    report_to: list | str | None = None  # trackers that get the metrics too: tensorboard, trackio
    extend_vocab: bool | None = False  # add the corpus's characters the starting tokenizer spells in bytes
    architecture: str | None = compare.DEFAULT_ARCHITECTURE  # a new model's shape (compare.ARCHITECTURES)
    task: str | None = "generate"  # generate, or classify (a labelled corpus only, and the only task it takes)
    class_weights: str | None = ""  # classify: "" or balanced (every class weighs alike in the loss)
    run_name: str | None = ""  # the run's id, made folder-safe (Workspace.run_name); empty: <mode>-<n>

    def run_id_name(self) -> str | None:
        """The run name typed, checked (a path or nothing usable is refused), or None for the default."""
        _choices(run_name=self.run_name)
        return folder_safe(self.run_name) if self.run_name and self.run_name.strip() else None

    def to_config(self, ctx: AppContext) -> TrainConfig:
        """The run the form describes, validated. dpo, distill and grpo read `weights`; dpo reads
        `beta`; distill reads `teacher`, `temperature` and `kl_weight`; grpo reads `rewards`,
        `group_size`, `grpo_beta` and `max_new_tokens`, within the page's bounds. Every other input
        of another mode is ignored. "minutes" runs for `minutes` of wall-clock time (time_budget_s;
        max_steps 0). `processes` > 1 trains under torchrun (`batch` is per process). `extend_vocab`
        is for fine-tuning modes (minimind.vocabulary). `architecture` shapes a new model; starting
        from an existing one it is ignored. `task` classify trains a classifier of the corpus's
        classes with mode sft, lora or qlora, from the shipped model or a finished run."""
        _choices(start_from=self.base, mode=self.mode, corpus=self.corpus, precision=self.precision,
                 weights=self.weights, teacher=self.teacher, stop_after=self.stop_after, parallelism=self.parallel,
                 task=self.task, class_weights=self.class_weights)
        mode, corpus = self.mode, self.corpus
        if mode not in MODES:
            raise WorkspaceError(f"mode must be one of {', '.join(MODES)}")
        if not corpus:
            raise WorkspaceError("choose a corpus (save one on the Corpus tab first)")
        meta = ctx.workspace.corpus(corpus)
        task = self.task or "generate"
        if task not in TASKS:
            raise WorkspaceError(f"task must be one of {', '.join(TASKS)} (got {_shown(task)})")
        self._check_corpus_kind(meta.get("summary", {}).get("kind"), task)
        if (self.class_weights or "") not in CLASS_WEIGHTS:
            raise WorkspaceError(f"class weights must be none or balanced (got {_shown(self.class_weights)})")
        if task == "classify" and mode not in CLASSIFY_MODES:
            raise WorkspaceError(f"a classifier trains with mode sft (every weight), lora or qlora (got {mode})")
        raw = self._run_settings(ctx, meta)
        if task == "classify":
            raw["task"] = "classify"
            raw["classify"] = {"class_weights": self.class_weights or ""}
        raw.update(self._objective_sections(ctx))
        raw["model"] = self._model_section(ctx, meta, task, raw["adapter"])
        config = TrainConfig.from_dict(raw)
        config.validate()
        return config

    def _check_corpus_kind(self, kind: str | None, task: str) -> None:
        """The corpus's kind (as found when it was saved) fits the mode and task, or the user is told
        which mode it trains with, or which kind of corpus to save on the Corpus tab."""
        try:
            check_mode_kind(self.mode, kind, task, f"corpus {self.corpus!r}")
        except ModeKindError as err:
            save = f": save a {err.needed} corpus on the Corpus tab{SAVE_EXAMPLES.get(err.needed, '')}"
            raise WorkspaceError(f"{err}{save if err.needed else ''}") from None

    def _run_settings(self, ctx: AppContext, meta: dict) -> dict:
        """The config's length, scale-out, trackers, batch, optimizer, LoRA and data settings."""
        if (self.stop_after or "steps") not in STOP_AFTER:
            raise WorkspaceError(f"stop after must be one of {', '.join(STOP_AFTER)} (got {_shown(self.stop_after)})")
        timed = self.stop_after == "minutes"
        budget_s = round(_number(self.minutes, "minutes", 0.1, MAX_MINUTES) * 60, 3) if timed else 0.0
        count = _number(self.processes if self.processes is not None else 1, "processes", 1, max_processes())
        if count != int(count):
            raise WorkspaceError(f"processes must be a whole number (got {_shown(self.processes)})")
        parallel = self.parallel or "ddp"
        if parallel not in DISTRIBUTED:
            raise WorkspaceError(f"parallelism must be one of {', '.join(DISTRIBUTED)} (got {_shown(self.parallel)})")
        if self.extend_vocab not in (True, False, None):
            raise WorkspaceError(f"add the corpus's characters must be true or false (got {_shown(self.extend_vocab)})")
        adapter = ""
        if self.mode in ADAPTER_MODES:
            if (self.weights or "full") not in WEIGHTS:
                raise WorkspaceError(f"weights must be one of {', '.join(WEIGHTS)} (got {_shown(self.weights)})")
            adapter = WEIGHTS[self.weights or "full"]
        report_to = self.report_to
        if report_to is not None and not isinstance(report_to, (str, list)):
            raise WorkspaceError(f"trackers must be a list of names (got {_shown(report_to)})")
        settings = meta.get("settings", {})
        raw = {"mode": self.mode, "adapter": adapter,
               "max_steps": 0 if timed else _whole(self.steps, "steps", 1, 10**9),
               "time_budget_s": budget_s, "processes": int(count), "distributed": parallel,
               "report_to": [report_to] if isinstance(report_to, str) else list(report_to or []),
               "batch_size": _whole(self.batch, "batch size", 1, 4096),
               "grad_accum": _whole(self.accum, "gradient accumulation", 1, 1024), "precision": self.precision,
               "eval_every": _whole(self.eval_every or 0, "evaluate every", 0, 10**9),
               "optim": {"lr": _number(self.lr, "learning rate", 0, 1)},
               "lora": {"rank": _whole(self.rank, "LoRA rank", 1, 256),
                        "alpha": _whole(self.alpha, "LoRA alpha", 1, 100_000)},
               "data": {"files": meta["paths"], "kind": settings.get("kind", "auto"),
                        "text_field": settings.get("text_field"), "split": settings.get("split", "paragraph"),
                        "strict": settings.get("strict", False),
                        "seq_len": _whole(self.seq_len, "sequence length", 8, 65536),
                        "cache_dir": str(ctx.workspace.cache)}}
        if settings.get("label_field"):
            raw["data"]["label_field"] = settings["label_field"]
        return raw

    def _objective_sections(self, ctx: AppContext) -> dict:
        """The dpo, distill or grpo section of the config (none for the other modes)."""
        if self.mode == "dpo":
            return {"dpo": {"beta": _number(self.beta, "beta", 0)}}
        if self.mode == "distill":
            if self.teacher not in {v for _, v in teacher_choices(ctx)}:
                raise WorkspaceError("choose a teacher: the shipped model or a finished full-model run")
            kl = _number(self.kl_weight, "KL weight", 0, 1)
            return {"distill": {"teacher": str(ctx.model_folder(self.teacher)), "kl_weight": kl,
                                "ce_weight": round(1.0 - kl, 6),
                                "temperature": _number(self.temperature, "temperature", 0)}}
        if self.mode == "grpo":
            return {"grpo": grpo.grpo_section(grpo.default_spec() if self.rewards is None else self.rewards,
                                              self.group_size, self.grpo_beta, self.max_new_tokens)}
        return {}

    def _model_section(self, ctx: AppContext, meta: dict, task: str, adapter: str) -> dict:
        """What the run starts from: a new model of a preset (and architecture), or an offered model."""
        base, mode = self.base, self.mode
        if base not in {v for _, v in base_choices(ctx)}:
            raise WorkspaceError("choose what to start from: a new model, the shipped model or a finished run")
        if base == HUB_CHOICE:
            raise WorkspaceError("type a Hugging Face model id (or a folder) beside 'Start from' and press Import "
                                 "first; the imported model then becomes the starting point")
        if base.startswith("new:"):
            if task == "classify":
                raise WorkspaceError("a classifier fine-tunes an existing model: start from the shipped model or a "
                                     "finished run")
            if mode not in ("pretrain", "distill"):
                raise WorkspaceError(f"{mode} fine-tunes an existing model: start from the shipped model or a "
                                     "finished run, or choose pretrain")
            if adapter:
                raise WorkspaceError(f"{adapter} weights adapt an existing model: start the student from the shipped "
                                     "model or a finished run, or train full weights for a new student")
            model = {"preset": base[4:], **compare.model_settings(self.architecture)}
            tok = ctx.workspace.corpora / meta["name"] / "tokenizer"
            if mode == "pretrain" and (tok / "tokenizer.json").is_file():  # a distilled student takes the teacher's
                model["tokenizer"] = str(tok)
        else:
            model = {"init_from": str(ctx.model_folder(base))}
        if self.extend_vocab:
            if base.startswith("new:") or mode not in EXTENDABLE:
                raise WorkspaceError("adding the corpus's characters to the vocabulary is for fine-tuning an existing "
                                     "model (modes pretrain, sft, lora, qlora); a new model learns its own tokenizer")
            model["extend_vocab"] = MAX_NEW_TOKENS
        return model

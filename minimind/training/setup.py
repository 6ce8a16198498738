"""Everything a run does before its first step: tokenizer, prepared data, the size of a new
model, the model itself (resumed weights loaded, distributed wrapping), the objective,
the optimizer and the batch order. `estimate` and the loop both build a run with it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

import minimind.training.distributed as dist

from ..checkpoint import load_tokenizer_for
from ..data import prepare_corpus
from ..errors import TrainingError
from ..tokenizer import iter_texts, load_tokenizer, save_tokenizer, train_tokenizer
from ..vocabulary import coverage, extend_tokenizer
from .batches import BatchStream, groups_mixed, row_lengths
from .budget import Budget
from .checkpoint import latest_checkpoint, load_average, load_trainer_state, remove_partial
from .config import TrainConfig, check_mode_kind
from .ema import WeightAverage
from .memory import check_fits
from .modes import build_model
from .objectives import build_objective
from .optimizers import MUON_MAX_SHARE, choose_optimizer, make_optimizer, muon_share
from .precision import Precision
from .run_dir import RunDir
from .sizing import (choose_preset, choose_timed_preset, ladder_for, parameter_count, pretrain_lr,
                     repetition_dropout)
from .state_io import load_optimizer, load_weights


@dataclass
class Run:
    """A run ready for its first (or next) step."""

    cfg: TrainConfig
    precision: Precision
    tokenizer: object
    corpus: object               # minimind.data.PreparedCorpus
    budget: Budget | None
    base_model: torch.nn.Module  # the model (peft-wrapped for adapters) ...
    model: torch.nn.Module       # ... and what the steps call: the same, or its DDP/FSDP wrapping
    objective: object            # objectives/: loss(model, batch) and evaluate(model, batches)
    optimizer: torch.optim.Optimizer
    scaler: object
    stream: BatchStream
    state: dict                  # step, tokens_seen, elapsed_s, max_steps (from the checkpoint on resume)
    checkpoint: Path | None      # the checkpoint resumed from
    sized: bool = False          # whether the size, learning rate or optimizer of a new model was chosen now
    memory: object = None        # the fine-tune's memory plan (training/memory.py); None for a new model
    step_s: float | None = None  # seconds a step of the chosen size took when the sizes were timed (or None)
    average: WeightAverage | None = None  # optim.ema: the weight average evaluations and saves see


def set_up(cfg: TrainConfig, run: RunDir, info, device: str, resume: bool, started: float, log,
           phase=lambda _name: None) -> Run:
    """`phase(name)` is told what the set-up is doing (the page shows it while the run has no step yet)."""
    memory = check_fits(cfg, device.split(":")[0], log)  # before anything is loaded: a run that cannot fit says so
    if memory is not None:
        log(f"memory: this run needs {memory.describe()}")
    torch.manual_seed(cfg.seed)
    precision = Precision(cfg.precision, device.split(":")[0])
    phase("preparing_data")
    tokenizer, corpus = prepare_inputs(cfg, run, info)
    budget = Budget.start(cfg.time_budget_s, started) if cfg.time_budget_s > 0 else None
    # a new model's objective does not depend on the model: it times the candidate sizes
    objective = build_objective(cfg, None, tokenizer, device, precision, corpus, log) if cfg.new_model else None
    if cfg.new_model and cfg.model.preset == "auto" and budget is not None and not cfg.max_steps:
        phase("measuring_speed")  # the candidate sizes are timed
    sized, step_s = choose_new_model_size(cfg, tokenizer, corpus, device, precision, info, budget, log, objective)
    phase("building_model")
    base_model = build_model(cfg, tokenizer, device, precision.dtype, corpus.classes)
    objective = objective or build_objective(cfg, base_model, tokenizer, device, precision, corpus, log,
                                          info.rank, info.world)

    checkpoint = None
    if resume:
        remove_partial(run.checkpoints)
        checkpoint = latest_checkpoint(run.checkpoints)
        if checkpoint is not None:
            load_weights(base_model, checkpoint, bool(cfg.adapter_kind))
    if cfg.grad_checkpointing:
        getattr(base_model, "get_base_model", lambda: base_model)().activation_checkpointing_enable()
        if cfg.adapter_kind:
            base_model.enable_input_require_grads()
    model = dist.wrap(base_model, info, cfg.distributed, device)
    choosing, step_tokens = cfg.optim.name == "auto", tokens_per_step(cfg, info)
    optimizer = build_optimizer(cfg, base_model, device, step_tokens)
    if choosing:
        sized = True  # (the choice is kept in the run's config)
        share = muon_share(base_model, cfg, step_tokens)
        log(f"optimizer {cfg.optim.name}: a Muon update would cost {100 * share:.0f} % of a step's FLOPs "
            f"(Muon at {100 * MUON_MAX_SHARE:.0f} % or less)")
    lengths = row_lengths(corpus.train) if cfg.task == "classify" else None
    grouped = lengths is not None and groups_mixed(corpus.train, cfg.batch_size * cfg.grad_accum * info.world,
                                                   cfg.seed, lengths)
    if cfg.task == "classify":
        log("batches hold texts of similar length (less padding)" if grouped else
            "batches are drawn at random: grouped by length, they would hold one class each")
    stream = BatchStream(corpus.train, cfg.batch_size, cfg.grad_accum, cfg.seed, tokenizer.pad_token_id,
                         info.rank, info.world, group_by_length=grouped, lengths=lengths)
    state = {"step": 0, "tokens_seen": 0, "elapsed_s": 0.0, "max_steps": cfg.max_steps}
    average = WeightAverage(base_model, cfg.optim.ema, cfg.optim.ema_from) if cfg.optim.ema else None
    if checkpoint is not None:
        state, optim_state = load_trainer_state(checkpoint)
        load_optimizer(optimizer, optim_state, model, cfg)
        saved_average = load_average(checkpoint) if average is not None else None
        if saved_average is not None:  # (the model folder holds the average: the trained weights come back here)
            average.load_state_tensors(saved_average)
        elif average is not None:  # saved without one (optim.ema 0, or before it existed): it starts here
            log(f"{checkpoint.name} holds no weight average: the average starts from its weights")
        if budget is not None:
            budget = Budget.start(cfg.time_budget_s, started, already_used=state.get("elapsed_s", 0.0))
    return Run(cfg, precision, tokenizer, corpus, budget, base_model, model, objective, optimizer,
               precision.grad_scaler(), stream, state, checkpoint, sized, memory, step_s, average)


def prepare_inputs(cfg: TrainConfig, run: RunDir, info):
    """The run's tokenizer and prepared data, the data's kind checked against the mode: all of a run
    that needs no model and no device (the ZeroGPU driver makes them before the first GPU slice)."""
    tokenizer = prepare_tokenizer(cfg, run, info)
    corpus = prepare_data(cfg, tokenizer, info)
    check_mode_kind(cfg.mode, corpus.kind, cfg.task)  # the kind the data turned out to be, before any model
    return tokenizer, corpus


def prepare_tokenizer(cfg: TrainConfig, run: RunDir, info):
    """The run's tokenizer: the one named, the starting model's, a distillation teacher's (for a
    new student), the one this run trained before, or one trained now on the corpus."""
    own = run.path / "tokenizer"
    if cfg.model.tokenizer:
        return load_tokenizer(cfg.model.tokenizer)
    if cfg.model.init_from:
        if not cfg.model.extend_vocab:
            return load_tokenizer_for(cfg.model.init_from)
        if not (own / "tokenizer.json").is_file() and info.is_main:  # (a resumed run keeps its extension)
            extend_run_tokenizer(cfg, run, own)
        dist.barrier(info)
        return load_tokenizer(own)
    if cfg.mode == "distill":
        return load_tokenizer_for(cfg.distill.teacher)
    if (own / "tokenizer.json").is_file():
        return load_tokenizer(own)
    if info.is_main:
        run.log(f"training a {cfg.model.vocab_size}-token tokenizer on the corpus")
        _, report = train_tokenizer(cfg.data.files, cfg.model.vocab_size, out_dir=own,
                                    text_field=cfg.data.text_field, min_char_count=cfg.model.min_char_count)
        run.log(f"tokenizer: {report.vocab_size} tokens, {report.chars_per_token:.2f} chars/token, "
                f"byte-fallback share {100 * report.byte_fallback_share:.2f} %, trained in {report.seconds:.1f}s")
    dist.barrier(info)
    return load_tokenizer(own)


def extend_run_tokenizer(cfg: TrainConfig, run: RunDir, own) -> None:
    """The starting model's tokenizer plus the corpus's frequent characters it spells in byte
    pieces, saved as the run's tokenizer; the coverage before and after go to the log and to
    `vocabulary.json` in the run folder."""
    import json

    def measured(tokenizer):
        return coverage(tokenizer, iter_texts(cfg.data.files, text_field=cfg.data.text_field, kind=cfg.data.kind))

    tokenizer = load_tokenizer_for(cfg.model.init_from)
    before = measured(tokenizer)
    added = extend_tokenizer(tokenizer, before.candidates(cfg.model.extend_min_count, cfg.model.extend_vocab))
    after = measured(tokenizer) if added else before
    save_tokenizer(tokenizer, own)
    report = {"added_tokens": len(added), "before": before.as_dict(cfg.model.extend_min_count, cfg.model.extend_vocab),
              "after": after.as_dict(cfg.model.extend_min_count, cfg.model.extend_vocab),
              "added": "".join(tokenizer.convert_ids_to_tokens(added))}
    (run.path / "vocabulary.json").write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")
    run.log(f"vocabulary: {len(added)} of the corpus's characters added as tokens ({len(tokenizer)} tokens); "
            f"byte-fallback share {100 * before.byte_fallback_share:.1f} % -> {100 * after.byte_fallback_share:.1f} %, "
            f"{before.chars_per_token:.2f} -> {after.chars_per_token:.2f} chars/token")


def prepare_data(cfg: TrainConfig, tokenizer, info):
    """Prepared train/validation rows (the main process prepares, the others read its cache)."""
    data_config = cfg.data
    if info.is_main:
        corpus = prepare_corpus(cfg.data.files, tokenizer, data_config)
    dist.barrier(info)
    if not info.is_main:
        corpus = prepare_corpus(cfg.data.files, tokenizer, data_config)
    if len(corpus.train) == 0:
        raise TrainingError("the training split is empty: the corpus is too small for data.seq_len "
                            f"= {cfg.data.seq_len}; add text or lower data.seq_len")
    return corpus


def choose_new_model_size(cfg: TrainConfig, tokenizer, corpus, device: str, precision: Precision, info,
                          budget: Budget | None, log, objective=None) -> tuple[bool, float | None]:
    """Fill `model.preset: auto` (and an unset learning rate) of a new model from what the run can
    afford (training/sizing.py). Returns whether anything was chosen. With a time budget each
    candidate size is timed by a short speed probe of the run's objective on this device, and the
    chosen one timed again (sizing.choose_timed_preset); with a step count or epochs the planned
    tokens are known without one.

    Returns (whether anything was chosen, the seconds a step of the chosen size took when timed, or
    None): a time-budgeted run plans its first steps with that figure instead of timing them again."""
    if not cfg.new_model:
        return False, None
    chose, timed = False, {}
    if cfg.model.preset == "auto":
        step_tokens = tokens_per_step(cfg, info)

        def stream() -> BatchStream:
            return BatchStream(corpus.train, cfg.batch_size, cfg.grad_accum, cfg.seed, tokenizer.pad_token_id,
                               info.rank, info.world)

        def seconds_per_step(preset: str) -> float:
            trial = TrainConfig.from_dict({**cfg.to_dict(), "model": {**cfg.to_dict()["model"], "preset": preset}})
            model = build_model(trial, tokenizer, device, precision.dtype).train()
            # (forward and backward + 10 %, as TOKENS_PER_PARAMETER was fitted: with each size's real
            # optimizer step, Muon's update, the sizes from micro up would look 20-50 % dearer than
            # they did in the fit)
            per_step = dist.mean(speed_probe(model, stream(), precision, objective, steps=2), info)
            del model
            timed[preset] = per_step  # the newest timing of each size
            return per_step

        def tokens_for(per_step: float) -> float:
            return 0.9 * dist.mean(budget.left(time.perf_counter()), info) / per_step * step_tokens

        architecture = cfg.model.architecture
        ladder = ladder_for(architecture)

        def parameters(preset: str) -> int:
            return parameter_count(preset, len(tokenizer), cfg.model.overrides, architecture)

        if cfg.max_steps or budget is None:
            known = (cfg.max_steps or cfg.epochs * stream().steps_per_epoch()) * step_tokens
            choice = choose_preset(lambda preset: known, parameters, ladder=ladder)
        else:
            choice = choose_timed_preset(seconds_per_step, tokens_for, parameters, ladder=ladder, log=log)
        cfg.model.preset, chose = choice.preset, True
        log(choice.describe())
    if cfg.optim.lr is None:
        cfg.optim.lr, chose = pretrain_lr(cfg.model.preset), True
    return chose, timed.get(cfg.model.preset)


def choose_dropout(cfg: TrainConfig, model: torch.nn.Module, max_steps: int, stream: BatchStream, log) -> bool:
    """Set the residual dropout of a new pretrained transformer from the passes over its training
    split that its planned steps make (sizing.repetition_dropout), unless `model.overrides` sets
    it; the model is not compiled yet. Returns whether dropout was set (the run's config.yaml then
    records it, so a resumed run builds the same model)."""
    if not (cfg.mode == "pretrain" and cfg.new_model and cfg.model.architecture == "transformer"
            and "dropout" not in cfg.model.overrides):
        return False
    passes = max_steps / max(stream.steps_per_epoch(), 1e-9)
    p = repetition_dropout(passes)
    if not p:
        return False
    cfg.model.overrides["dropout"] = p
    model.config.dropout = p
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = p
    log(f"{passes:.1f} planned passes over the training split: residual dropout {p:g} against "
        "overfitting (model.overrides.dropout sets it)")
    return True


def step_batches(objective, model, stream: BatchStream, step: int) -> tuple[list[dict], dict]:
    """The training micro-batches of `step` and the metrics of making them: the stream's rows, or
    for an objective that makes its own data (GRPO) the answers it samples for the stream's prompts."""
    micro = list(stream.micro_batches(step))
    rollouts = getattr(objective, "rollouts", None)
    return rollouts(model, micro, step) if rollouts is not None else (micro, {})


def build_optimizer(cfg: TrainConfig, model, device: str, tokens: int):
    """The optimizer a run trains `model` with (`tokens` a step): `optim.name: auto` decided on the
    model (optimizers.choose_optimizer, written into `cfg`); Muon's iterations in bf16 where the run is."""
    cfg.optim.name = choose_optimizer(cfg, model, tokens)
    return make_optimizer(model, cfg, device, low_precision=cfg.precision == "bf16")


def tokens_per_step(cfg: TrainConfig, info) -> int:
    """Tokens an optimizer step trains on, over every process (rows x sequence length)."""
    return cfg.batch_size * cfg.grad_accum * info.world * cfg.data.seq_len


def speed_probe(model, stream: BatchStream, precision: Precision, objective, steps: int = 3,
                optimizer=None) -> float:
    """Seconds per optimizer step, from forward+backward passes (an objective that samples its data
    samples it too, and makes its several passes) and the `optimizer`'s steps, which change the
    model's weights (a throwaway model's); without one, the passes change no weights and the
    optimizer's step is guessed at a tenth of them (AdamW's is a few percent)."""
    times = []
    device = next(model.parameters()).device
    for step in range(steps + 1):
        start = time.perf_counter()
        micro, _ = step_batches(objective, model, stream, step)
        for _ in range(getattr(objective, "updates_per_step", 1)):
            for batch in micro:
                with precision.autocast():
                    loss, _ = objective.loss(model, {k: v.to(device) for k, v in batch.items()})
                loss.backward()
            if optimizer is not None:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    model.zero_grad(set_to_none=True)
    return sorted(times[1:])[len(times[1:]) // 2] * (1.0 if optimizer is not None else 1.1)

"""The one training loop. Every mode is an option of it: what is optimised is an objective
(objectives/: next-token loss for pretrain and SFT, DPO, distillation), how the model is
built and which weights train is modes.py, and everything before the first step is
setup.py.

Each optimizer step: for each micro-batch, forward under autocast and backward;
skip the step if the loss or the gradient norm is not finite; clip; AdamW; set
the next learning rate from the schedule; move the weight average (optim.ema, ema.py), which
evaluations and checkpoints then see. Log, evaluate and checkpoint at their
intervals and always after the last step. SIGTERM/SIGINT end the run after the
current step with a checkpoint; `resume=True` continues from the newest one. An objective with
a `report` (classify) is evaluated once more at the end over every validation row; the report
goes to `confusion.json` in the run folder and its figures to status.json.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import signal
import time
from pathlib import Path

import torch

from ..errors import TrainingError, failure_message
import minimind.training.distributed as dist
import minimind.training.reporting as reporting
from .allocator import MMAP_THRESHOLD, retain_freed_memory
from .batches import eval_batches
from .budget import (PROBE_PLAN_SHARE, ROUGH_RESIZE_STEPS, TIME_FROM_STEP, eval_cost_steps, eval_every_at_least,
                     first_eval_from, interval_due, intervals, planned_steps, save_guess)
from .checkpoint import latest_checkpoint, save_checkpoint
from .compiling import (
    MIN_GAIN,
    CompileTrial,
    LossWithFallback,
    compile_layers,
    compile_now,
    eager_again,
    measure_compile,
    wants_compile,
)
from .config import TrainConfig
from .core_share import CoreShare
from .events import RunEvent
from .modes import count_parameters, trainable_parameters
from .perf import flops_per_token, matmul_peak_flops
from .precision import Precision, describe, pick_device, resolved_for
from .run_dir import RunDir, new_run_id
from .schedule import lr_at
from .setup import choose_dropout, set_up, step_batches
from . import step_times
from ..data.config import cache_root
from ..classifier import write_adapter_labels
from ..tokenizer import save_tokenizer
from .state_io import full_model_state, full_optimizer_state, write_generation_config


class _StopFlag:
    """Turns SIGTERM/SIGINT into a request to save and stop after the current step."""

    def __init__(self):
        self.requested = False
        self._previous = {}

    def __enter__(self):
        if _in_main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        self.requested = True

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def train(config: TrainConfig, resume: bool = False, progress=None, slice_s: float | None = None,
          started: float | None = None) -> dict:
    """Run (or resume) training as configured. Returns the final status dict.

    `progress(step, total, info)` is called after every optimizer step on the main process.
    `slice_s`: train for one GPU slice of that many seconds only (ZeroGPU, see slices.py): stop when
    another step and a save would run past it, save, and return with state "paused"; resuming goes
    on exactly where it stopped.
    `started`: the time.perf_counter() value a time budget counts from (the command passes its process's
    start); by default, this call.
    """
    started = time.perf_counter() if started is None else started
    device = pick_device(config.device)
    info, device = dist.init(device)
    run = RunDir(Path(config.run_dir or Path("runs") / new_run_id()))
    if resume and not run.config_file.is_file():
        raise TrainingError(f"{run.path}: nothing to resume (no config.yaml in that run folder)")
    cfg = resolved_for(config, device)
    cfg.run_dir = str(run.path)
    if info.is_main:
        _start_run_folder(run, cfg, resume, describe(device, cfg.precision))
    threads = torch.get_num_threads()
    clean = False
    try:
        if cfg.processes > 1 and info.world != cfg.processes:
            raise TrainingError(
                f"this run is set to {cfg.processes} processes but was started as {info.world}: start it with "
                f"torchrun --nproc_per_node={cfg.processes} -m minimind train ... (the web page does), "
                "or set processes=1 to train with whatever number torchrun starts")
        if cfg.threads and slice_s is None:  # (a GPU slice keeps its worker's one thread: on_one_thread_when_forked)
            torch.set_num_threads(cfg.threads)
        with _StopFlag() as stop, contextlib.ExitStack() as closing:
            status = _train(cfg, run, info, device, resume, stop, progress, started, closing, slice_s)
        clean = True
        return status
    except BaseException as err:
        message = failure_message(err)
        if info.is_main:
            with contextlib.suppress(OSError):  # a folder that cannot be written cannot take the news
                run.log("FAILED: " + message)  # a bug's traceback goes to stderr (the job's stdout.log), not here
                run.write_status(state="failed", error=message or type(err).__name__)
        raise
    finally:
        torch.set_num_threads(threads)
        dist.finish(info, clean)


def _start_run_folder(run: RunDir, cfg: TrainConfig, resume: bool, device: str) -> None:
    """Create (or reopen) the run folder and mark it running; an unwritable folder is a
    TrainingError, and is marked failed when at least its status can still be written."""
    try:
        run.create()
        if not resume:
            cfg.save(run.config_file)
        run.write_status(state="running", phase="starting", pid=dist.launcher_pid(), mode=cfg.mode,
                         run_dir=str(run.path), error=None, started=time.time(), device=device)
    except OSError as err:
        message = (f"cannot write into the run folder {run.path.name} ({err.strerror or err}); "
                   "choose a writable folder (or free disk space), then start or resume the run")
        with contextlib.suppress(OSError):
            run.write_status(state="failed", error=message)
        raise TrainingError(message) from None



# A run timed by its first step trains that step under a plan of this many steps (its learning rate: the
# warmup's first fifth), then is planned from the step's time.
PROVISIONAL_STEPS = 100
ROUGH_STEPS_TO_REMEMBER = 5  # timed steps a run needs before its seconds per step are kept for the next
SLICE_USABLE = 0.85  # of a GPU slice, what training plans with: the call's clock starts before this process
                     # does (the platform's scheduling, the fork, loading the run)
SLICE_STEP_WINDOW = 8  # a slice plans its next step as slow as the slowest of this many last ones: on a shared
                       # machine one step can take 10x the one before it


def slice_spent(now: float, deadline: float, step_s: float, save_s: float | None, eval_s: float,
                slice_s: float) -> bool:
    """Would one more step (`step_s`: the slowest of the last few, with room for a slower one), an
    evaluation it may bring and the save after it run past the slice's end? The save: as long as
    the last one in this slice took, else a tenth of the slice; the evaluation: as long as the last
    one took (0 before the first)."""
    reserve = (save_s if save_s is not None else 0.1 * slice_s) + eval_s
    return now + 1.5 * step_s + reserve > deadline


def _train(cfg: TrainConfig, run_dir: RunDir, info, device: str, resume: bool, stop: _StopFlag, progress,
           started: float, closing: contextlib.ExitStack, slice_s: float | None = None):
    main = info.is_main
    log = run_dir.log if main else (lambda _msg: None)

    # a resumed run's wall seconds in the processes before this one: known once its checkpoint is read
    wall_before = None if resume else 0.0

    def wall() -> float:  # the run's wall seconds: this process's, set-up included, after those before it
        return wall_before + time.perf_counter() - started

    def phase(name: str) -> None:  # what the run is doing, for the page while it has no step to show
        if main:
            run_dir.write_status(phase=name, **({"wall_s": wall()} if wall_before is not None else {}))

    if device == "cpu" and retain_freed_memory():
        log(f"CPU memory: freed blocks up to {MMAP_THRESHOLD >> 20} MB stay in the process (glibc mmap/trim thresholds)")
    run = set_up(cfg, run_dir, info, device, resume, started, log, phase)
    model, base_model, objective, budget = run.model, run.base_model, run.objective, run.budget
    optimizer, scaler, stream, precision, tokenizer = run.optimizer, run.scaler, run.stream, run.precision, run.tokenizer
    corpus, state, average = run.corpus, run.state, run.average
    # what evaluations and saves see: the weights, or with optim.ema their moving average (ema.py)
    averaged = average.swapped_in if average is not None else (lambda _step: contextlib.nullcontext())
    if average is not None:
        log(f"evaluations and checkpoints hold a moving average of the weights (optim.ema {cfg.optim.ema:g}) from "
            f"step {cfg.optim.ema_from:,} on")
    if run.sized and main:
        cfg.save(run_dir.config_file)  # a resumed run builds the size (and optimizer) chosen now
    if run.checkpoint is not None:
        if main:
            run_dir.truncate_metrics_after(state["step"])
        log(f"resumed from {run.checkpoint.name} (step {state['step']})")
    elif resume:
        if main:
            run_dir.truncate_metrics_after(-1)  # nothing was kept: the curve starts again from step 0
        log("no complete checkpoint yet: starting from step 0")
    # report_to: trackers get each metrics.jsonl record too (main process only), closed however the run ends
    # (a resume with no checkpoint starts the curve again: -1 hides everything an earlier attempt logged)
    resumed_at = (state["step"] if run.checkpoint is not None else -1) if resume else None
    sinks = reporting.start(cfg.report_to, run_dir, cfg.to_dict(), log, resumed_at) if main else []
    closing.callback(reporting.finish, sinks)

    def append_metrics(record: dict) -> None:
        run_dir.append_metrics(record)
        reporting.write(sinks, record, log)

    # With a time budget no step is spent on measuring alone: the run is planned roughly from the seconds a
    # step of this shape took before (the sizes' timing, or an earlier run's: step_times.py), else from its
    # own first step (eager: compiling, if any, starts after it); measured steps, evaluations and saves
    # re-size it (budget.py).
    max_steps = state.get("max_steps") or cfg.max_steps
    timed = budget is not None and not cfg.max_steps
    step_cache = cache_root(cfg.data)
    step_key = step_times.shape_key(cfg, describe(device, cfg.precision), getattr(base_model, "config", None),
                                    count_parameters(base_model)[0], info.world, torch.get_num_threads(),
                                    wants_compile(cfg, max_steps or 0))
    plan_at_first_step = False
    if not max_steps:
        if budget is not None:
            known = dist.mean(run.step_s or step_times.recall(step_cache, step_key) or 0.0, info)  # all ranks agree
            if known:
                left = dist.mean(budget.left(time.perf_counter()), info)
                max_steps = planned_steps(cfg, stream.steps_per_epoch(), known, left)
                budget.rough, budget.rough_step_s = True, known
                source = "the timed sizes" if run.step_s else "an earlier run of this shape on this machine"
                log(f"planned from {source}: {known:.2f}s/step -> {max_steps} steps in {cfg.time_budget_s:.0f}s")
            else:
                max_steps, plan_at_first_step = PROVISIONAL_STEPS, True
                log("the first step is timed to plan the run")
        else:
            max_steps = planned_steps(cfg, stream.steps_per_epoch())
    state["max_steps"] = max_steps
    if state["step"] == 0 and not plan_at_first_step and choose_dropout(cfg, base_model, max_steps, stream, log) \
            and main:
        cfg.save(run_dir.config_file)
    min_eval_every = eval_every_at_least(cfg, len(corpus.validation))

    def run_intervals(total: int) -> tuple[int, int, int, int]:
        return intervals(cfg, total, min_eval_every)

    warmup, eval_every, save_every, log_every = run_intervals(max_steps)
    if budget is not None:
        budget.eval_guess_steps = eval_cost_steps(cfg, len(corpus.validation))
        budget.save_guess_s = save_guess(*_saved_parameters(base_model, cfg))

    def start_compiling(total: int) -> tuple[CompileTrial | None, list]:
        """(the trial of `compile: auto`, which times eager steps, then compiled ones, and keeps what
        is faster, else None; the layers compiled from the next step: `compile: on`, else none)"""
        if measure_compile(cfg, total, base_model):
            return CompileTrial(lambda x: dist.mean(x, info)), []
        return None, compile_layers(base_model, cfg, total, log)

    trial, compiled = (None, []) if plan_at_first_step else start_compiling(max_steps)
    loss_fn = LossWithFallback(objective.loss, compiled, log)
    updates = getattr(objective, "updates_per_step", 1)
    trainable, total_params = count_parameters(base_model)
    seq_len = cfg.data.seq_len
    fpt = flops_per_token(getattr(base_model, "config", None), seq_len, trainable / max(total_params, 1))
    peak = matmul_peak_flops(device, precision.dtype) if main else 1.0
    tokens_per_epoch = int(corpus.stats.tokens) if getattr(corpus.stats, "tokens", None) else None
    if main:
        run_dir.write_status(state="running", step=state["step"], total=None if plan_at_first_step else max_steps,
                             phase="measuring_speed" if plan_at_first_step else
                             ("compiling" if loss_fn.compiled else "training"),
                             device=describe(device, cfg.precision), precision=cfg.precision, params=total_params,
                             trainable_params=trainable, tokens_per_epoch=tokens_per_epoch,
                             train_rows=len(corpus.train), val_rows=len(corpus.validation), kind=corpus.kind,
                             world=info.world, objective=objective.name)
        log(f"{cfg.mode}: {total_params:,} parameters ({trainable:,} trainable) on {describe(device, cfg.precision)}; "
            f"{len(corpus.train):,} train rows, {len(corpus.validation):,} validation rows; "
            + ("steps" if plan_at_first_step else f"{max_steps} steps")
            + (f" of {stream.global_batch} prompts x {cfg.grpo.group_size} answers" if cfg.objective == "grpo"
               else f" of {stream.global_batch} rows x {seq_len} tokens"))

    # A compiled model's first evaluation in this process compiles its evaluation shapes too (5 s of
    # a 90 s budget against 1 s for the next): the budget keeps its guess until the second.
    first_eval_compiles = bool(loss_fn.compiled)

    eval_s = 0.0  # the last evaluation's seconds in this process

    def do_eval(step: int) -> dict:
        nonlocal first_eval_compiles, eval_s
        eval_start = time.perf_counter()
        phase("evaluating")
        with averaged(step):
            figures = objective.evaluate(model, eval_batches(corpus.validation, cfg.batch_size, cfg.eval_batches,
                                                             tokenizer.pad_token_id))
        record = {"step": step, **{f"val_{k}": v for k, v in dist.means(figures, info).items()}}
        if main:
            append_metrics(record)
            if getattr(objective, "samples", None):  # GRPO: a few held-out answers with their rewards
                run_dir.append_samples([{"step": step, **sample} for sample in objective.samples])
            log(f"eval step {step}: " + " ".join(f"{k[4:]} {v:.4g}" for k, v in record.items() if k != "step"))
        eval_s = time.perf_counter() - eval_start
        if budget is not None and not first_eval_compiles:
            budget.eval_s = dist.mean(eval_s, info)  # all ranks agree
        first_eval_compiles = False
        return record

    save_s = None  # the last save's seconds in this process

    def do_save(step: int) -> Path | None:
        nonlocal save_s
        save_start = time.perf_counter()
        phase("saving")
        path = _save(step)
        save_s = dist.mean(time.perf_counter() - save_start, info)  # all ranks agree
        if budget is not None:
            budget.save_s = save_s
        return path

    def _save(step: int) -> Path | None:
        tensors = average.state_tensors() if average is not None and main else None  # (before the swap)
        with averaged(step):
            return _save_model(step, tensors)

    def _save_model(step: int, average_tensors: dict | None) -> Path | None:
        model_sd = full_model_state(model, base_model, info, cfg)
        optim_sd = full_optimizer_state(model, optimizer, info, cfg)
        if not main:
            return None

        def write_model(folder: Path):
            if cfg.adapter_kind:  # (under FSDP from the gathered weights: the model's own are shards)
                # the adapter holds LoRA and any added tokens' rows, never a copy of the embedding table
                base_model.save_pretrained(folder, save_embedding_layers=False,
                                           **({"state_dict": model_sd} if model_sd is not None else {}))
                if cfg.objective == "classify":  # (a classifier's head is in the adapter, its labels beside it)
                    write_adapter_labels(folder, corpus.classes, cfg.classify.pooling)
            else:
                base_model.save_pretrained(folder, state_dict=model_sd)
                if cfg.objective != "classify":  # a classifier generates nothing
                    write_generation_config(folder, tokenizer, base_model.config)
            save_tokenizer(tokenizer, folder)  # (the form transformers 4.x loads too)

        trainer_state = {**state, "step": step, "epoch": stream.epoch_at(step), "wall_s": wall()}
        path = save_checkpoint(run_dir.checkpoints, step, write_model, optim_sd, trainer_state, cfg.keep_checkpoints,
                               average_tensors)
        log(f"saved {path.name}")
        return path

    step = state["step"]
    state_start = step
    wall_before = state.get("wall_s", 0.0)
    # where the interval evaluations and saves count from (a resumed run: its last multiple; a fresh
    # one's first automatic evaluation is placed by first_eval_from at every step until it happens,
    # so that a re-planned run places it anew)
    last_eval_at, last_save_at = step - step % eval_every, step - step % save_every
    evaluated = step > 0
    bad_in_row = 0
    window_loss, window_steps, window_tokens, window_metrics = 0.0, 0, 0, {}
    window_start = time.perf_counter()
    elapsed_before = state.get("elapsed_s", 0.0)  # a resumed run's training seconds before this process
    run_start = time.perf_counter() - elapsed_before
    last_status = 0.0
    last_eval: dict = {}
    # seconds of the last steps, a slice plans with them; this process's first step (its warm-up) only until
    # a second one is timed
    recent_steps = collections.deque(maxlen=SLICE_STEP_WINDOW)
    first_step_s = None
    # a CPU run on the threads PyTorch chose gives a core up while another process keeps it busy (core_share.py)
    cores = CoreShare.start(torch.get_num_threads()) if (
        device == "cpu" and not cfg.threads and info.world == 1 and slice_s is None) else None
    model.train()
    stopped = False

    while step < max_steps:
        step_start = time.perf_counter()
        lr = lr_at(step, max_steps, cfg.optim.lr, warmup, cfg.optim.min_lr_ratio)
        for group in optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)  # (a classifier's new head may have a scale of its own)
        micro, step_metrics = step_batches(objective, model, stream, step)
        step_loss, step_tokens, finite = 0.0, 0, True
        for _ in range(updates):  # GRPO makes several passes over one batch of rollouts; others one
            loss_value, tokens, metrics, grad_norm, finite = _update(model, base_model, optimizer, scaler, micro,
                                                                      device, precision, loss_fn, cfg, info)
            if not finite:
                break
            step_loss += loss_value / updates
            step_tokens += tokens
            for name, value in metrics.items():
                step_metrics[name] = step_metrics.get(name, 0.0) + value / updates
        if not finite:
            bad_in_row += 1
            log(f"step {step}: non-finite loss or gradient, step skipped ({bad_in_row} in a row)")
            if bad_in_row >= cfg.max_bad_steps:
                raise TrainingError(
                    f"the loss or gradients were NaN/Inf for {bad_in_row} steps in a row (at step {step}); "
                    "the run stopped. Lower optim.lr, use precision fp32, or check the data; "
                    "the last checkpoint is kept")
            continue
        bad_in_row = 0
        step += 1
        if average is not None:
            average.update(step)
        step_loss = dist.mean(step_loss, info)
        step_tokens = int(dist.mean(step_tokens, info) * info.world)
        state["step"], state["tokens_seen"] = step, state["tokens_seen"] + step_tokens
        window_loss += step_loss
        window_steps += 1
        window_tokens += step_tokens
        for name, value in step_metrics.items():
            window_metrics[name] = window_metrics.get(name, 0.0) + value
        last = step == max_steps

        now = time.perf_counter()
        elapsed = now - run_start
        state["elapsed_s"] = elapsed
        if cores is not None and trial is None and (kept := cores.after_step(now - step_start)):
            log(f"other processes keep {kept.others:.1f} of {len(cores.cpus)} cores busy: a step took "
                f"{kept.fewer_s:.3g}s on {kept.fewer} of {cores.most} threads, {kept.all_s:.3g}s on all; training "
                f"on {kept.threads}" if kept.fewer else f"the cores are free again: training on {kept.threads} threads")
            if main:  # the page's Device line names the threads in force
                run_dir.write_status(device=describe(device, cfg.precision))
        if first_step_s is None:
            first_step_s = now - step_start
        else:
            recent_steps.append(now - step_start)
        if plan_at_first_step:  # the first step (eager) was the speed probe: plan the run from it
            plan_at_first_step = False
            timing = dist.means({"step_s": now - step_start, "left_s": budget.left(now)}, info)  # all ranks agree
            fit = int(PROBE_PLAN_SHARE * timing["left_s"] / timing["step_s"]) if timing["left_s"] > 0 else 0
            # a first step is often the slowest by far (a 20-s GRPO step before 2.5-s ones): the plan reaches
            # the first re-size from measured steps at least, and the deadline check ends a truly slow run
            fit = max(fit, TIME_FROM_STEP + ROUGH_RESIZE_STEPS) if timing["left_s"] > timing["step_s"] else 0
            max_steps, budget.rough, budget.rough_step_s = step + fit, True, timing["step_s"]
            state["max_steps"] = max_steps
            log(f"first step took {timing['step_s']:.2f}s -> {max_steps} steps planned in {cfg.time_budget_s:.0f}s")
            if state_start == 0 and choose_dropout(cfg, base_model, max_steps, stream, log) and main:
                cfg.save(run_dir.config_file)
            warmup, eval_every, save_every, log_every = run_intervals(max_steps)
            trial, loss_fn.compiled = start_compiling(max_steps)
            first_eval_compiles = bool(loss_fn.compiled)
            phase("compiling" if loss_fn.compiled else "training")
            last = step == max_steps
        if not evaluated:
            last_eval_at = first_eval_from(cfg, max_steps, eval_every)
        # due by the intervals this step ran under: a re-size below changes them, and must not
        # skip the evaluation (or save) it was planned around, unless that evaluation would end the run
        eval_due = interval_due(step, last_eval_at, eval_every, max_steps)
        save_due = interval_due(step, last_save_at, save_every, max_steps)
        compile_step = trial is not None and trial.compiling  # (its seconds are not a training step's)
        if trial is not None:
            trial, first_eval_compiles = _compile_trial_step(trial, now - step_start, base_model, loss_fn, log,
                                                             first_eval_compiles)
            if trial is not None and trial.compiling:
                phase("compiling")
        if timed:
            timing = dist.means({"step_s": now - step_start, "left_s": budget.left(now)}, info)  # one all-reduce
            if not compile_step:
                budget.record_step(timing["step_s"], step - state_start)  # all ranks agree ...
            seconds_left = timing["left_s"]  # ... on one figure
            resize = budget.due(evaluated=eval_due, planned_last=last)
            if resize or budget.no_time_for_another(seconds_left, eval_due, save_due):
                def plan(due_now: tuple[bool, bool]) -> tuple[int, float | None]:
                    return budget.steps_left(seconds_left, step, due_now, (last_eval_at, last_save_at),
                                             lambda total: run_intervals(total)[1:3], recent=last)

                left, planned_step_s = plan((eval_due, save_due)) if resize else (0, None)
                if not left and (eval_due or save_due):
                    # an interval evaluation or save due now would end the run here, with time left that
                    # steps can use: skip them, and the final ones come at the new last step (beside a
                    # test process, a 1-minute run whose evaluation took 6 s stopped 18 s early)
                    left, planned_step_s = plan((False, False))
                    if left:
                        # the next ones count from here, as if these had been held: otherwise they stay
                        # due, and a later step holds them and ends the run short of the step planned
                        skipped = " and ".join(n for n, due in (("evaluation", eval_due), ("save", save_due)) if due)
                        log(f"the {skipped} due at step {step} skipped: it would leave no time for another step")
                        if eval_due:
                            last_eval_at, evaluated = step, True
                        if save_due:
                            last_save_at = step
                        eval_due = save_due = False
                        resize = True
                extended = max_steps == step and bool(left)  # (the planned last step goes on)
                max_steps = step + left if left else step
                state["max_steps"] = max_steps
                warmup, eval_every, save_every, log_every = run_intervals(max_steps)
                if resize and (extended or not last):
                    log(f"measured {planned_step_s:.3f}s/step: run re-sized to {max_steps} steps to end "
                        f"within {cfg.time_budget_s:.0f}s ({seconds_left:.0f}s left)")
                last = step == max_steps
        tokens_per_s = window_tokens / max(now - window_start, 1e-9)
        eta = (max(0.0, budget.left(now)) if timed and not last  # a timed run ends at its deadline
               else (max_steps - step) * (now - window_start) / max(window_steps, 1))
        if step % log_every == 0 or last:
            metrics = dist.means({k: v / window_steps for k, v in window_metrics.items()}, info)
            record = {"step": step, "loss": window_loss / window_steps, **metrics, "lr": lr, "grad_norm": grad_norm,
                      "tokens_per_s": tokens_per_s, "mfu": fpt * tokens_per_s / peak,
                      "tokens": state["tokens_seen"], "epoch": stream.epoch_at(step), "elapsed_s": elapsed}
            if main:
                append_metrics(record)
            window_loss, window_steps, window_tokens, window_metrics = 0.0, 0, 0, {}
            window_start = time.perf_counter()
        if progress and main:
            progress(step, max_steps, {"loss": step_loss, "lr": lr, "tokens_per_s": tokens_per_s, "eta_s": eta})
        if eval_due or last:
            last_eval, last_eval_at, evaluated = do_eval(step), step, True
        # every rank joins this all-reduce each step: a rank whose own flag is already set must not skip
        # it (the signal reaches ranks at different moments), or the others wait for it forever
        stop_now = dist.mean(float(stop.requested), info) > 0 if info.enabled else stop.requested
        sliced = slice_s is not None and not last and not stop_now and slice_spent(
            time.perf_counter(), started + SLICE_USABLE * slice_s, max(recent_steps, default=first_step_s), save_s,
            eval_s, slice_s)
        stop_now = stop_now or sliced
        if save_due or last or stop_now:
            do_save(step)
            last_save_at = step
        if main and (now - last_status > 1.0 or last or stop_now or eval_due or save_due or step - state_start <= 2):
            last_status = now
            run_dir.write_status(step=step, total=max_steps, loss=step_loss, lr=lr, tokens_per_s=tokens_per_s,
                                 phase="finishing" if last else ("compiling" if (
                                     loss_fn.compiled and step - state_start < 2) or (
                                     trial is not None and trial.compiling) else "training"),
                                 eta_s=eta, elapsed_s=elapsed, wall_s=wall(),
                                 tokens=state["tokens_seen"],
                                 epoch=stream.epoch_at(step), **{k: v for k, v in last_eval.items() if k != "step"})
        if stop_now and not last:
            stopped = not sliced
            break
    if step < max_steps and not stopped:  # the slice is spent: the next one resumes from this save
        if main:
            log(f"GPU slice spent at step {step} of {max_steps}; the next slice resumes here")
            return run_dir.write_status(state="paused", step=step, total=max_steps, eta_s=None)
        return {}

    if timed and budget.timed_steps >= ROUGH_STEPS_TO_REMEMBER and main:  # the next run of this shape plans with it
        step_times.remember(step_cache, step_key, budget.step_seconds / budget.timed_steps)
    if average is not None:  # the run has ended: its model is what it saved
        average.keep_average(step)
    final_figures = _final_report(objective, model, corpus, cfg, tokenizer, run_dir, step, main, log)
    final = latest_checkpoint(run_dir.checkpoints) if main else None
    if main:
        total_wall = wall()
        if stopped:
            run_dir.log_event(RunEvent("stopped", step=step))  # each face says how to go on in its own words
        elif state_start:  # resumed (a GPU slice, a restart): the processes before this one count too
            log(f"finished: {step} steps in {total_wall:.0f}s of wall time in all, {state['elapsed_s']:.0f}s of it in "
                f"the training loop (this process resumed at step {state_start})")
        else:
            log(f"finished: {step} steps in {total_wall:.0f}s of wall time ({state['elapsed_s'] - elapsed_before:.0f}s "
                "of it in the training loop, the rest loading and preparing)")
        return run_dir.write_status(state="stopped" if stopped else "finished", step=step, total=max_steps,
                                    wall_s=total_wall,
                                    final_checkpoint=str(final) if final else None,
                                    eta_s=0 if not stopped else None, **final_figures)
    return {}


def _compile_trial_step(trial: CompileTrial, step_s: float, base_model, loss_fn: LossWithFallback, log,
                        first_eval_compiles: bool) -> tuple[CompileTrial | None, bool]:
    """Tell the compile trial a step's seconds and do what it says: compile the layers, keep them, or
    go back to eager. Returns (the trial, None once it has decided; whether the next evaluation compiles)."""
    action = trial.after_step(step_s)
    if action == "compile":
        loss_fn.compiled = compile_now(base_model, log)
        return trial, bool(loss_fn.compiled)
    if action == "keep":
        log(f"compiled layers kept: {trial.compiled_s:.3f}s a step against {trial.eager_s:.3f}s eager")
        return None, first_eval_compiles
    if action == "eager":
        eager_again(loss_fn.compiled)
        loss_fn.compiled = []
        log(f"compiled layers dropped: {trial.compiled_s:.3f}s a step against {trial.eager_s:.3f}s eager "
            f"(less than {100 * MIN_GAIN:.0f} % faster); running eager")
        return None, False
    return trial, first_eval_compiles


CONFUSION_FILE = "confusion.json"  # a classifier run's final report: labels, matrix (rows true, columns predicted)


def _final_report(objective, model, corpus, cfg: TrainConfig, tokenizer, run_dir: RunDir, step: int, main: bool,
                  log) -> dict:
    """The objective's report over every validation row (classify: with the confusion matrix), saved as
    confusion.json; its figures as val_* for status.json. Nothing for objectives without a report."""
    if not hasattr(objective, "report") or not len(corpus.validation):
        return {}
    report = objective.report(model, eval_batches(corpus.validation, cfg.batch_size, 0, tokenizer.pad_token_id))
    if not main:
        return {}
    report = {"step": step, **report}
    (run_dir.path / CONFUSION_FILE).write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
    figures = {f"val_{name}": report[name] for name in ("loss", "accuracy", "macro_f1")}
    log(f"final evaluation on all {report['rows']:,} validation rows: "
        + " ".join(f"{k[4:]} {v:.4g}" for k, v in figures.items()) + f"; confusion matrix in {CONFUSION_FILE}")
    return {**figures, "confusion": CONFUSION_FILE}


def _saved_parameters(model, cfg: TrainConfig) -> tuple[int, int]:
    """(weights a checkpoint writes, weights that train): an adapter run writes only its adapter."""
    trainable, total = count_parameters(model)
    return (trainable if cfg.adapter_kind else total), trainable


def _update(model, base_model, optimizer, scaler, micro: list, device, precision: Precision, loss_fn, cfg, info):
    """One optimizer update over a step's micro-batches: forward/backward each, unscale and clip,
    then step, unless the loss or gradient is not finite on any process (then nothing changes).

    Returns (mean loss, tokens, objective metrics, gradient norm, whether it was applied)."""
    loss, tokens, metrics, finite = _accumulate(model, micro, device, precision, scaler, loss_fn)
    grad_norm = float("nan")
    if finite:
        scaler.unscale_(optimizer)
        grad_norm = _clip(trainable_parameters(base_model), cfg.optim.grad_clip)
        finite = math.isfinite(grad_norm) or scaler.is_enabled()
    finite = dist.mean(1.0 if finite else 0.0, info) == 1.0
    if finite:
        scaler.step(optimizer)
    scaler.update()  # a skipped step lowers an fp16 scale; without a scaler it does nothing
    optimizer.zero_grad(set_to_none=True)
    return loss, tokens, metrics, grad_norm, finite


def _accumulate(model, micro_batches, device, precision: Precision, scaler, loss_fn) -> tuple[float, int, dict, bool]:
    """Forward and backward over one optimizer step's micro-batches, gradients summed.

    Returns (mean loss, tokens, mean of each objective metric, every loss finite). A non-finite
    loss still runs a (zero) backward, so DDP ranks stay in step; the caller skips the update.
    """
    micro = list(micro_batches)
    total, tokens, finite, metrics = 0.0, 0, True, {}
    for i, batch in enumerate(micro):
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        sync = i == len(micro) - 1 or not hasattr(model, "no_sync")
        with contextlib.nullcontext() if sync else model.no_sync():
            with precision.autocast():
                loss, batch_metrics = loss_fn(model, batch)
            ok = bool(torch.isfinite(loss))
            finite = finite and ok
            scaler.scale((loss if ok else loss.nan_to_num() * 0) / len(micro)).backward()
        total += loss.item() / len(micro) if ok else 0.0
        for name, value in batch_metrics.items():
            metrics[name] = metrics.get(name, 0.0) + float(value) / len(micro)
        tokens += int(batch["attention_mask"].sum()) if "attention_mask" in batch else batch["input_ids"].numel()
    return total, tokens, metrics, finite


def _clip(params: list, max_norm: float) -> float:
    """Global gradient norm, clipped to max_norm when max_norm > 0."""
    if max_norm > 0:
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    return float(torch.norm(torch.stack([p.grad.norm() for p in params if p.grad is not None])))

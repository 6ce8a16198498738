"""The one training loop. Pretrain, full fine-tune, LoRA and QLoRA are options of it:
they differ in how the model is built (modes.py) and what the data looks like
(minimind.data), not in this code.

Each optimizer step: for each micro-batch, forward under autocast and backward;
skip the step if the loss or the gradient norm is not finite; clip; AdamW; set
the next learning rate from the schedule. Log, evaluate and checkpoint at their
intervals and always after the last step. SIGTERM/SIGINT end the run after the
current step with a checkpoint; `resume=True` continues from the newest one.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from pathlib import Path

import torch

from ..errors import MiniMindError, TrainingError
from . import distributed as dist
from .batches import BatchStream, eval_batches
from .checkpoint import latest_checkpoint, load_trainer_state, remove_partial, save_checkpoint
from .config import TrainConfig
from .modes import ADAPTER_MODES, build_model, count_parameters, trainable_parameters
from .perf import flops_per_token, matmul_peak_flops
from .precision import Precision, bf16_supported, describe, pick_device
from .run_dir import RunDir, new_run_id
from .budget import Budget
from .schedule import default_warmup, lr_at
from .sizing import choose_preset, parameter_count, pretrain_lr


def compute_loss(model, batch: dict) -> torch.Tensor:
    """Mean next-token loss of one micro-batch (MoE balancing loss included)."""
    return model(**batch).loss


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


def train(config: TrainConfig, resume: bool = False, progress=None) -> dict:
    """Run (or resume) training as configured. Returns the final status dict.

    `progress(step, total, info)` is called after every optimizer step on the main process.
    """
    started = time.perf_counter()  # a time budget counts from here
    device = pick_device(config.device)
    info, device = dist.init(device)
    run = RunDir(Path(config.run_dir or Path("runs") / new_run_id()))
    if resume and not run.config_file.is_file():
        raise TrainingError(f"{run.path}: nothing to resume (no config.yaml in that run folder)")
    cfg = config.resolved(device.split(":")[0], bf16_supported(device))
    cfg.run_dir = str(run.path)
    if info.is_main:
        _start_run_folder(run, cfg, resume)
    threads = torch.get_num_threads()
    clean = False
    try:
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        with _StopFlag() as stop:
            status = _train(cfg, run, info, device, resume, stop, progress, started)
        clean = True
        return status
    except BaseException as err:
        message = str(err) if isinstance(err, MiniMindError) else f"{type(err).__name__}: {err}"
        if info.is_main:
            with contextlib.suppress(OSError):  # a folder that cannot be written cannot take the news
                run.log("FAILED: " + message)  # a bug's traceback goes to stderr (the job's stdout.log), not here
                run.write_status(state="failed", error=message or type(err).__name__)
        raise
    finally:
        torch.set_num_threads(threads)
        dist.finish(info, clean)


def _start_run_folder(run: RunDir, cfg: TrainConfig, resume: bool) -> None:
    """Create (or reopen) the run folder and mark it running; an unwritable folder is a
    TrainingError, and is marked failed when at least its status can still be written."""
    try:
        run.create()
        if not resume:
            cfg.save(run.config_file)
        run.write_status(state="running", pid=os.getpid(), mode=cfg.mode, run_dir=str(run.path),
                         error=None, started=time.time())
    except OSError as err:
        message = (f"cannot write into the run folder {run.path.name} ({err.strerror or err}); "
                   "choose a writable folder (or free disk space), then start or resume the run")
        with contextlib.suppress(OSError):
            run.write_status(state="failed", error=message)
        raise TrainingError(message) from None


def _prepare_tokenizer(cfg: TrainConfig, run: RunDir, info):
    from ..checkpoint import load_tokenizer_for
    from ..tokenizer import load_tokenizer, train_tokenizer

    own = run.path / "tokenizer"
    if cfg.model.tokenizer:
        return load_tokenizer(cfg.model.tokenizer)
    if cfg.model.init_from:
        return load_tokenizer_for(cfg.model.init_from)
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


def _prepare_data(cfg: TrainConfig, tokenizer, info):
    from ..data import DataConfig, prepare_corpus

    data_config = DataConfig(kind=cfg.data.kind, text_field=cfg.data.text_field, split=cfg.data.split,
                             seq_len=cfg.data.seq_len, val_fraction=cfg.data.val_fraction,
                             seed=cfg.data.seed, strict=cfg.data.strict, max_skipped=cfg.data.max_skipped,
                             cache_dir=cfg.data.cache_dir)
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
                          budget: Budget | None, log) -> bool:
    """Fill `model.preset: auto` (and an unset learning rate) of a new model from what the run can
    afford (training/sizing.py). Returns whether anything was chosen. With a time budget each
    candidate size is timed by a short speed probe on this device; with a step count or epochs
    the planned tokens are known without one."""
    if cfg.mode != "pretrain" or cfg.model.init_from:
        return False
    chose = False
    if cfg.model.preset == "auto":
        tokens_per_step = cfg.batch_size * cfg.grad_accum * info.world * cfg.data.seq_len

        def planned_tokens(preset: str) -> float:
            if cfg.max_steps or budget is None:
                steps = cfg.max_steps or cfg.epochs * BatchStream(
                    corpus.train, cfg.batch_size, cfg.grad_accum, cfg.seed, tokenizer.pad_token_id,
                    info.rank, info.world).steps_per_epoch()
                return steps * tokens_per_step
            trial = TrainConfig.from_dict({**cfg.to_dict(), "model": {**cfg.to_dict()["model"], "preset": preset}})
            model = build_model(trial, tokenizer, device, precision.dtype).train()
            stream = BatchStream(corpus.train, cfg.batch_size, cfg.grad_accum, cfg.seed, tokenizer.pad_token_id,
                                 info.rank, info.world)
            per_step = dist.mean(_speed_probe(model, stream, precision, steps=2), info)
            del model
            return 0.9 * dist.mean(budget.left(time.perf_counter()), info) / per_step * tokens_per_step

        choice = choose_preset(planned_tokens, lambda preset: parameter_count(preset, len(tokenizer),
                                                                               cfg.model.overrides))
        cfg.model.preset, chose = choice.preset, True
        log(choice.describe())
    if cfg.optim.lr is None:
        cfg.optim.lr, chose = pretrain_lr(cfg.model.preset), True
    return chose


def _optimizer(model, cfg: TrainConfig, device: str):
    params = trainable_parameters(model)
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.optim.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    kwargs = dict(lr=cfg.optim.lr, betas=(cfg.optim.beta1, cfg.optim.beta2), eps=cfg.optim.eps)
    fused = device.startswith("cuda") or device == "cpu"
    if fused and not any(hasattr(p, "device_mesh") for p in params):  # DTensors (FSDP) take foreach
        try:
            return torch.optim.AdamW(groups, fused=True, **kwargs)
        except (RuntimeError, TypeError):
            pass
    return torch.optim.AdamW(groups, **kwargs)


def _speed_probe(model, stream: BatchStream, precision: Precision, steps: int = 3) -> float:
    """Seconds per optimizer step, from forward+backward passes that change no weights."""
    times = []
    for step in range(steps + 1):
        start = time.perf_counter()
        for batch in stream.micro_batches(step):
            with precision.autocast():
                loss = compute_loss(model, _to(batch, next(model.parameters()).device))
            loss.backward()
        times.append(time.perf_counter() - start)
    model.zero_grad(set_to_none=True)
    return sorted(times[1:])[len(times[1:]) // 2] * 1.1  # + optimizer step


def _to(batch: dict, device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


@torch.no_grad()
def evaluate_split(model, dataset, batch_size: int, limit: int, pad_id: int, precision: Precision,
                   device) -> float:
    """Mean next-token loss per predicted token over the first `limit` validation batches."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for batch in eval_batches(dataset, batch_size, limit, pad_id):
        batch = _to(batch, device)
        with precision.autocast():
            logits = model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask")).logits
        targets = batch["labels"][:, 1:]
        nll = torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                                                targets.reshape(-1), ignore_index=-100, reduction="sum")
        total += nll.item()
        count += int((targets != -100).sum())
    model.train(was_training)
    return total / max(count, 1)


def _train(cfg: TrainConfig, run: RunDir, info, device: str, resume: bool, stop: _StopFlag, progress,
           started: float):
    main = info.is_main
    log = run.log if main else (lambda _msg: None)
    torch.manual_seed(cfg.seed)
    precision = Precision(cfg.precision, device.split(":")[0])
    tokenizer = _prepare_tokenizer(cfg, run, info)
    corpus = _prepare_data(cfg, tokenizer, info)
    budget = Budget.start(cfg.time_budget_s, started) if cfg.time_budget_s > 0 else None
    if choose_new_model_size(cfg, tokenizer, corpus, device, precision, info, budget, log) and main:
        cfg.save(run.config_file)  # a resumed run builds the size chosen now
    model = build_model(cfg, tokenizer, device, precision.dtype)
    base_model = model

    checkpoint = None
    if resume:
        remove_partial(run.checkpoints)
        checkpoint = latest_checkpoint(run.checkpoints)
        if checkpoint is not None:
            _load_weights(base_model, checkpoint, cfg.mode)
    if cfg.grad_checkpointing:
        getattr(base_model, "get_base_model", lambda: base_model)().activation_checkpointing_enable()
        if cfg.mode in ADAPTER_MODES:
            base_model.enable_input_require_grads()
    model = dist.wrap(base_model, info, cfg.distributed, device)
    optimizer = _optimizer(base_model, cfg, device)
    scaler = precision.grad_scaler()
    stream = BatchStream(corpus.train, cfg.batch_size, cfg.grad_accum, cfg.seed, tokenizer.pad_token_id,
                         info.rank, info.world)

    state = {"step": 0, "tokens_seen": 0, "elapsed_s": 0.0, "max_steps": cfg.max_steps}
    if checkpoint is not None:
        state, optim_state = load_trainer_state(checkpoint)
        _load_optimizer(optimizer, optim_state, model, cfg)
        if main:
            run.truncate_metrics_after(state["step"])
        log(f"resumed from {checkpoint.name} (step {state['step']})")
    elif resume:
        if main:
            run.truncate_metrics_after(-1)  # nothing was kept: the curve starts again from step 0
        log("no complete checkpoint yet: starting from step 0")

    max_steps = state.get("max_steps") or cfg.max_steps
    if budget is not None and checkpoint is not None:
        budget = Budget.start(cfg.time_budget_s, started, already_used=state.get("elapsed_s", 0.0))
    if not max_steps and budget is not None:
        per_step = dist.mean(_speed_probe(model, stream, precision), info)  # all ranks agree
        left = dist.mean(budget.left(time.perf_counter()), info)
        max_steps = max(1, int(0.9 * left / per_step))  # rough: re-sized from measured steps
        log(f"speed probe: {per_step:.2f}s/step -> {max_steps} steps in {cfg.time_budget_s:.0f}s")
    if not max_steps:
        max_steps = max(1, math.ceil(cfg.epochs * stream.steps_per_epoch()))
    state["max_steps"] = max_steps

    # An evaluation reads `eval_batches` batches forward only: about a third of a training step
    # each. Automatic intervals keep the evaluations to ~EVAL_SHARE of the run, which matters
    # most for a short time budget (10 evaluations of 20 batches would eat most of a 2-minute run).
    val_batches = math.ceil(len(corpus.validation) / cfg.batch_size)
    eval_cost_steps = min(cfg.eval_batches or val_batches, val_batches) / (3 * cfg.grad_accum)  # per rank
    min_eval_every = math.ceil(eval_cost_steps / EVAL_SHARE)

    def intervals(total: int) -> tuple[int, int, int, int]:
        """warmup, eval, save and log intervals for a run of `total` steps."""
        return (cfg.optim.warmup_steps if cfg.optim.warmup_steps is not None else default_warmup(total),
                cfg.eval_every or max(1, min(total, max(total // 10, min_eval_every))), cfg.save_every or max(1, total // 5),
                cfg.log_every or max(1, min(10, total // 50)))

    warmup, eval_every, save_every, log_every = intervals(max_steps)
    # With a time budget, the probe (eager, before compilation, maybe on a busy machine) only
    # sizes the run roughly; it is re-sized from measured steps, evaluations and saves (budget.py).
    timed = budget is not None and not cfg.max_steps

    forward = _Forward(_compile_layers(base_model, cfg, max_steps, log), log)
    trainable, total_params = count_parameters(base_model)
    model_config = getattr(base_model, "config", None)
    seq_len = cfg.data.seq_len
    fpt = flops_per_token(model_config, seq_len, trainable / max(total_params, 1))
    peak = matmul_peak_flops(device, precision.dtype) if main else 1.0
    tokens_per_epoch = int(corpus.stats.tokens) if getattr(corpus.stats, "tokens", None) else None
    # bits per character of the validation text (for chat: of the assistant replies)
    bpc_factor = corpus.val_tokens / corpus.val_characters / math.log(2) if corpus.val_characters else None
    if main:
        run.write_status(state="running", step=state["step"], total=max_steps, device=describe(device, cfg.precision),
                         precision=cfg.precision, params=total_params, trainable_params=trainable,
                         tokens_per_epoch=tokens_per_epoch, train_rows=len(corpus.train),
                         val_rows=len(corpus.validation), kind=corpus.kind, world=info.world)
        log(f"{cfg.mode}: {total_params:,} parameters ({trainable:,} trainable) on {describe(device, cfg.precision)}; "
            f"{len(corpus.train):,} train rows, {len(corpus.validation):,} validation rows; "
            f"{max_steps} steps of {stream.global_batch} rows x {seq_len} tokens")

    def do_eval(step: int) -> dict:
        eval_start = time.perf_counter()
        loss = evaluate_split(model, corpus.validation, cfg.batch_size, cfg.eval_batches,
                              tokenizer.pad_token_id, precision, device)
        loss = dist.mean(loss, info)
        record = {"step": step, "val_loss": loss, "val_ppl": math.exp(min(loss, 50))}
        if bpc_factor:
            record["val_bpc"] = loss * bpc_factor
        if main:
            run.append_metrics(record)
            log("eval step {step}: loss {val_loss:.4f} ppl {val_ppl:.2f}".format(**record)
                + (f" bpc {record['val_bpc']:.3f}" if "val_bpc" in record else ""))
        if budget is not None:
            budget.eval_s = dist.mean(time.perf_counter() - eval_start, info)
        return record

    def do_save(step: int) -> Path | None:
        save_start = time.perf_counter()
        path = _save(step)
        if budget is not None:
            budget.save_s = dist.mean(time.perf_counter() - save_start, info)  # all ranks agree
        return path

    def _save(step: int) -> Path | None:
        model_sd = _full_model_state(model, base_model, info, cfg)
        optim_sd = _full_optimizer_state(model, optimizer, info, cfg)
        if not main:
            return None
        unwrapped = base_model

        def write_model(folder: Path):
            if cfg.mode in ADAPTER_MODES:
                unwrapped.save_pretrained(folder)
            else:
                unwrapped.save_pretrained(folder, state_dict=model_sd)
                _write_generation_config(folder, tokenizer)
            tokenizer.save_pretrained(folder, save_jinja_files=False)

        trainer_state = {**state, "step": step, "epoch": stream.epoch_at(step)}
        path = save_checkpoint(run.checkpoints, step, write_model, optim_sd, trainer_state, cfg.keep_checkpoints)
        log(f"saved {path.name}")
        return path

    step = state["step"]
    state_start = step
    bad_in_row = 0
    window_loss, window_steps, window_tokens = 0.0, 0, 0
    window_start = time.perf_counter()
    run_start = time.perf_counter() - state.get("elapsed_s", 0.0)
    last_status = 0.0
    last_eval: dict = {}
    model.train()
    stopped = False

    while step < max_steps:
        step_start = time.perf_counter()
        lr = lr_at(step, max_steps, cfg.optim.lr, warmup, cfg.optim.min_lr_ratio)
        for group in optimizer.param_groups:
            group["lr"] = lr
        step_loss, step_tokens, finite = _accumulate(model, stream.micro_batches(step), device, precision,
                                                     scaler, forward)
        grad_norm = float("nan")
        if finite:
            scaler.unscale_(optimizer)
            grad_norm = _clip(trainable_parameters(base_model), cfg.optim.grad_clip)
            finite = math.isfinite(grad_norm) or scaler.is_enabled()
        finite = dist.mean(1.0 if finite else 0.0, info) == 1.0
        if not finite:
            optimizer.zero_grad(set_to_none=True)
            if scaler.is_enabled():
                scaler.update()
            bad_in_row += 1
            log(f"step {step}: non-finite loss or gradient, step skipped ({bad_in_row} in a row)")
            if bad_in_row >= cfg.max_bad_steps:
                raise TrainingError(
                    f"the loss or gradients were NaN/Inf for {bad_in_row} steps in a row (at step {step}); "
                    "the run stopped. Lower optim.lr, use precision fp32, or check the data; "
                    "the last checkpoint is kept")
            continue
        bad_in_row = 0
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        step_loss = dist.mean(step_loss, info)
        step_tokens = int(dist.mean(step_tokens, info) * info.world)
        state["step"], state["tokens_seen"] = step, state["tokens_seen"] + step_tokens
        window_loss += step_loss
        window_steps += 1
        window_tokens += step_tokens
        last = step == max_steps

        now = time.perf_counter()
        elapsed = now - run_start
        state["elapsed_s"] = elapsed
        if timed:
            budget.record_step(dist.mean(now - step_start, info), step - state_start)  # all ranks agree
            seconds_left = dist.mean(budget.left(now), info)  # one figure for every rank
            resize = budget.due(evaluated=step % eval_every == 0)
            if resize or budget.no_time_for_another(seconds_left, step % eval_every == 0, step % save_every == 0):
                left = 0 if not resize else budget.steps_left(seconds_left, eval_every, save_every,
                                                              eval_cost_steps * budget.per_step())
                max_steps = max(step, step + left) if not last else max_steps
                state["max_steps"] = max_steps
                warmup, eval_every, save_every, log_every = intervals(max_steps)
                if resize:
                    log(f"measured {budget.per_step():.3f}s/step: run re-sized to {max_steps} steps to end "
                        f"within {cfg.time_budget_s:.0f}s ({seconds_left:.0f}s left)")
                last = step == max_steps
        tokens_per_s = window_tokens / max(now - window_start, 1e-9)
        eta = (max_steps - step) * (now - window_start) / max(window_steps, 1)
        if step % log_every == 0 or last:
            record = {"step": step, "loss": window_loss / window_steps, "lr": lr, "grad_norm": grad_norm,
                      "tokens_per_s": tokens_per_s, "mfu": fpt * tokens_per_s / peak,
                      "tokens": state["tokens_seen"], "epoch": stream.epoch_at(step), "elapsed_s": elapsed}
            if main:
                run.append_metrics(record)
            window_loss, window_steps, window_tokens, window_start = 0.0, 0, 0, time.perf_counter()
        if progress and main:
            progress(step, max_steps, {"loss": step_loss, "lr": lr, "tokens_per_s": tokens_per_s, "eta_s": eta})
        if step % eval_every == 0 or last:
            last_eval = do_eval(step)
        stop_now = stop.requested or (info.enabled and dist.mean(float(stop.requested), info) > 0)
        if step % save_every == 0 or last or stop_now:
            do_save(step)
        if main and (now - last_status > 1.0 or last or stop_now):
            last_status = now
            run.write_status(step=step, total=max_steps, loss=step_loss, lr=lr, tokens_per_s=tokens_per_s,
                             eta_s=eta, elapsed_s=elapsed, tokens=state["tokens_seen"],
                             epoch=stream.epoch_at(step), **{k: v for k, v in last_eval.items() if k != "step"})
        if stop_now and not last:
            stopped = True
            break

    final = latest_checkpoint(run.checkpoints) if main else None
    if main:
        if stopped:
            log(f"stopped at step {step} (checkpoint saved); resume with --resume")
        else:
            log(f"finished: {step} steps in {state['elapsed_s']:.0f}s")
        return run.write_status(state="stopped" if stopped else "finished", step=step, total=max_steps,
                                final_checkpoint=str(final) if final else None,
                                eta_s=0 if not stopped else None)
    return {}


class _Forward:
    """`compute_loss`, falling back to eager layers once if compiling them fails."""

    def __init__(self, compiled: list, log):
        self.compiled, self.log = compiled, log

    def __call__(self, model, batch: dict) -> torch.Tensor:
        try:
            return compute_loss(model, batch)
        except Exception as err:  # only a compilation failure is recoverable here
            if not self.compiled or not _is_compile_error(err):
                raise
            uncompile(self.compiled, self.log, err)
            self.compiled = []
            return compute_loss(model, batch)


def _accumulate(model, micro_batches, device, precision: Precision, scaler, forward) -> tuple[float, int, bool]:
    """Forward and backward over one optimizer step's micro-batches, gradients summed.

    Returns (mean loss, tokens, every loss finite). A non-finite loss still runs a
    (zero) backward, so DDP ranks stay in step; the caller skips the update.
    """
    micro = list(micro_batches)
    total, tokens, finite = 0.0, 0, True
    for i, batch in enumerate(micro):
        batch = _to(batch, device)
        sync = i == len(micro) - 1 or not hasattr(model, "no_sync")
        with contextlib.nullcontext() if sync else model.no_sync():
            with precision.autocast():
                loss = forward(model, batch)
            ok = bool(torch.isfinite(loss))
            finite = finite and ok
            scaler.scale((loss if ok else loss.nan_to_num() * 0) / len(micro)).backward()
        total += loss.item() / len(micro) if ok else 0.0
        tokens += int(batch["attention_mask"].sum()) if "attention_mask" in batch else batch["input_ids"].numel()
    return total, tokens, finite


def _clip(params: list, max_norm: float) -> float:
    """Global gradient norm, clipped to max_norm when max_norm > 0."""
    if max_norm > 0:
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    return float(torch.norm(torch.stack([p.grad.norm() for p in params if p.grad is not None])))


# Automatic evaluation intervals keep evaluations to about this share of the training time.
EVAL_SHARE = 0.05
MIN_STEPS_TO_COMPILE = 300  # compiling costs ~30 s on a CPU: worth it for longer runs only


def decoder_layers(model) -> list:
    """The model's decoder layers, under any peft / DDP wrapping."""
    for module in model.modules():
        layers = getattr(module, "layers", None)
        if isinstance(layers, torch.nn.ModuleList) and len(layers) and hasattr(layers[0], "self_attn"):
            return list(layers)
    return []


def _compile_layers(model, cfg: TrainConfig, max_steps: int, log) -> list:
    """torch.compile each decoder layer (regional compilation: one graph, reused by every
    layer), which fuses the norm, rotary, SwiGLU and residual arithmetic between matmuls."""
    want = cfg.compile == "on" or (cfg.compile == "auto" and max_steps >= MIN_STEPS_TO_COMPILE
                                   and cfg.mode != "qlora")
    if not want:
        return []
    layers = decoder_layers(model)
    for layer in layers:
        layer.compile()
    log(f"compiling {len(layers)} decoder layers (torch.compile)")
    return layers


def _is_compile_error(err: Exception) -> bool:
    return type(err).__module__.startswith(("torch._dynamo", "torch._inductor"))


def uncompile(layers: list, log, err: Exception) -> None:
    """Fall back to eager layers when compilation fails (e.g. no C++ compiler on this machine)."""
    for layer in layers:
        layer._compiled_call_impl = None
    log(f"torch.compile failed ({type(err).__name__}: {str(err).splitlines()[0][:200]}); running eager")


def _write_generation_config(folder: Path, tokenizer) -> None:
    from transformers import GenerationConfig

    eos = [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    eos = [i for i in eos if i is not None and i >= 0]
    GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=eos or tokenizer.eos_token_id,
                     pad_token_id=tokenizer.pad_token_id, do_sample=True, temperature=0.8, top_p=0.9,
                     top_k=40, repetition_penalty=1.1, max_new_tokens=256).save_pretrained(folder)


def _is_fsdp(cfg, info) -> bool:
    return info.enabled and cfg.distributed == "fsdp"


def _full_model_state(model, base_model, info, cfg) -> dict | None:
    if _is_fsdp(cfg, info):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if getattr(base_model.config, "tie_word_embeddings", False):
            full.pop("lm_head.weight", None)  # gathered as a separate copy; it is the embedding
        return full
    if cfg.mode in ADAPTER_MODES:
        return None
    return {k: v for k, v in base_model.state_dict().items()}


def _full_optimizer_state(model, optimizer, info, cfg) -> dict:
    if _is_fsdp(cfg, info):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(model, optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return optimizer.state_dict()


def _load_optimizer(optimizer, optim_state: dict, model, cfg) -> None:
    if _is_fsdp(cfg, dist.DistInfo(world=int(os.environ.get("WORLD_SIZE", "1")))):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        set_optimizer_state_dict(model, optimizer, optim_state_dict=optim_state,
                                 options=StateDictOptions(full_state_dict=True))
        return
    optimizer.load_state_dict(optim_state)


def _load_weights(model, folder: Path, mode: str) -> None:
    """Put a checkpoint's weights (full model or adapter) into the freshly built model."""
    from safetensors.torch import load_file

    if mode in ADAPTER_MODES:
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, load_file(str(folder / "adapter_model.safetensors")))
        return
    weights = load_file(str(folder / "model.safetensors"))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    missing = [k for k in missing if k != "lm_head.weight" or not model.config.tie_word_embeddings]
    if missing or unexpected:
        raise TrainingError(f"{folder}: checkpoint does not match the model "
                            f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    if model.config.tie_word_embeddings:
        model.tie_weights()

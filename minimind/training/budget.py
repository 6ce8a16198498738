"""A wall-clock budget for a training run that includes everything the run does.

The clock starts when the run's process starts (`python -m minimind train`; `train()`'s call
for a caller in its own process), so loading, preparing data, compiling, evaluating and saving
are all inside it, the final evaluation and save included. No step is spent on measuring
alone: the loop plans the run roughly from the seconds a step took before (step_times.py) or
from its own first, eager step, then re-sizes it from measured steps, evaluations and saves
(after its first few steps, then after each evaluation), and ends early if even one more step
would leave no time for the final evaluation and save.
Times are `time.perf_counter()` values the caller passes in (tests drive a fake clock); the
decisions take the seconds left as an argument, so that processes of a distributed run can
agree on one figure (their mean) and stop at the same step.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

from .schedule import default_warmup

# Re-sizing starts after this many steps (the first ones compile) and this share of the budget ...
TIME_FROM_STEP, FIRST_RESIZE_SHARE = 2, 0.05
# ... or, after a rough plan (a first step's time, a figure from before), after this many timed steps.
ROUGH_RESIZE_STEPS = 3
# An automatic evaluation interval is at most a third of the run, and the first evaluation comes
# at a tenth of it: a 2-minute run draws its validation curve while it trains (it drew one point,
# at the end, when evaluations were spaced by their cost alone).
MIN_INTERVAL_EVALS, FIRST_EVAL_SHARE = 3, 0.1
# Before a save has been timed, it is guessed from what it writes (the weights a run saves and
# the optimizer's two moments of each trainable one) at this many bytes a second, plus a fixed
# cost. (Three training steps, as it was, guessed 32 s for a LoRA GRPO step's 0.1-s adapter save.)
SAVE_BYTES_PER_S, SAVE_FIXED_S = 200e6, 0.3
# Automatic evaluation intervals keep evaluations to about this share of the training time.
EVAL_SHARE = 0.05
# A rough figure (a first eager step, a figure from before, an estimate's probe) only sizes a run
# roughly: it plans this share of the time left; measured steps re-size the run later.
PROBE_PLAN_SHARE = 0.9
# A re-size plans with the mean of the steps since the last one once there are this many: steps
# that turn faster late (the other core freed, caches warm) then buy the steps they can, where the
# mean of the whole run left a 30 s budget 1.05 s short.
RECENT_STEPS = 20


def planned_steps(cfg, steps_per_epoch: float, per_step: float | None = None,
                  seconds_left: float | None = None) -> int:
    """Optimizer steps of a run: `max_steps`, else what a time budget buys at a rough figure of
    seconds per step, else `epochs` passes over the training split. The estimate and the
    loop both plan with this."""
    if cfg.max_steps:
        return cfg.max_steps
    if cfg.time_budget_s > 0 and per_step:
        return max(1, int(PROBE_PLAN_SHARE * seconds_left / per_step))
    return max(1, math.ceil(cfg.epochs * steps_per_epoch))


def eval_every_at_least(cfg, validation_rows: int) -> int:
    """The shortest automatic evaluation interval that keeps evaluations to EVAL_SHARE of the
    run. An evaluation reads `eval_batches` batches forward only, about a third of a training
    step each (10 evaluations of 20 batches would eat most of a 2-minute run)."""
    return math.ceil(eval_cost_steps(cfg, validation_rows) / EVAL_SHARE)


def eval_cost_steps(cfg, validation_rows: int) -> float:
    """An evaluation's guessed cost in training steps (per rank), until one has been timed: a batch
    forward only, a third of a training step's; a GRPO batch, one answer a prompt where a step samples
    group_size of them and trains on them (guessed at a third, it stopped a 2-minute run after its first step)."""
    val_batches = math.ceil(validation_rows / cfg.batch_size)
    per_batch = 1 / cfg.grpo.group_size if cfg.objective == "grpo" else 1 / 3
    return min(cfg.eval_batches or val_batches, val_batches) * per_batch / cfg.grad_accum


def intervals(cfg, total: int, min_eval_every: int) -> tuple[int, int, int, int]:
    """(warmup, eval, save, log) intervals of a run of `total` steps; 0/None in the config is auto.
    The automatic evaluation interval keeps evaluations to EVAL_SHARE of the run (`min_eval_every`)
    but comes at least MIN_INTERVAL_EVALS times a run; automatic saves come ~5 times a run."""
    return (cfg.optim.warmup_steps if cfg.optim.warmup_steps is not None else default_warmup(total),
            cfg.eval_every or max(1, min(total // MIN_INTERVAL_EVALS, max(total // 10, min_eval_every))),
            cfg.save_every or max(1, total // 5),
            cfg.log_every or max(1, min(10, total // 50)))


def save_guess(saved_params: int, trainable_params: int) -> float:
    """Seconds a checkpoint is guessed to take before one is timed: its weights (4 bytes each, at most)
    and the optimizer's two moments of each trainable weight, at SAVE_BYTES_PER_S."""
    return SAVE_FIXED_S + (4 * saved_params + 8 * trainable_params) / SAVE_BYTES_PER_S


def first_eval_from(cfg, total: int, eval_every: int) -> int:
    """Where a fresh run's interval evaluations count from: with the automatic interval, so that the
    first falls at FIRST_EVAL_SHARE of the run (a negative step), but not before the steps that
    replace a rough plan's figure with measured ones (an evaluation right after a slow first step, on a
    busy machine, was timed slow too, and the two ended a 30-s run after that step); with a set
    interval, step 0."""
    if cfg.eval_every:
        return 0
    return max(TIME_FROM_STEP + ROUGH_RESIZE_STEPS, int(FIRST_EVAL_SHARE * total)) - eval_every


def interval_due(step: int, last_at: int, every: int, final_step: int) -> bool:
    """Is an interval evaluation (or save) due at `step`? `every` steps after the last one, unless
    the run's final one, which always happens, comes within half an interval. Counting from the
    last one, not by `step % every`, keeps a re-size (which changes `every`) from crowding them:
    before, a re-sized 10-minute run evaluated at steps 1443, 1458, 1461 and 1464."""
    return step - last_at >= every and final_step - step >= every / 2


def interval_runs(step: int, last_at: int, every: int, final_step: int) -> int:
    """How many interval evaluations (or saves) `interval_due` brings after `step` up to the run's
    final step (which has its own), the last one having been at `last_at`: they fall at
    `last_at + k * every`, up to half an interval before the final step."""
    first = (step - last_at) // every + 1  # the first k past `step`
    last = math.floor((final_step - every / 2 - last_at) / every)
    return max(0, last - first + 1)


@dataclass
class Budget:
    seconds: float            # the whole budget
    deadline: float           # time.perf_counter() value by which the run is saved and done
    step_seconds: float = 0.0 # measured training steps (no evaluation or saving) ...
    timed_steps: int = 0      # ... and how many
    eval_s: float | None = None
    save_s: float | None = None
    resized: bool = False
    recent_seconds: float = 0.0  # the steps since the last re-size ...
    recent_steps: int = 0        # ... and how many
    rough: bool = False          # planned from a first step or a figure from before: re-size soon ...
    rough_step_s: float | None = None  # ... at this many seconds a step (until steps are timed)
    eval_guess_steps: float = 0.0  # until an evaluation is timed, it is guessed to cost this many steps
    save_guess_s: float = SAVE_FIXED_S  # until a save is timed, it is guessed to cost this (save_guess)

    @classmethod
    def start(cls, seconds: float, started: float, already_used: float = 0.0) -> "Budget":
        """A budget whose clock started at `started`, less what a resumed run used before."""
        return cls(seconds, started + seconds - already_used)

    def left(self, now: float) -> float:
        return self.deadline - now

    def per_step(self) -> float | None:
        """Seconds a training step: of the steps since the last re-size once there are
        RECENT_STEPS of them, else of all timed steps, else the rough figure the run was planned with."""
        if self.recent_steps >= RECENT_STEPS:
            return self.recent_seconds / self.recent_steps
        return self.step_seconds / self.timed_steps if self.timed_steps else self.rough_step_s

    def eval_seconds(self) -> float:
        """An evaluation's seconds: the last timed one's, else the guess in steps."""
        if self.eval_s is not None:
            return self.eval_s
        return self.eval_guess_steps * (self.per_step() or 0.0)

    def record_step(self, seconds: float, steps_done: int) -> None:
        if steps_done > TIME_FROM_STEP:
            self.step_seconds += seconds
            self.timed_steps += 1
            self.recent_seconds += seconds
            self.recent_steps += 1

    def due(self, evaluated: bool, planned_last: bool = False) -> bool:
        """Re-size now? Once FIRST_RESIZE_SHARE of the budget has been timed (after a rough plan, once
        ROUGH_RESIZE_STEPS steps have), then after each evaluation, and at the step planned as the last
        (steps that turned faster since the plan buy the time they left: beside a test process that
        then finished, a 1-minute run ended 16 s early, its last 7 steps 3x faster than its plan's)."""
        if not self.timed_steps:
            return False
        if not self.resized:
            return (self.step_seconds >= FIRST_RESIZE_SHARE * self.seconds
                    or (self.rough and self.timed_steps >= ROUGH_RESIZE_STEPS))
        return evaluated or planned_last

    def recent_per_step(self) -> float | None:
        """Seconds a step over the steps since the last re-size once there are ROUGH_RESIZE_STEPS of
        them (what a run's planned last step goes on with), else `per_step`."""
        if self.recent_steps >= ROUGH_RESIZE_STEPS:
            return self.recent_seconds / self.recent_steps
        return self.per_step()

    def steps_left(self, left: float, step: int, due_now: tuple[bool, bool], last_at: tuple[int, int],
                   intervals_at: Callable[[int], tuple[int, int]], recent: bool = False) -> tuple[int, float]:
        """(training steps after `step` that fit in `left` seconds, the seconds a step they were
        planned with; the window of recent steps starts again). The steps count everything they bring: this
        step's evaluation and save if due (`due_now`), the interval evaluations and saves of a run
        ending `n` steps on (its intervals are `intervals_at(step + n)`, counted from `last_at`), and
        the final evaluation and save. Counted exactly, not amortized per step: a run's last
        interval is often skipped (`interval_due`), and a share per step left its time unused.
        `recent`: planned with the steps since the last re-size (`recent_per_step`)."""
        per_step = self.recent_per_step() if recent else self.per_step()
        eval_s = self.eval_seconds()
        save_s = self.save_s if self.save_s is not None else self.save_guess_s
        eval_due, save_due = due_now
        # after this step's own evaluation and save, the intervals count from it
        eval_from, save_from = (step if eval_due else last_at[0]), (step if save_due else last_at[1])
        fixed = eval_due * eval_s + save_due * save_s + eval_s + save_s

        def cost(n: int) -> float:  # n >= 1 (with none left, this step's evaluation and save are the final ones)
            eval_every, save_every = intervals_at(step + n)
            return (fixed + n * per_step
                    + interval_runs(step, eval_from, max(eval_every, 1), step + n) * eval_s
                    + interval_runs(step, save_from, max(save_every, 1), step + n) * save_s)

        self.resized = True
        self.recent_seconds, self.recent_steps = 0.0, 0
        n = max(0, int((left - fixed) / per_step))
        while n > 0 and cost(n) > left:
            n -= 1
        return n, per_step

    def no_time_for_another(self, left: float, eval_due: bool, save_due: bool) -> bool:
        """True when going on (this step's own evaluation and save if due, one more step, then the
        final evaluation and save) would pass the deadline: this step should be the last."""
        per_step = self.per_step()
        if per_step is None:
            return False
        eval_s, save_s = self.eval_seconds(), self.save_s if self.save_s is not None else self.save_guess_s
        return left < eval_due * eval_s + save_due * save_s + per_step + eval_s + save_s


def process_age() -> float:
    """Seconds since this process started (Linux; 0 elsewhere): a run started as a command counts its
    budget from there, so the interpreter's start and the imports are inside it as the user's clock has
    them (they took ~5 s of a 2-minute run, which then ended 5 s late)."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        with open("/proc/self/stat", encoding="ascii") as fh:
            started = int(fh.read().rsplit(")", 1)[1].split()[19]) / ticks  # field 22: start time since boot
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return min(max(0.0, uptime - started), 120.0)  # (a figure beyond this is not a fresh command's)

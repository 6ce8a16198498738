"""Short time budgets buy something (issue 44): no step is spent on measuring alone (the first real
step plans the run, or the seconds a step of the same shape took before), the budget counts from the
command's start, the first evaluation comes at about a tenth of the run so the validation curve is
drawn while it trains, every phase is named in status.json, and a checkpoint's cost is guessed from
what it writes. On the trainer's own clock (training_helpers.fake_clock): exact on any machine."""

import json
import re
import subprocess
import sys

import pytest
from helpers import ROOT

from minimind.training import RunDir, train
from minimind.training import step_times
from minimind.training.budget import save_guess
from minimind.training.objectives.language_model import LanguageModel
from minimind.training.run_dir import RunDir as RunFolder
from training_helpers import fake_clock, make_config, write_text_corpus


def _timed_config(tmp_path, tokenizer_dir, budget_s=20.0, **extra):
    tmp_path.mkdir(parents=True, exist_ok=True)
    corpus = write_text_corpus(tmp_path)
    settings = {"compile": "off", "eval_every": 0, "save_every": 0, "eval_batches": 1, **extra}
    return make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=0, time_budget_s=budget_s,
                       **settings)


def test_the_first_real_step_plans_the_run_no_probe_passes(tmp_path, tokenizer_dir, monkeypatch):
    """Every forward pass of a run with no earlier figure trains: the loss is called once per
    micro-batch of the steps it took (a speed probe made 4 passes more, 95 s of a 2-minute GRPO run)."""
    fake_clock(monkeypatch)
    calls = []
    real_loss = LanguageModel.loss  # (the fake clock's)

    def counted(self, model, batch):
        calls.append(1)
        return real_loss(self, model, batch)

    monkeypatch.setattr(LanguageModel, "loss", counted)
    status = train(_timed_config(tmp_path, tokenizer_dir, budget_s=6.0))
    log = RunDir(tmp_path / "run").log_file.read_text()
    assert "first step took" in log and "speed probe" not in log
    assert len(calls) == status["step"]  # one micro-batch a step, nothing else
    assert status["state"] == "finished"


def test_a_run_of_a_shape_seen_before_plans_from_its_figure(tmp_path, tokenizer_dir, monkeypatch):
    """The first run leaves its seconds per step in the cache; the next run of that shape plans
    from them before its first step, and still ends within its budget."""
    clock = fake_clock(monkeypatch)
    cfg = _timed_config(tmp_path / "a", tokenizer_dir, budget_s=6.0)
    train(cfg)
    cache = tmp_path / "a" / "cache"
    assert json.loads((cache / step_times.FILE).read_text())  # remembered
    again = _timed_config(tmp_path / "a", tokenizer_dir, budget_s=6.0, run_dir=str(tmp_path / "a" / "run2"))
    started = clock.now
    status = train(again)
    log = RunDir(tmp_path / "a" / "run2").log_file.read_text()
    assert "planned from an earlier run of this shape" in log and "first step took" not in log
    assert status["state"] == "finished" and clock.now - started <= 6.0


def test_the_budget_counts_from_when_the_command_started(tmp_path, tokenizer_dir, monkeypatch):
    """A command passes its process's start: the seconds before train() (the interpreter, imports)
    are spent, so the run ends within the budget on the user's clock."""
    clock = fake_clock(monkeypatch)
    launched = clock.now
    clock.now += 3.0  # three seconds of imports
    status = train(_timed_config(tmp_path, tokenizer_dir, budget_s=6.0), started=launched)
    assert status["state"] == "finished"
    assert 6.0 - 1.0 < clock.now - launched <= 6.0  # (from the call to train() it ran to 9 s)
    assert status["wall_s"] == pytest.approx(clock.now - launched)


def test_a_fresh_process_knows_its_age():
    """What `python -m minimind train` passes as its start: a fresh interpreter's seconds so far."""
    code = "import time; time.sleep(0.3); from minimind.training.budget import process_age; print(process_age())"
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                               cwd=ROOT).stdout)
    assert 0.3 <= age < 60.0


def test_the_validation_curve_starts_at_a_tenth_and_is_drawn_while_training(tmp_path, tokenizer_dir, monkeypatch):
    """The first automatic evaluation falls at about a tenth of the run and two more come before
    its end (evaluations spaced by their cost alone gave one point, at the end, in a 2-minute run)."""
    fake_clock(monkeypatch)
    status = train(_timed_config(tmp_path, tokenizer_dir, budget_s=12.0, eval_batches=20))
    evaluated = sorted(r["step"] for r in RunDir(tmp_path / "run").read_metrics() if "val_loss" in r)
    total = status["step"]
    assert evaluated[-1] == total
    assert evaluated[0] <= 0.15 * total, (evaluated, total)
    assert len([s for s in evaluated if s < total]) >= 2, (evaluated, total)


def test_every_phase_is_named_in_the_status(tmp_path, tokenizer_dir, monkeypatch):
    """status.json names what the run is doing at each phase, so the page never shows a bare 'step 0/?'."""
    fake_clock(monkeypatch)
    seen = []
    real_write = RunFolder.write_status

    def watching(self, **fields):
        if "phase" in fields and (not seen or seen[-1] != fields["phase"]):
            seen.append(fields["phase"])
        return real_write(self, **fields)

    monkeypatch.setattr(RunFolder, "write_status", watching)
    train(_timed_config(tmp_path, tokenizer_dir, budget_s=6.0))
    assert seen[:3] == ["starting", "preparing_data", "building_model"]
    assert {"measuring_speed", "training", "evaluating", "saving", "finishing"} <= set(seen), seen


def test_a_save_is_guessed_from_what_it_writes():
    """Before a save is timed, its cost comes from the bytes it writes: a LoRA adapter's save is not
    three training steps (8 s of a GRPO run's budget, which then planned 4 steps where 8 fitted)."""
    adapter, full = save_guess(150_000, 150_000), save_guess(5_000_000, 5_000_000)
    assert 0.3 < adapter < 0.4 < full < 1.0


def test_an_evaluation_is_guessed_by_what_it_does():
    """A forward-only batch is a third of a training step; a GRPO batch writes one answer a prompt where a
    step writes group_size and trains on them (guessed at a third, a 2-minute GRPO run stopped after a step)."""
    from minimind.training import TrainConfig
    from minimind.training.budget import eval_cost_steps

    lm = TrainConfig.from_dict({"batch_size": 4, "eval_batches": 20})
    grpo = TrainConfig.from_dict({"mode": "grpo", "batch_size": 4, "eval_batches": 20, "grpo": {"group_size": 8}})
    assert eval_cost_steps(lm, 40) == pytest.approx(10 / 3)  # 10 batches of the 40 rows
    assert eval_cost_steps(grpo, 40) == pytest.approx(10 / 8)


def _steps_turn_faster(monkeypatch, clock, at_batch: int, per_batch: float) -> None:
    """From the `at_batch`-th micro-batch on, the fake clock charges `per_batch` seconds for each."""
    timed_loss = LanguageModel.loss  # (the fake clock's)
    calls = []

    def slow_then_fast(self, model, batch):
        calls.append(1)
        if len(calls) == at_batch:
            clock.per_batch = per_batch
        return timed_loss(self, model, batch)

    monkeypatch.setattr(LanguageModel, "loss", slow_then_fast)


def test_steps_that_turn_faster_late_buy_the_time_they_leave(tmp_path, tokenizer_dir, monkeypatch):
    """At the step planned as the last, a run whose recent steps ran faster than its plan goes on: a
    1-minute run beside a test process that then finished ended 16 s early, its last steps 3x faster."""
    clock = fake_clock(monkeypatch)
    clock.per_batch = 0.5
    _steps_turn_faster(monkeypatch, clock, at_batch=12, per_batch=0.1)  # the other process is done: a fifth of the time
    started = clock.now
    status = train(_timed_config(tmp_path, tokenizer_dir, budget_s=12.0))
    log = RunDir(tmp_path / "run").log_file.read_text()
    assert status["state"] == "finished"
    assert 12.0 - 1.0 < clock.now - started <= 12.0, (clock.now - started, log)  # within a second, not 4 s short
    assert status["step"] > 30, log


def test_an_evaluation_due_late_is_skipped_rather_than_ending_the_run_early(tmp_path, tokenizer_dir, monkeypatch):
    """When an interval evaluation due at a step would leave no room for another step before the
    final evaluation, the run skips it and goes on (the final one still comes): beside a test process,
    a 1-minute run whose evaluation took 6 s stopped at such a step, 18 s early."""
    clock = fake_clock(monkeypatch)
    clock.per_batch = 0.5
    timed_eval = LanguageModel.evaluate  # (the fake clock's)
    evaluations = []

    def slow_eval(self, model, batches):
        evaluations.append(clock.now)
        clock.now += 3.0
        return timed_eval(self, model, batches)

    monkeypatch.setattr(LanguageModel, "evaluate", slow_eval)
    # steps turn faster: the planned last step goes on, and an evaluation falls due
    _steps_turn_faster(monkeypatch, clock, at_batch=8, per_batch=0.25)
    started = clock.now
    status = train(_timed_config(tmp_path, tokenizer_dir, budget_s=20.0))
    log = RunDir(tmp_path / "run").log_file.read_text()
    assert status["state"] == "finished"
    assert 20.0 - 1.0 < clock.now - started <= 20.0, (clock.now - started, log)
    assert len(evaluations) >= 2, log  # one while it trained, and the final one
    skipped = [int(n) for n in re.findall(r"due at step (\d+) skipped", log)]
    assert len(skipped) == 1, log
    # the next ones count from the skipped one, and the run reaches the last step it planned (before,
    # the skipped evaluation stayed due, and ended the run a step short of it)
    planned = [int(n) for n in re.findall(r"re-sized to (\d+) steps", log)]
    assert status["step"] == planned[-1], log

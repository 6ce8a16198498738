"""Several processes from one click: the Train tab's "Processes" field makes the job runner start
`torchrun --nproc_per_node=N -m minimind train` as the child job (real subprocesses, gloo on CPU,
a tiny model). Its losses are those of one process with the doubled batch, and Stop and Resume
work as for one process: Stop reaches every rank through torchrun's agent (status.json's pid),
rank 0 saves, and Resume relaunches with the run's own process count."""

import pytest

from minimind.training import RunDir, TrainConfig
from minimind.training.checkpoint import latest_checkpoint
from webapp.context import AppContext
from webapp.jobs import JobManager, _pid_alive
from webapp.tabs import run_view, train, train_form
from webapp.tabs.train_form import TrainForm
from webapp.workspace import Workspace, WorkspaceError
from training_helpers import losses, write_text_corpus
from webapp_helpers import make_shipped, wait_for

BASE = "shipped:minimind-tang"
POEMS = {"steps": 4, "batch": 2, "seq_len": 32, "lr": 1e-3, "accum": 1,
         "precision": "fp32", "rank": 4, "alpha": 8, "eval_every": 0}


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # two ranks on a 2-core machine
    shipped = make_shipped(tmp_path / "checkpoints")
    ws = Workspace(tmp_path / "ws")
    ws.save_corpus("poems", [write_text_corpus(tmp_path)], {"kind": "auto"}, {"kind": "text", "documents": 18})
    return AppContext(ws, JobManager(ws), shipped_dir=shipped)


def _start(ctx, steps: int, batch: int, processes: int, parallel: str = "ddp") -> str:
    """What the Start button does: build the page's config, queue it, launch it."""
    form = TrainForm(base=BASE, mode="sft", corpus="poems", **{**POEMS, "steps": steps, "batch": batch},
                     processes=processes, parallel=parallel, report_to=[])
    run_choice, _ = train.start(ctx, form)
    return run_choice["value"]


def _until(ctx, run_id: str, states: tuple, timeout: float = 240) -> dict:
    run = RunDir(ctx.workspace.run_dir(run_id))

    def reached():
        ctx.jobs.pump()  # no background scheduler in tests
        return run.read_status().get("state") in states and run.read_status()

    return wait_for(reached, timeout=timeout, every=0.3, what=f"{run_id} to be {' or '.join(states)}")


def _stdout(ctx, run_id: str) -> str:
    return (ctx.workspace.run_dir(run_id) / "stdout.log").read_text(errors="replace")[-3000:]


def test_the_page_bounds_processes_and_keeps_them_in_the_run_config(ctx):
    assert train_form.max_processes() >= 2  # a CPU machine takes at least two (gloo)
    config = TrainForm(base=BASE, mode="sft", corpus="poems", **POEMS, processes=2, parallel="fsdp").to_config(ctx)
    assert (config.processes, config.distributed, config.report_to) == (2, "fsdp", [])
    assert TrainForm(base=BASE, mode="sft", corpus="poems", **POEMS).to_config(ctx).processes == 1
    for bad in (0, 1.5, train_form.max_processes() + 1, "two"):
        with pytest.raises(WorkspaceError, match="processes must be a"):
            TrainForm(base=BASE, mode="sft", corpus="poems", **POEMS, processes=bad).to_config(ctx)
    with pytest.raises(WorkspaceError, match="parallelism must be one of ddp, fsdp"):
        TrainForm(base=BASE, mode="sft", corpus="poems", **POEMS, parallel="zero3").to_config(ctx)


def test_a_two_process_run_from_the_page_matches_one_process_with_the_doubled_batch(ctx):
    one = _start(ctx, steps=3, batch=4, processes=1)
    two = _start(ctx, steps=3, batch=2, processes=2)  # queued behind the first: one job per device
    status = _until(ctx, one, ("finished", "failed"))
    assert status["state"] == "finished", status.get("error") or _stdout(ctx, one)
    status = _until(ctx, two, ("finished", "failed"))
    assert status["state"] == "finished", status.get("error") or _stdout(ctx, two)
    assert status["world"] == 2 and "torch.distributed.run" not in _stdout(ctx, one)
    a, b = losses(ctx.workspace.run_dir(one)), losses(ctx.workspace.run_dir(two))
    assert sorted(a) == sorted(b) == [1, 2, 3]
    for step in a:
        assert abs(a[step] - b[step]) < 1e-4, (step, a[step], b[step])
    # the page shows it as any run: progress, a loss curve with its train line
    bar, facts, curve, *_ = run_view.watch(ctx, two)
    assert "step 3/3" in bar and set(curve["series"]) == {"train", "validation"}


def test_stop_and_resume_a_two_process_run(ctx):
    run_id = _start(ctx, steps=100_000, batch=2, processes=2)
    run = RunDir(ctx.workspace.run_dir(run_id))
    wait_for(lambda: (run.read_status().get("step") or 0) >= 2, timeout=240, every=0.3, what="two steps")
    pid = run.read_status()["pid"]  # torchrun's agent: what the page watches and signals
    assert b"torch.distributed.run" in open(f"/proc/{pid}/cmdline", "rb").read()
    assert "stopping" in train.stop(ctx, run_id)
    status = _until(ctx, run_id, ("stopped", "failed"))
    assert status["state"] == "stopped", status.get("error") or _stdout(ctx, run_id)
    stopped_at = status["step"]
    assert latest_checkpoint(run.checkpoints).name == f"step-{stopped_at}"  # rank 0 saved where it stopped
    wait_for(lambda: not _pid_alive(pid), timeout=120, what="torchrun's agent to exit")

    assert "queued to resume" in train.resume(ctx, run_id)
    logged_after = lambda: [r for r in run.read_metrics() if "loss" in r and r["step"] > stopped_at]  # noqa: E731
    wait_for(lambda: ctx.jobs.pump() or logged_after(), timeout=240, every=0.3, what="the resumed run to log")
    status = run.read_status()
    assert status["state"] == "running" and status["world"] == 2  # relaunched with the run's own count
    assert TrainConfig.load(run.config_file).processes == 2
    train.stop(ctx, run_id)
    assert _until(ctx, run_id, ("stopped", "failed"))["state"] == "stopped", _stdout(ctx, run_id)
    steps = [r["step"] for r in run.read_metrics() if "loss" in r]
    assert steps == sorted(set(steps)) and steps[-1] > stopped_at  # one curve, continued from the checkpoint
    assert f"resumed from step-{stopped_at}" in run.log_file.read_text()


@pytest.mark.parametrize("hostile, message", [
    ({"processes": "x" * 10_000}, "processes must be a number"),
    ({"parallel": "../../etc"}, "parallelism must be one of ddp, fsdp"),
    ({"report_to": ["../../etc/passwd"]}, "report_to takes tensorboard, trackio"),
    ({"report_to": ["y" * 100_000]}, "report_to takes tensorboard, trackio"),
    ({"extend_vocab": "yes"}, "must be true or false"),
    ({"extend_vocab": [1] * 5}, "must be true or false"),
])
def test_hostile_values_of_the_new_inputs_are_refused_in_short_messages(ctx, hostile, message):
    from webapp.context import user_errors

    form = TrainForm(base=BASE, mode="sft", corpus="poems", **{**POEMS, "steps": 3}, **{"report_to": [], **hostile})
    with pytest.raises(Exception, match=message) as refused:
        user_errors(form.to_config)(ctx)
    assert len(str(refused.value)) < 200  # a visitor's value is quoted, not echoed whole
    assert ctx.jobs.runs() == []


def test_the_estimate_of_a_two_process_run_plans_with_the_doubled_batch_and_its_share_of_the_cores(ctx):
    import math

    import torch

    from minimind.training.estimate import estimate

    one = TrainForm(base=BASE, mode="sft", corpus="poems", **POEMS).to_config(ctx)
    one.max_steps, one.epochs = 0, 1  # planned from the data: one pass
    two = TrainForm(base=BASE, mode="sft", corpus="poems", **POEMS, processes=2).to_config(ctx)
    two.max_steps, two.epochs = 0, 1
    threads = torch.get_num_threads()
    a, b = (estimate(c, probe_steps=1, scratch=str(ctx.workspace.root / f"est{i}")) for i, c in enumerate((one, two)))
    assert torch.get_num_threads() == threads  # the probe's thread share is given back
    assert a.steps == math.ceil(a.train_rows / 2) and b.steps == math.ceil(b.train_rows / 4)

"""The page on a ZeroGPU Space, through the ZeroGPU stand-in: a run trains in GPU slices on a thread of
the app (never a child process, which would not get the GPU), the page says which slice, Stop takes
effect at the end of a slice and Resume goes on in slices, and chat answers while a slice trains.
Also where the work is kept: a Space's persistent storage when it has some, and the page says when not."""

import time

import pytest
from training_helpers import make_config, save_base_model, write_chat_corpus
from webapp_helpers import wait_for
from zerogpu_standin import StandInGpu

from minimind.sampling_params import SamplingParams
from minimind.training import RunDir
from webapp import workspace as workspace_module
from webapp.context import AppContext
from webapp.jobs import JobManager
from webapp.tabs import chat as chat_tab
from webapp.tabs import run_view
from webapp.workspace import Workspace, default_home


@pytest.fixture
def zero(tmp_path, tokenizer, monkeypatch):
    monkeypatch.setenv("MINIMIND_SLICE_SECONDS", "6")
    base = save_base_model(tmp_path / "shipped" / "tiny", tokenizer)
    chat = write_chat_corpus(tmp_path)
    ws = Workspace(tmp_path / "ws")
    gpu = StandInGpu()
    ctx = AppContext(ws, JobManager(ws, gpu_slices=gpu), shipped_dir=tmp_path / "shipped")
    # a budget of training time, not a step count: a slice trains at most 85 % of its 6 s, so 8 s take
    # 2 slices or more on any machine (600 steps took 2-3 here; a machine twice as fast would finish
    # them in the first slice, never showing a second or stopping at a slice's end)
    config = lambda: make_config(tmp_path, [chat], mode="lora", model__init_from=str(base), data__seq_len=96,
                                 max_steps=0, time_budget_s=8.0, lora__rank=4, save_every=1000)
    return ctx, gpu, config


def test_a_run_trains_in_slices_on_the_app_and_the_page_says_which(zero):
    ctx, gpu, config = zero
    run_id = ctx.jobs.submit(config())
    run = RunDir(ctx.workspace.runs / run_id)
    assert run_id in ctx.jobs._sliced and not ctx.jobs._children  # a thread of the app, not a child process
    wait_for(lambda: (run.read_status().get("slice") or 0) >= 2, timeout=300, every=0.2, what="a second slice")
    _, facts, *_ = run_view.watch(ctx, run_id)
    assert "**GPU slice:** " in facts and "(up to 6 s each)" in facts

    # chat answers while a slice trains (the app process is free: the slice is another process)
    started = time.monotonic()
    *_, final = chat_tab._answer(ctx, "shipped:tiny", [{"role": "user", "content": "寫一首詩"}], "",
                                 SamplingParams(max_new_tokens=8))
    assert final[-1]["role"] == "assistant" and time.monotonic() - started < 60
    assert run.read_status()["state"] in ("running", "paused")
    wait_for(lambda: run.read_status().get("state") in ("finished", "failed"), timeout=600, what="the sliced run")
    status = run.read_status()
    assert status["state"] == "finished" and status["step"] > 0, status.get("error")
    # (the GPU call is recorded once its worker has exited: a moment after the slice wrote "finished")
    wait_for(lambda: len(gpu.calls) >= status["slice"], timeout=30, every=0.1, what="the last GPU call's record")
    assert len(gpu.calls) == status["slice"] >= 2 and all(c["outcome"] == "ok" for c in gpu.calls)
    assert any(r[0] == run_id for r in ctx.jobs.finished_models())
    # each slice loads and prepares again: the page says how much of the wall time was training
    _, facts, *_ = run_view.watch(ctx, run_id)
    assert "s of it in the training loop)" in facts, facts


def test_stop_takes_effect_when_the_slice_ends_and_resume_goes_on_in_slices(zero):
    ctx, gpu, config = zero
    run_id = ctx.jobs.submit(config())
    run = RunDir(ctx.workspace.runs / run_id)
    wait_for(lambda: run.read_status().get("step", 0) > 0, timeout=300, every=0.2, what="a first step")
    assert "stops when its current GPU slice ends" in ctx.jobs.stop(run_id)
    wait_for(lambda: run.read_status().get("state") == "stopped", timeout=120, what="the stop")
    stopped_at = run.read_status()["step"]
    assert 0 < stopped_at and ctx.jobs.active() is None
    # (a GPU call is recorded once its worker has exited: a moment after its slice wrote its state)
    wait_for(lambda: len(gpu.calls) >= 1, timeout=30, every=0.1, what="the stopped slice's record")
    calls = len(gpu.calls)
    assert "queued to resume" in ctx.jobs.resume(run_id)
    wait_for(lambda: run.read_status().get("state") in ("finished", "failed"), timeout=600, what="the resumed run")
    wait_for(lambda: len(gpu.calls) > calls, timeout=30, every=0.1, what="the resumed slice's record")
    assert run.read_status()["state"] == "finished" and len(gpu.calls) > calls
    assert f"resumed from step-{stopped_at}" in run.log_file.read_text()


def test_the_workspace_is_the_spaces_persistent_storage_when_it_has_some(tmp_path, monkeypatch):
    space = {"SPACE_ID": "someone/studio", "SYSTEM": "spaces"}
    mount = tmp_path / "data"
    assert default_home(space, mount) == workspace_module.Path("workspace")  # no storage mounted
    mount.mkdir()
    assert default_home(space, mount) == mount / "minimind"
    assert default_home({**space, "MINIMIND_HOME": "/elsewhere"}, mount) == workspace_module.Path("/elsewhere")
    assert default_home({}, mount) == workspace_module.Path("workspace")  # a laptop: here

    monkeypatch.setattr(workspace_module, "PERSISTENT_MOUNT", mount)
    for key, value in space.items():
        monkeypatch.setenv(key, value)
    assert not Workspace(tmp_path / "ws").persistent  # the page says so on the Train tab
    assert Workspace(mount / "minimind").persistent
    monkeypatch.delenv("SPACE_ID")
    assert Workspace(tmp_path / "ws").persistent


def test_the_estimate_runs_in_a_gpu_call(zero, tmp_path):
    """A child process would never see ZeroGPU's GPU: the estimate is one GPU call instead."""
    from webapp.tabs.train import do_estimate
    from webapp.tabs.train_form import TrainForm

    ctx, gpu, _ = zero
    ctx.workspace.save_corpus("chats", [tmp_path / "chat.jsonl"], {"kind": "auto"}, {"kind": "chat", "documents": 60})
    form = TrainForm(base="shipped:tiny", mode="lora", corpus="chats", steps=20, batch=4, seq_len=64, lr=1e-3, accum=1,
                     precision="fp32", rank=4, alpha=8, eval_every=0)
    said = do_estimate(ctx, form)
    assert "20" in said and len(gpu.calls) == 1 and gpu.calls[0]["outcome"] == "ok"

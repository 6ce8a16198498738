"""The Train tab as a newcomer meets it: a run's length in steps or minutes, the ETA from the
trainer's measured steps, messages in the page's words (no command-line hints) that follow the
run's real state, a loss legend that names both lines, and a Runs table with named columns.
Fast: model folders are stand-ins (a config.json), run folders are written by hand."""

import pytest
from gradio_client import Client

from minimind.training import RunDir, TrainConfig
from webapp.app import build_app
from webapp.context import AppContext
from webapp.i18n import EN, ZH
from webapp.jobs import JobManager
from webapp.tabs import train
from webapp.workspace import Workspace, WorkspaceError
from helpers import ROOT
from webapp_helpers import START_INPUTS, LiveServer, free_port

# steps, batch, seq_len, lr, accum, precision, rank, alpha, eval_every
NUMBERS = [5, 2, 64, 1e-4, 1, "fp32", 4, 8, 0]
BASE = "shipped:minimind-tang"


def _model(folder):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    return folder


def _workspace(tmp_path):
    shipped = tmp_path / "checkpoints"
    _model(shipped / "minimind-tang")
    ws = Workspace(tmp_path / "ws")
    ws.save_corpus("chats", [ROOT / "samples" / "tang_chat_sample.jsonl"], {"kind": "auto"},
                   {"kind": "chat", "documents": 314})
    return ws, shipped


@pytest.fixture
def ctx(tmp_path):
    ws, shipped = _workspace(tmp_path)
    return AppContext(ws, JobManager(ws), shipped_dir=shipped)


def _run(ctx, name, status, metrics=(), log=""):
    run = RunDir(ctx.workspace.runs / name).create()
    TrainConfig.from_dict({"mode": "lora", "max_steps": 4, "data": {"files": ["x"]},
                           "model": {"init_from": "m"}}).save(run.config_file)
    for record in metrics:
        run.append_metrics(record)
    run.write_status(**status)
    if log:
        run.log_file.write_text(log, encoding="utf-8")
    return run


def _config(ctx, **kw):
    return train.build_config(ctx, BASE, "lora", "chats", *NUMBERS, **kw)


def test_a_run_stops_after_steps_or_minutes(ctx):
    steps = _config(ctx)  # steps by default: old callers keep their runs
    assert (steps.max_steps, steps.time_budget_s) == (5, 0.0)
    timed = _config(ctx, stop_after="minutes", minutes=2.5)
    assert (timed.max_steps, timed.time_budget_s) == (0, 150.0)  # the trainer sizes it from measured steps
    assert _config(ctx, stop_after="steps", minutes=-3).max_steps == 5  # minutes ignored when counting steps
    for bad in (0, -1, train.MAX_MINUTES + 1, "soon", None):
        with pytest.raises(WorkspaceError, match="minutes must be a number between"):
            _config(ctx, stop_after="minutes", minutes=bad)
    with pytest.raises(WorkspaceError, match="stop after must be one of steps, minutes"):
        _config(ctx, stop_after="hours")


def test_the_eta_is_the_trainers_measured_one(ctx):
    """status.json's eta_s (re-estimated by the trainer from measured steps) is what the bar shows."""
    _run(ctx, "r1", {"state": "running", "mode": "lora", "step": 10, "total": 40, "eta_s": 125.0})
    progress = train.watch(ctx, "r1")[0]
    assert "step 10/40" in progress and "ETA 2m 05s" in progress


def test_no_command_line_hints_and_messages_follow_the_run(ctx):
    log = "step 3/10 loss 4.1\nstopped at step 3 (checkpoint saved); resume with --resume\n"
    _run(ctx, "r1", {"state": "stopped", "mode": "lora", "step": 3, "total": 10, "resume": False}, log=log)
    bar, facts, curve, shown_log, runs, queue, _ = train.watch(ctx, "r1")
    assert "--resume" not in shown_log and "press Resume to continue" in shown_log
    assert train.run_message(ctx, "r1") == "**r1**: stopped at step 3 — press Resume to continue."

    run = RunDir(ctx.workspace.runs / "r1")
    run.write_status(state="queued", resume=True)
    assert "to resume from step 3" in train.run_message(ctx, "r1")
    run.write_status(state="running")
    assert train.run_message(ctx, "r1") == "**r1** is training (resumed)."
    run.write_status(state="finished", step=10)  # the message no longer says it is queued to resume
    finished = train.run_message(ctx, "r1")
    assert finished.startswith("**r1** finished: 10 steps") and "queue" not in finished
    run.write_status(state="failed", error="the training process ended unexpectedly (see train.log)")
    assert train.run_message(ctx, "r1").endswith("press Resume to start it again.")  # no checkpoint kept
    (run.checkpoints / "step-8").mkdir(parents=True)
    assert train.run_message(ctx, "r1").endswith("press Resume to continue from step 8.")
    assert "train.log" not in train.watch(ctx, "r1")[1] and "see the log below" in train.watch(ctx, "r1")[1]
    assert train.run_message(ctx, "") == ""
    for text in (*EN.values(), *ZH.values()):  # the page's own words name no command-line flag
        assert "--" not in text


def test_the_loss_plot_has_both_lines_from_its_first_draw(ctx):
    """Gradio 6 leaves a line that first appears in a live update undrawn: until the first
    evaluation the validation line is there as one point without a value (not drawn)."""
    run = _run(ctx, "r1", {"state": "running", "mode": "lora", "step": 2, "total": 4},
               [{"step": 1, "loss": 4.0}, {"step": 2, "loss": 3.5}])
    early = train._curve(run)
    assert list(early.columns) == ["step", "loss", "series"] and set(early["series"]) == {"train", "validation"}
    assert early[early["series"] == "validation"]["loss"].isna().all()
    run.append_metrics({"step": 2, "val_loss": 3.6})
    later = train._curve(run)
    assert list(later[later["series"] == "validation"]["loss"]) == [3.6]  # no placeholder once measured
    assert train._curve(_run(ctx, "r2", {"state": "queued"})) is None  # nothing logged yet: no plot
    # evaluations more often than log lines: an evaluation comes before the first train figure
    evaluated_first = train._curve(_run(ctx, "r3", {"state": "running", "mode": "lora", "step": 2, "total": 40},
                                        [{"step": 2, "val_loss": 3.6}]))
    assert set(evaluated_first["series"]) == {"train", "validation"}
    assert evaluated_first[evaluated_first["series"] == "train"]["loss"].isna().all()
    assert train.LEGEND_TITLE != "series"


def test_watching_a_run_never_selects_it_back_over_a_newer_choice(ctx):
    """The page's timer asks what run r1 shows; meanwhile Start selects the new run r2. The answer
    for r1 must not set the run box back to r1 (the page would then watch the old, finished run
    while r2 trains unseen); with no run chosen, the watcher picks one and selects it."""
    _run(ctx, "r1", {"state": "finished", "mode": "lora", "step": 120, "total": 120})
    chosen = train.watch(ctx, "r1")[6]
    assert "value" not in chosen and chosen["choices"] == ["r1"]
    picked = train.watch(ctx, None)[6]
    assert picked["value"] == "r1"


def test_the_runs_table_has_named_columns_and_no_blank_row(ctx):
    empty = train.runs_table(ctx)
    assert list(empty.columns) == train.RUN_COLUMNS and len(empty) == 0
    assert len(train.watch(ctx, None)[4]) == 0
    _run(ctx, "r1", {"state": "finished", "mode": "lora", "step": 4, "total": 4})
    table = train.runs_table(ctx)
    assert list(table.columns) == train.RUN_COLUMNS and list(table["run"]) == ["r1"]


def test_the_api_takes_a_minutes_budget_last_and_serves_named_columns(tmp_path):
    """Through gradio_client: /start_training has two more optional inputs at its end (stop after,
    minutes), so callers of the first 21 keep working; /watch_run's Runs table has named headers
    and no rows before the first run, and its loss curve keeps its shape."""
    ws, shipped = _workspace(tmp_path)
    app = build_app(tmp_path / "ws", shipped_dir=shipped, background_jobs=False)
    with LiveServer(app, free_port()) as server:
        client = Client(server.url, verbose=False)
        params = client.view_api(print_info=False, return_format="dict")["named_endpoints"][
            "/start_training"]["parameters"]
        assert len(params) == START_INPUTS and [p["parameter_default"] for p in params[21:23]] == ["steps", 10]
        # then processes, parallelism and report_to (tests/test_webapp_processes.py)
        assert [p["parameter_default"] for p in params[23:]] == [1, "ddp", [], False, "rope", "generate", ""]  # processes, parallelism, report_to, extend_vocab, architecture, task, class_weights
        progress, facts, curve, log, runs, queue, run_id = client.predict("", api_name="/watch_run")
        assert runs["headers"] == train.RUN_COLUMNS and runs["data"] == []
        ctx = AppContext(ws, JobManager(ws), shipped_dir=shipped)
        _run(ctx, "r1", {"state": "finished", "mode": "lora", "step": 2, "total": 2},
             [{"step": 2, "loss": 3.0}, {"step": 2, "val_loss": 3.1}])
        curve = client.predict("r1", api_name="/watch_run")[2]
        assert sorted(row[2] for row in curve["data"]) == ["train", "validation"]
        _run(ctx, "r2", {"state": "running", "mode": "lora", "step": 1, "total": 2}, [{"step": 1, "loss": 3.0}])
        curve = client.predict("r2", api_name="/watch_run")[2]  # the unmeasured validation point: no value
        assert sorted(curve["data"], key=lambda row: row[2]) == [[1, 3.0, "train"], [1, None, "validation"]]


@pytest.mark.parametrize("position, value, says", [
    (0, None, "steps must be a number between 1"), (1, None, "batch size must be a number between 1 and 4096"),
    (2, None, "sequence length must be a number between 8 and 65536"), (2, 10**9, "sequence length"),
    (3, None, "learning rate must be a number"), (3, "fast", "learning rate must be a number"),
    (4, None, "gradient accumulation"), (6, None, "LoRA rank"), (7, None, "LoRA alpha"), (1, 2.5, "whole number"),
    (5, ["fp32"], "precision must be one of the page's choices")])
def test_an_emptied_or_odd_form_value_gets_a_sentence_naming_it(ctx, position, value, says):
    numbers = list(NUMBERS)
    numbers[position] = value
    with pytest.raises(WorkspaceError, match=says):
        train.build_config(ctx, BASE, "lora", "chats", *numbers)
    with pytest.raises(WorkspaceError, match="start from must be one of the page's choices"):
        train.build_config(ctx, [BASE], "lora", "chats", *NUMBERS)

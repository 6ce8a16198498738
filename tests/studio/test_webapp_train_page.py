"""The Train tab as a newcomer meets it: a run's length in steps or minutes, the ETA from the
trainer's measured steps, messages in the page's words (no command-line hints) that follow the
run's real state, a loss legend that names both lines, and a Runs table with named columns.
Fast: model folders are stand-ins (a config.json), run folders are written by hand."""

import os
import subprocess
import sys
import time

import pytest
from gradio_client import Client

from minimind.training import RunDir, TrainConfig
from minimind.training.events import CLI_WORDS, RunEvent
from webapp.app import build_app
from webapp.context import AppContext
from webapp.i18n import EN, ZH
from webapp.jobs import JobManager
from webapp.tabs import run_view, train, train_form
from webapp.tabs.train_form import TrainForm
from webapp import workspace
from webapp.workspace import Workspace, WorkspaceError
from webapp_helpers import START_INPUTS, LiveServer, free_port, page_workspace

NUMBERS = {"steps": 5, "batch": 2, "seq_len": 64, "lr": 1e-4, "accum": 1,
           "precision": "fp32", "rank": 4, "alpha": 8, "eval_every": 0}
BASE = "shipped:minimind-tang"


@pytest.fixture
def ctx(tmp_path):
    ws, shipped = page_workspace(tmp_path)
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
    return TrainForm(base=BASE, mode="lora", corpus="chats", **NUMBERS, **kw).to_config(ctx)


def test_a_run_stops_after_steps_or_minutes(ctx):
    steps = _config(ctx)  # steps by default: old callers keep their runs
    assert (steps.max_steps, steps.time_budget_s) == (5, 0.0)
    timed = _config(ctx, stop_after="minutes", minutes=2.5)
    assert (timed.max_steps, timed.time_budget_s) == (0, 150.0)  # the trainer sizes it from measured steps
    assert _config(ctx, stop_after="steps", minutes=-3).max_steps == 5  # minutes ignored when counting steps
    for bad in (0, -1, train_form.MAX_MINUTES + 1, "soon", None):
        with pytest.raises(WorkspaceError, match="minutes must be a number between"):
            _config(ctx, stop_after="minutes", minutes=bad)
    with pytest.raises(WorkspaceError, match="stop after must be one of steps, minutes"):
        _config(ctx, stop_after="hours")


def test_the_eta_is_the_trainers_measured_one(ctx):
    """status.json's eta_s (re-estimated by the trainer from measured steps) is what the bar shows."""
    _run(ctx, "r1", {"state": "running", "mode": "lora", "step": 10, "total": 40, "eta_s": 125.0})
    progress = run_view.watch(ctx, "r1")[0]
    assert "step 10/40" in progress and "ETA 2m 05s" in progress


def test_no_command_line_hints_and_messages_follow_the_run(ctx):
    run = _run(ctx, "r1", {"state": "stopped", "mode": "lora", "step": 3, "total": 10, "resume": False})
    run.log("step 3/10 loss 4.1")
    run.log_event(RunEvent("stopped", step=3))  # what the trainer writes when it is stopped
    written = run.log_file.read_text(encoding="utf-8").splitlines()
    assert written[-1].endswith(" stopped at step 3 (checkpoint saved); resume with --resume")  # the CLI's words
    bar, facts, curve, shown_log, runs, queue, _ = run_view.watch(ctx, "r1")
    assert shown_log.splitlines() == [written[0], written[1][:20] + "stopped at step 3 (checkpoint saved) — press "
                                      "Resume to continue"]  # the time kept, the words the page's
    assert run_view.run_message(ctx, "r1") == "**r1**: stopped at step 3 — press Resume to continue."

    run.write_status(state="queued", resume=True)
    assert "to resume from step 3" in run_view.run_message(ctx, "r1")
    run.write_status(state="running")
    assert run_view.run_message(ctx, "r1") == "**r1** is training (resumed)."
    run.write_status(state="finished", step=10)  # the message no longer says it is queued to resume
    finished = run_view.run_message(ctx, "r1")
    assert finished.startswith("**r1** finished: 10 steps") and "queue" not in finished
    run.write_status(state="failed", **RunEvent("ended").as_error())  # what the job runner writes
    assert run.read_status()["error"] == "the training process ended unexpectedly (see train.log)"
    assert run_view.run_message(ctx, "r1").endswith("press Resume to start it again.")  # no checkpoint kept
    assert "train.log" not in run_view.watch(ctx, "r1")[1] and "see the log below" in run_view.watch(ctx, "r1")[1]
    (run.checkpoints / "step-8").mkdir(parents=True)
    run.write_status(**RunEvent("ended", checkpoint="step-8").as_error())
    assert run_view.run_message(ctx, "r1").endswith("press Resume to continue from step 8.")
    facts, runs = run_view.watch(ctx, "r1")[1], run_view.watch(ctx, "r1")[4]
    said = ("the training process ended unexpectedly (see the log below); its last checkpoint (step-8) is kept and "
            "it can be resumed")
    assert said in facts and list(runs["error"]) == [said]
    run.write_status(error="CUDA out of memory")  # an error written without an event: shown as written
    assert "CUDA out of memory" in run_view.watch(ctx, "r1")[1] and run.read_status()["error_event"] is None
    assert run_view.run_message(ctx, "") == ""
    for text in (*EN.values(), *ZH.values()):  # the page's own words name no command-line flag
        assert "--" not in text
    assert {f"ev_{kind}" for kind in CLI_WORDS} <= set(EN)  # every event the trainer logs has the page's words


def test_a_run_from_before_events_shows_its_log_as_written_and_chinese_gets_chinese_words(ctx, monkeypatch):
    old = "2026-01-01 10:00:00 stopped at step 3 (checkpoint saved); resume with --resume\n"
    run = _run(ctx, "r0", {"state": "stopped", "step": 3, "total": 10, "error": "the training process ended"},
               log=old)  # no events.jsonl, no error_event: nothing to word otherwise, nothing lost
    assert run_view.log_text(run) == old.strip() and "the training process ended" in run_view.watch(ctx, "r0")[1]
    run.log_event(RunEvent("stopped", step=7))
    monkeypatch.setattr("webapp.i18n.language", lambda *a: "zh")
    assert run_view.log_text(run).splitlines()[1][20:] == "停在第 7 步（检查点已保存）——按“继续”接着训练"
    run.write_status(**RunEvent("ended", checkpoint="step-7").as_error())
    assert "训练进程意外结束（见下方日志）；它的最后一个检查点（step-7）已保留" in run_view.watch(ctx, "r0")[1]


def test_the_loss_plot_has_both_lines_from_its_first_draw(ctx):
    """Gradio 6 leaves a line that first appears in a live update undrawn: until the first
    evaluation the validation line is there as one point without a value (not drawn)."""
    run = _run(ctx, "r1", {"state": "running", "mode": "lora", "step": 2, "total": 4},
               [{"step": 1, "loss": 4.0}, {"step": 2, "loss": 3.5}])
    early = run_view.loss_curve(run)
    assert list(early.columns) == ["step", "loss", "series"] and set(early["series"]) == {"train", "validation"}
    assert early[early["series"] == "validation"]["loss"].isna().all()
    run.append_metrics({"step": 2, "val_loss": 3.6})
    later = run_view.loss_curve(run)
    assert list(later[later["series"] == "validation"]["loss"]) == [3.6]  # no placeholder once measured
    assert run_view.loss_curve(_run(ctx, "r2", {"state": "queued"})) is None  # nothing logged yet: no plot
    # evaluations more often than log lines: an evaluation comes before the first train figure
    evaluated_first = run_view.loss_curve(_run(ctx, "r3", {"state": "running", "mode": "lora", "step": 2, "total": 40},
                                        [{"step": 2, "val_loss": 3.6}]))
    assert set(evaluated_first["series"]) == {"train", "validation"}
    assert evaluated_first[evaluated_first["series"] == "train"]["loss"].isna().all()
    assert run_view.LEGEND_TITLE != "series"


def test_watching_a_run_never_selects_it_back_over_a_newer_choice(ctx):
    """The page's timer asks what run r1 shows; meanwhile Start selects the new run r2. The answer
    for r1 must not set the run box back to r1 (the page would then watch the old, finished run
    while r2 trains unseen); with no run chosen, the watcher picks one and selects it."""
    _run(ctx, "r1", {"state": "finished", "mode": "lora", "step": 120, "total": 120})
    chosen = run_view.watch(ctx, "r1")[6]
    assert "value" not in chosen and chosen["choices"] == ["r1"]
    picked = run_view.watch(ctx, None)[6]
    assert picked["value"] == "r1"


def test_the_runs_table_has_named_columns_and_no_blank_row(ctx):
    empty = run_view.runs_table(ctx)
    assert list(empty.columns) == run_view.RUN_COLUMNS and len(empty) == 0
    assert len(run_view.watch(ctx, None)[4]) == 0
    _run(ctx, "r1", {"state": "finished", "mode": "lora", "step": 4, "total": 4})
    table = run_view.runs_table(ctx)
    assert list(table.columns) == run_view.RUN_COLUMNS and list(table["run"]) == ["r1"]


def test_the_api_takes_a_minutes_budget_last_and_serves_named_columns(tmp_path):
    """Through gradio_client: /start_training has two more optional inputs at its end (stop after,
    minutes), so callers of the first 21 keep working; /watch_run's Runs table has named headers
    and no rows before the first run, and its loss curve keeps its shape."""
    ws, shipped = page_workspace(tmp_path)
    app = build_app(tmp_path / "ws", shipped_dir=shipped, background_jobs=False)
    with LiveServer(app, free_port()) as server:
        client = Client(server.url, verbose=False)
        params = client.view_api(print_info=False, return_format="dict")["named_endpoints"][
            "/start_training"]["parameters"]
        assert len(params) == START_INPUTS and [p["parameter_default"] for p in params[21:23]] == ["steps", 10]
        # then processes, parallelism and report_to (tests/studio/test_webapp_processes.py)
        # processes, parallelism, report_to, extend_vocab, architecture, task, class_weights, run_name
        assert [p["parameter_default"] for p in params[23:]] == [1, "ddp", [], False, "rope", "generate", "", ""]
        progress, facts, curve, log, runs, queue, run_id = client.predict("", api_name="/watch_run")
        assert runs["headers"] == run_view.RUN_COLUMNS and runs["data"] == []
        ctx = AppContext(ws, JobManager(ws), shipped_dir=shipped)
        _run(ctx, "r1", {"state": "finished", "mode": "lora", "step": 2, "total": 2},
             [{"step": 2, "loss": 3.0}, {"step": 2, "val_loss": 3.1}])
        curve = client.predict("r1", api_name="/watch_run")[2]
        assert sorted(row[2] for row in curve["data"]) == ["train", "validation"]
        _run(ctx, "r2", {"state": "running", "mode": "lora", "step": 1, "total": 2}, [{"step": 1, "loss": 3.0}])
        curve = client.predict("r2", api_name="/watch_run")[2]  # the unmeasured validation point: no value
        assert sorted(curve["data"], key=lambda row: row[2]) == [[1, 3.0, "train"], [1, None, "validation"]]


@pytest.mark.parametrize("field, value, says", [
    ("steps", None, "steps must be a number between 1"),
    ("batch", None, "batch size must be a number between 1 and 4096"),
    ("seq_len", None, "sequence length must be a number between 8 and 65536"), ("seq_len", 10**9, "sequence length"),
    ("lr", None, "learning rate must be a number"), ("lr", "fast", "learning rate must be a number"),
    ("accum", None, "gradient accumulation"), ("rank", None, "LoRA rank"), ("alpha", None, "LoRA alpha"),
    ("batch", 2.5, "whole number"), ("precision", ["fp32"], "precision must be one of the page's choices")])
def test_an_emptied_or_odd_form_value_gets_a_sentence_naming_it(ctx, field, value, says):
    with pytest.raises(WorkspaceError, match=says):
        TrainForm(base=BASE, mode="lora", corpus="chats", **{**NUMBERS, field: value}).to_config(ctx)
    with pytest.raises(WorkspaceError, match="start from must be one of the page's choices"):
        TrainForm(base=[BASE], mode="lora", corpus="chats", **NUMBERS).to_config(ctx)


# ---- named runs ----------------------------------------------------------------------------

@pytest.mark.parametrize("typed, made", [("Tang poems v2", "Tang-poems-v2"), ("  lora_run  ", "lora_run"),
                                         ("唐诗 第一次", "唐诗-第一次"), ("a.b:c*?d", "a-b-c-d"), ("--x--", "x"),
                                         ("x" * 80, "x" * workspace.MAX_RUN_NAME)])
def test_a_run_name_is_made_folder_safe(typed, made):
    assert workspace.run_name(typed) == made
    assert workspace.safe_name(made) == made  # what run_dir looks a run up by: the same id


@pytest.mark.parametrize("typed", ["../../etc", "a/b", "..", "a\\b", "/tmp/x", "  ", "😀", "...", 3, ["x"]])
def test_a_run_name_with_a_path_or_nothing_usable_is_refused(tmp_path, typed):
    ws = Workspace(tmp_path / "ws")
    with pytest.raises(WorkspaceError, match="run name"):
        ws.new_run_dir("lora", name=typed) if str(typed).strip() else workspace.run_name(typed)
    assert list(ws.runs.iterdir()) == []  # nothing made, inside the runs folder or out of it
    assert not (tmp_path / "etc").exists() and not (tmp_path / "ws" / "etc").exists()


def test_run_ids_are_readable_unique_and_old_time_stamps_still_work(tmp_path):
    ws = Workspace(tmp_path / "ws")
    assert [ws.new_run_dir("lora").name for _ in range(3)] == ["lora-1", "lora-2", "lora-3"]
    assert ws.new_run_dir("grpo").name == "grpo-1"  # numbered per mode
    assert [ws.new_run_dir("lora", name="tang").name for _ in range(3)] == ["tang", "tang-2", "tang-3"]
    assert ws.new_run_dir("lora", name="TANG").name == "TANG-4"  # one run per name, whatever its case
    assert ws.new_run_dir("lora", name="lora-7").name == "lora-7"
    assert ws.new_run_dir("lora").name == "lora-8"  # the next number after the highest
    assert ws.new_run_dir("sft", name="x" * 40).name == "x" * workspace.MAX_RUN_NAME
    assert ws.new_run_dir("sft", name="x" * 40).name == "x" * (workspace.MAX_RUN_NAME - 2) + "-2"  # still short
    for made in ws.runs.iterdir():
        assert made.parent == ws.runs and made.is_dir()
    old = RunDir(ws.runs / "20261204-205959-pretrain").create()  # a run named before runs had names
    TrainConfig.from_dict({"mode": "pretrain", "max_steps": 4, "data": {"files": ["x"]}}).save(old.config_file)
    old.write_status(state="finished", mode="pretrain", step=4, total=4)
    assert ws.run_dir("20261204-205959-pretrain") == old.path


def test_runs_are_listed_newest_first_by_when_they_were_made_not_by_name(ctx):
    old = _run(ctx, "20261204-205959-pretrain", {"state": "finished", "mode": "pretrain"})  # a time-stamped id
    zebra = _run(ctx, "zebra", {"state": "finished", "mode": "lora", "created": 1.0e10})  # made later, named z
    apple = _run(ctx, "apple", {"state": "queued", "mode": "lora", "created": 1.0e10 + 5})
    assert [r.path.name for r in ctx.jobs.runs()] == ["apple", "zebra", old.path.name]
    assert run_view.run_choices(ctx) == ["apple", "zebra", old.path.name]
    assert list(run_view.runs_table(ctx)["run"]) == ["apple", "zebra", old.path.name]
    assert zebra.path.name == "zebra" and apple.path.name == "apple"


def test_a_named_run_is_that_name_in_the_runs_table_the_run_box_the_legend_and_the_api(ctx, monkeypatch):
    from webapp.app import sync_registry
    from webapp.tabs import compare, train

    monkeypatch.setattr(ctx.jobs, "pump", lambda: None)  # queued only: nothing trains here
    named = TrainForm(base=BASE, mode="lora", corpus="chats", **NUMBERS, run_name="tang poems")
    choice, said = train.start(ctx, named)
    assert choice["value"] == "tang-poems" and "tang-poems" in choice["choices"] and "tang-poems" in said
    assert list(run_view.runs_table(ctx)["run"]) == ["tang-poems"]
    default = train.start(ctx, TrainForm(base=BASE, mode="lora", corpus="chats", **NUMBERS))[0]["value"]
    assert default == "lora-1"
    again = train.start(ctx, named)[0]["value"]
    assert again == "tang-poems-2"  # a name taken: the next free one
    with pytest.raises(WorkspaceError, match="not a path"):
        train.start(ctx, TrainForm(base=BASE, mode="lora", corpus="chats", **NUMBERS, run_name="../../x"))
    assert sorted(p.name for p in ctx.workspace.runs.iterdir()) == ["lora-1", "tang-poems", "tang-poems-2"]
    status = RunDir(ctx.workspace.runs / "tang-poems").read_status()
    assert status["form"]["run_name"] == "tang poems" and status["form"]["corpus"] == "chats"

    run = RunDir(ctx.workspace.runs / "tang-poems")  # finished: a model, listed by the API under its name
    run.append_metrics({"step": 5, "loss": 3.0})
    run.append_metrics({"step": 5, "val_loss": 3.1})
    final = run.checkpoints / "step-5"
    final.mkdir(parents=True)
    (final / "config.json").write_text("{}")
    run.write_status(state="finished", step=5, final_checkpoint=str(final))
    assert ("run:tang-poems" in {model_id for _, model_id in ctx.model_choices()})
    added = []

    class Registry:
        def names(self):
            return []

        def __contains__(self, name):
            return False

        def add_folder(self, path, name):
            added.append(name)

    sync_registry(ctx, Registry())
    assert "run-tang-poems" in added  # /v1/models: run-<run id>
    series = set(compare.overlay([run])["series"])
    assert series == {"tang-poems · train", "tang-poems · validation"}  # the legend says the name, short


# ---- the form: its two layers and what shows for each mode -----------------------------------

@pytest.mark.parametrize("mode, weights, base, shown", [
    ("lora", "full", BASE, {"rank", "alpha", "extend_vocab"}),
    ("qlora", "full", BASE, {"rank", "alpha", "extend_vocab"}),
    ("sft", "full", BASE, {"extend_vocab"}),
    ("pretrain", "full", "new:auto", {"architecture"}),
    ("pretrain", "full", BASE, {"extend_vocab"}),
    ("dpo", "full", BASE, {"weights", "beta"}),
    ("dpo", "lora", BASE, {"weights", "beta", "rank", "alpha"}),
    ("distill", "full", "new:auto", {"weights", "teacher", "temperature", "kl_weight", "architecture"}),
    ("distill", "qlora", BASE, {"weights", "teacher", "temperature", "kl_weight", "rank", "alpha"}),
    ("grpo", "full", BASE, {"weights", "grpo"}),  # full-weight GRPO: no LoRA rank or alpha
    ("grpo", "lora", BASE, {"weights", "grpo", "rank", "alpha"}),
])
def test_fields_show_only_for_the_modes_that_use_them(mode, weights, base, shown):
    from webapp.tabs import train

    assert {name for name, on in train_form.shown_fields(mode, weights, base).items() if on} == shown
    updates = train.visibility(mode, weights, base, "generate")
    assert [u["visible"] for u in updates] == [bool(shown & set(train.OBJECTIVE_ROW))] + [
        name in shown for name in train.VISIBLE]
    hidden_vocab = updates[1 + train.VISIBLE.index("extend_vocab")]
    assert ("value" in hidden_vocab) is ("extend_vocab" not in shown)  # hidden: unticked, not left ticked
    assert train_form.shown_fields("lora", task="classify")["class_weights"]
    assert not train_form.shown_fields("lora", task="generate")["class_weights"]


def test_the_corpus_is_the_one_saved_last_and_a_reload_shows_the_training_runs_form(tmp_path, monkeypatch):
    from helpers import ROOT

    from webapp.tabs import train

    ws, shipped = page_workspace(tmp_path, corpora=())
    ctx = AppContext(ws, JobManager(ws), shipped_dir=shipped)
    assert train_form.last_corpus(ctx) is None and "value" not in train.opened(ctx)["corpus"]
    for name, when in (("zeta", 300.0), ("alpha", 100.0), ("mid", 200.0)):
        ws.save_corpus(name, [ROOT / "samples" / "tang_chat_sample.jsonl"], {"kind": "auto"}, {"kind": "chat"})
        meta = ws.corpora / name / "corpus.json"
        meta.write_text(meta.read_text().replace('"created": ', f'"created": {when}, "was": '))
    assert train_form.last_corpus(ctx) == "zeta"  # saved last, whatever its name
    opened = train.opened(ctx)
    assert opened["corpus"]["value"] == "zeta" and opened["picked"] is False and "steps" not in opened
    assert train.newest_corpus(ctx, False, None)["value"] == "zeta"
    assert "value" not in train.newest_corpus(ctx, True, "alpha")  # the user's choice is kept

    monkeypatch.setattr(ctx.jobs, "pump", lambda: None)
    typed = TrainForm(base=BASE, mode="lora", corpus="mid", **{**NUMBERS, "steps": 7, "seq_len": 96}, run_name="r")
    train.start(ctx, typed)  # queued: a reload while it waits (or trains) shows what it was started with
    opened = train.opened(ctx)
    assert opened["corpus"]["value"] == "mid" and opened["picked"] is True
    assert opened["steps"]["value"] == 7 and opened["seq_len"]["value"] == 96 and opened["run_name"]["value"] == "r"
    assert "rewards" not in opened
    RunDir(ws.runs / "r").write_status(state="finished")
    assert "steps" not in train.opened(ctx)  # no run trains: the page's own defaults


def test_a_plot_once_drawn_never_gets_none():
    """Gradio 6's plot leaves size watchers behind when its value becomes None, and they then read its
    removed drawing (the console's "Cannot read properties of null (reading 'offsetWidth')")."""
    from webapp.tabs import train

    empty = train.kept_drawn(None, train.LOSS_COLUMNS)
    assert list(empty.columns) == train.LOSS_COLUMNS and len(empty) == 0 and empty["step"].dtype == float
    lines = train.kept_drawn(None, train.LOSS_COLUMNS, ("train", "validation"))  # both lines named from the start
    assert list(lines["series"]) == ["train", "validation"] and lines["loss"].isna().all()
    update = train.kept_drawn({"__type__": "update", "value": None, "x_title": "步数"}, train.LOSS_COLUMNS)
    assert update["x_title"] == "步数" and len(update["value"]) == 0
    assert train.kept_drawn({"__type__": "update", "visible": True}, train.LOSS_COLUMNS) == {
        "__type__": "update", "visible": True}  # no value given: none set


def _skipped(output) -> bool:
    """An output the answer leaves as the page has it (gr.skip(), as the page receives it)."""
    return isinstance(output, dict) and output.get("__type__") == "update" and "value" not in output and all(
        _skipped(v) for k, v in output.items() if k != "__type__")


def _tick(url: str, dependency: dict, data: list, session: str) -> list:
    """The outputs of one tick of the page's watch, called as the page calls it (queue/join by
    number, the page's session: its States kept between calls)."""
    import json

    import httpx

    with httpx.Client(timeout=30) as http:
        joined = http.post(f"{url}/gradio_api/queue/join", json={
            "data": data, "fn_index": dependency["id"], "session_hash": session, "event_data": None,
            "trigger_id": dependency["targets"][0][0]})
        assert joined.status_code == 200, joined.text
        with http.stream("GET", f"{url}/gradio_api/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                message = json.loads(line[6:]) if line.startswith("data: ") else {}
                if message.get("msg") == "process_completed":
                    assert message["success"], message
                    return message["output"]["data"]
    raise AssertionError("no answer")


def test_a_tick_of_the_page_is_one_event_that_sends_only_what_changed(tmp_path):
    """Every 2 s while a run trains (10 s while none does or waits) the page asks for all it shows
    of the run in one event (five chained events made
    the browser update itself five times a tick), and gets back only what changed since its last
    answer: an unchanged plot, log or table is not drawn again (with no run training, the page
    kept a third of a CPU core busy in the browser). The message is sent each time (Stop and
    Resume write it too); another page (session) gets everything."""
    ws, shipped = page_workspace(tmp_path)
    app = build_app(tmp_path / "ws", shipped_dir=shipped, background_jobs=False)
    with LiveServer(app, free_port()) as server:
        import httpx

        config = httpx.get(server.url + "/config").json()
        names = {c["id"]: c.get("props", {}).get("elem_id") or c.get("type") for c in config["components"]}
        (tick,) = [d for d in config["dependencies"] if any(t[1] == "tick" for t in d["targets"])]
        shown = [names[i] for i in tick["outputs"]]
        for elem in ("train-progress", "train-facts", "loss-plot", "train-log", "runs-table", "train-queue",
                     "train-run", "objective-plot", "rollouts-table", "train-message", "confusion-table"):
            assert elem in shown, (elem, shown)
        data = [None] * len(tick["inputs"])
        first = dict(zip(shown, _tick(server.url, tick, data, "page-1")))
        assert first["loss-plot"]["columns"] == ["step", "loss", "series"] and first["runs-table"]["data"] == []
        assert first["timer"] == train.WATCH_IDLE_S  # nothing trains: the page asks again in 10 s
        again = dict(zip(shown, _tick(server.url, tick, data, "page-1")))
        assert all(_skipped(again[e]) for e in ("train-progress", "loss-plot", "train-log", "runs-table",
                                                "train-queue", "objective-plot", "rollouts-table", "timer")), again
        assert again["train-message"] == ""  # sent each time
        ctx = AppContext(ws, JobManager(ws), shipped_dir=shipped)
        # a running run: its process lives, and its command line names minimind (as the trainer's does)
        trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "minimind"])
        try:
            _run(ctx, "r1", {"state": "running", "mode": "lora", "step": 1, "total": 4, "pid": trainer.pid},
                 [{"step": 1, "loss": 3.0}], log="step 1\n")
            changed = dict(zip(shown, _tick(server.url, tick, data, "page-1")))
            again = _tick(server.url, tick, data, "page-1")
        finally:
            trainer.kill()
            trainer.wait()
        assert "step" in changed["train-progress"] and changed["runs-table"]["data"][0][0] == "r1"
        assert [row[1] for row in changed["loss-plot"]["data"]] == [3.0, None]
        assert _skipped(changed["train-queue"])  # still empty
        assert changed["timer"] == train.WATCH_BUSY_S  # a run trains: every 2 s
        assert _skipped(again[shown.index("timer")])
        run = RunDir(ws.runs / "r1")
        run.write_status(state="stopped")  # just now: its last log line may follow, so every 2 s still
        assert _skipped(_tick(server.url, tick, data, "page-1")[shown.index("timer")])
        for path in (run.status_file, run.log_file):  # nothing written for a minute: every 10 s
            os.utime(path, (time.time() - 60, time.time() - 60))
        assert _tick(server.url, tick, data, "page-1")[shown.index("timer")] == train.WATCH_IDLE_S
        other = dict(zip(shown, _tick(server.url, tick, data, "page-2")))  # another page: all of it
        assert not _skipped(other["train-queue"]) and other["loss-plot"] == changed["loss-plot"]


def test_changed_only_skips_what_was_sent_and_sends_all_after_a_reset():
    import pandas as pd

    answers = iter([("a", pd.DataFrame({"x": [1.0]}), "m"), ("a", pd.DataFrame({"x": [1.0]}), "m"),
                    ("a", pd.DataFrame({"x": [2.0]}), "m"), ({"__type__": "update"}, pd.DataFrame({"x": [2.0]}), "m"),
                    ("a", pd.DataFrame({"x": [2.0]}), "m"), ("a", pd.DataFrame({"x": [2.0]}), "m")])
    watch = run_view.changed_only(lambda: next(answers), 3, always=(2,))
    skip = {"__type__": "update"}
    *out, sent = watch(None)
    assert out[0] == "a" and out[2] == "m"
    *out, sent = watch(sent)
    assert out[:2] == [skip, skip] and out[2] == "m"  # unchanged: skipped; `always`: sent
    *out, sent = watch(sent)
    assert out[0] == skip and list(out[1]["x"]) == [2.0]
    *out, sent = watch(sent)  # an update that says nothing keeps what the page has
    *out, sent = watch(sent)
    assert out[0] == skip
    *out, sent = watch(None)  # reset (Start pressed): all of it again
    assert out[0] == "a" and list(out[1]["x"]) == [2.0]

"""Compare runs on the Train tab (issue 17, item 3): two runs' loss curves on one plot by step,
wall-clock time or tokens, a table of their final figures, hostile picks refused in a sentence;
and the new-model form's architecture field, mapped onto the training config. Fast: run folders
are written by hand, as the trainer writes them (config.yaml, status.json, metrics.jsonl)."""

import dataclasses

import gradio as gr
import pytest
import yaml
from gradio_client import Client

from minimind.training import RunDir, TrainConfig
from minimind.training.config import ModelSection
from webapp.app import build_app
from webapp.context import AppContext, user_errors
from webapp.i18n import EN
from webapp.jobs import JobManager
from webapp.tabs import compare, run_view
from webapp.tabs.train_form import TrainForm
from webapp.workspace import Workspace, WorkspaceError
from helpers import ROOT
from webapp_helpers import START_INPUTS, LiveServer, free_port

NUMBERS = {"steps": 5, "batch": 2, "seq_len": 64, "lr": 1e-4, "accum": 1,
           "precision": "fp32", "rank": 4, "alpha": 8, "eval_every": 0}
SHIPPED = "shipped:minimind-tang"


@pytest.fixture
def ctx(tmp_path):
    shipped = tmp_path / "checkpoints"
    (shipped / "minimind-tang").mkdir(parents=True)
    (shipped / "minimind-tang" / "config.json").write_text("{}")
    ws = Workspace(tmp_path / "ws")
    ws.save_corpus("tang", [ROOT / "samples" / "shakespeare_sample.txt"], {"kind": "auto"}, {"kind": "text", "documents": 9})
    return AppContext(ws, JobManager(ws), shipped_dir=shipped)


def _train_row(step, loss, tokens_per_step=512, seconds_per_step=0.5):
    """A training line as the trainer logs it."""
    return {"step": step, "loss": loss, "lr": 1e-3, "grad_norm": 1.0, "tokens_per_s": tokens_per_step / seconds_per_step,
            "mfu": 0.01, "tokens": tokens_per_step * step, "epoch": 0, "elapsed_s": seconds_per_step * step}


def _run(ctx, name, model, metrics, status):
    """A finished run folder: its config (model section `model`), metrics and status."""
    run = RunDir(ctx.workspace.runs / name).create()
    raw = TrainConfig.from_dict({"mode": "pretrain", "max_steps": 4, "data": {"files": ["x"]}}).to_dict()
    raw["model"].update(model)  # (model.architecture: written as the trainer will, before its field exists here)
    run.config_file.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    for record in metrics:
        run.append_metrics(record)
    run.write_status(state="finished", **status)
    return run


def _two_runs(ctx):
    a = _run(ctx, "r-alibi", {"preset": "nano", "overrides": {"position_encoding": "alibi"}},
             [_train_row(2, 5.0), _train_row(4, 4.0), {"step": 4, "val_loss": 4.5, "val_bpc": 2.1}],
             {"step": 4, "total": 4, "params": 1_234_567, "tokens": 2048, "elapsed_s": 2.0, "tokens_per_s": 999.0})
    b = _run(ctx, "r-lstm", {"preset": "nano", "architecture": "lstm", "overrides": {"use_attention": True}},
             [_train_row(1, 6.0, 256, 0.25), {"step": 1, "val_loss": 5.8, "val_bpc": 2.9},
              _train_row(3, 5.0, 256, 0.25), {"step": 2, "val_loss": 5.2, "val_bpc": 2.6}],
             {"step": 3, "total": 3, "params": 654_321, "tokens": 768, "elapsed_s": 75.0})
    return a, b


# ---- the overlay -----------------------------------------------------------------------------

def test_the_overlay_has_each_runs_train_and_validation_line_by_step(ctx):
    _two_runs(ctx)
    plot, table = compare.compare(ctx, ["r-alibi", "r-lstm"], "step")
    curve = plot["value"]
    assert list(curve.columns) == ["x", "loss", "series"]
    assert plot["colors_in_legend"] == ["r-alibi · train", "r-alibi · validation", "r-lstm · train",
                                        "r-lstm · validation"]
    assert plot["x_title"] == "step"
    rows = {(r.series, r.x): r.loss for r in curve.itertuples()}
    assert rows == {("r-alibi · train", 2): 5.0, ("r-alibi · train", 4): 4.0, ("r-alibi · validation", 4): 4.5,
                    ("r-lstm · train", 1): 6.0, ("r-lstm · validation", 1): 5.8, ("r-lstm · train", 3): 5.0,
                    ("r-lstm · validation", 2): 5.2}


@pytest.mark.parametrize("axis, title, alibi_val, lstm_vals", [
    ("time", EN["cmp_x_time"], 2.0, [0.25, 0.5]),  # the validation lines: elapsed of their step
    ("tokens", EN["cmp_x_tokens"], 2048, [256, 512]),  # ... and the tokens seen by then
])
def test_time_and_tokens_axes_place_evaluations_between_the_logged_steps(ctx, axis, title, alibi_val, lstm_vals):
    _two_runs(ctx)
    plot, _ = compare.compare(ctx, ["r-alibi", "r-lstm"], axis)
    curve = plot["value"]
    assert plot["x_title"] == title
    assert list(curve[curve.series == "r-alibi · validation"].x) == [alibi_val]
    assert list(curve[curve.series == "r-lstm · validation"].x) == pytest.approx(lstm_vals)
    train_x = list(curve[curve.series == "r-alibi · train"].x)
    assert train_x == ([1.0, 2.0] if axis == "time" else [1024, 2048])


def test_a_run_without_evaluations_or_metrics_yet_draws_what_it_has(ctx):
    _run(ctx, "r-new", {}, [], {"step": 0, "total": 4})
    _run(ctx, "r-one", {}, [_train_row(1, 7.0)], {"step": 1, "total": 4})
    plot, table = compare.compare(ctx, ["r-new", "r-one"], "tokens")
    assert plot["colors_in_legend"] == ["r-one · train"]
    assert list(table["run"]) == ["r-new", "r-one"] and table["train_loss"].isna().tolist() == [True, False]


# ---- the table -------------------------------------------------------------------------------

def test_the_table_holds_each_runs_final_figures(ctx):
    _two_runs(ctx)
    _, table = compare.compare(ctx, ["r-alibi", "r-lstm"], "step")
    assert list(table.columns) == compare.COLUMNS
    alibi, lstm = table.to_dict("records")
    assert alibi == {"run": "r-alibi", "architecture": "Transformer · ALiBi", "parameters": 1_234_567, "steps": 4,
                     "train_loss": 4.0, "val_loss": 4.5, "val_bpc": 2.1, "tokens_per_s": 1024.0, "elapsed": "2s"}
    assert lstm["architecture"] == "LSTM + attention" and lstm["val_loss"] == 5.2 and lstm["val_bpc"] == 2.6
    assert lstm["train_loss"] == 5.0 and lstm["steps"] == 3 and lstm["elapsed"] == "1m 15s"


def test_the_architecture_of_a_fine_tune_is_its_checkpoints(ctx):
    run = _run(ctx, "r-ft", {"init_from": "/nowhere"}, [], {"step": 1})
    assert compare.run_architecture(run) == "rope"  # nothing to read: the default
    step = run.checkpoints / "step-1"
    step.mkdir(parents=True)
    (step / "config.json").write_text('{"model_type": "minimind", "position_encoding": "sinusoidal"}')
    assert compare.run_architecture(run) == "sinusoidal"


def test_the_run_view_names_the_architecture(ctx):
    _two_runs(ctx)
    facts = run_view.watch(ctx, "r-lstm")[1]
    assert "**Architecture:** LSTM + attention" in facts


# ---- hostile picks ---------------------------------------------------------------------------

@pytest.mark.parametrize("picked, message", [
    ([], "choose one or more runs"),
    (None, "choose one or more runs"),
    (["r-alibi", "../../etc"], "no run named '../../etc' in this workspace"),
    (["/etc/passwd"], "no run named 'passwd' in this workspace"),  # (the page names no absolute path)
    ([{"path": "/"}], "no run named {'path': '/'} in this workspace"),
    ([7], "no run named 7 in this workspace"),
    (["x" * 500], "no run named 'xxxxxxxx"),
    ([f"r{i}" for i in range(compare.MAX_RUNS + 1)], f"compare at most {compare.MAX_RUNS} runs"),
    ({"r-alibi": 1}, "choose one or more runs"),
])
def test_hostile_picks_are_refused_in_a_sentence(ctx, picked, message):
    _two_runs(ctx)
    with pytest.raises(gr.Error) as refused:
        user_errors(lambda p: compare.compare(ctx, p, "step"))(picked)
    text = str(refused.value.message)
    assert message in text and "Traceback" not in text and str(ctx.workspace.root) not in text
    assert len(text) < 140


@pytest.mark.parametrize("axis", ["wall", "../x", 3, ["step"]])
def test_an_unknown_axis_is_refused(ctx, axis):
    _two_runs(ctx)
    with pytest.raises(WorkspaceError, match="the x axis must be one of step, time, tokens"):
        compare.compare(ctx, ["r-alibi"], axis)


def test_a_single_run_name_is_taken_as_a_pick_of_one_and_no_axis_as_steps(ctx):
    _two_runs(ctx)
    plot, table = compare.compare(ctx, "r-lstm", None)
    assert list(table["run"]) == ["r-lstm"] and plot["x_title"] == "step"


# ---- the architecture field ------------------------------------------------------------------

def test_every_architecture_has_its_label_in_both_languages():
    from webapp.i18n import ZH

    assert [EN[f"arch_{a}"] for a in compare.ARCHITECTURES] == [
        "Transformer · rotary (RoPE)", "Transformer · ALiBi", "Transformer · sinusoidal",
        "Transformer · learned positions", "Transformer · no positions (NoPE)", "LSTM", "LSTM + attention"]
    assert all(ZH[f"arch_{a}"] != EN[f"arch_{a}"] for a in compare.ARCHITECTURES)


@pytest.mark.parametrize("architecture, expected", [
    ("rope", {}), (None, {}),
    ("alibi", {"overrides": {"position_encoding": "alibi"}}),
    ("sinusoidal", {"overrides": {"position_encoding": "sinusoidal"}}),
    ("learned", {"overrides": {"position_encoding": "learned"}}),
    ("none", {"overrides": {"position_encoding": "none"}}),
    ("lstm", {"architecture": "lstm"}),
    ("lstm_attention", {"architecture": "lstm", "overrides": {"use_attention": True}}),
])
def test_the_architecture_maps_onto_the_model_section(architecture, expected):
    assert compare.model_settings(architecture) == expected


@pytest.mark.parametrize("bad", ["gpt", "../rope", 3, ["rope"]])
def test_an_unknown_architecture_is_refused(ctx, bad):
    with pytest.raises(WorkspaceError, match="architecture must be one of rope, alibi"):
        TrainForm(base="new:nano", mode="pretrain", corpus="tang", **NUMBERS, architecture=bad).to_config(ctx)


@pytest.mark.parametrize("architecture", ["alibi", "sinusoidal", "learned", "none"])
def test_a_new_transformer_gets_its_position_encoding(ctx, architecture):
    form = TrainForm(base="new:nano", mode="pretrain", corpus="tang", **NUMBERS, architecture=architecture)
    config = form.to_config(ctx)
    assert config.model.preset == "nano" and config.model.overrides == {"position_encoding": architecture}


def test_the_default_new_model_is_unchanged(ctx):
    config = TrainForm(base="new:nano", mode="pretrain", corpus="tang", **NUMBERS).to_config(ctx)
    assert config.model.overrides == {} and config.model.preset == "nano"


@pytest.mark.skipif("architecture" not in {f.name for f in dataclasses.fields(ModelSection)},
                    reason="model.architecture (the LSTM family) is not in the training config yet")
@pytest.mark.parametrize("architecture, attention", [("lstm", None), ("lstm_attention", True)])
def test_a_new_lstm_is_an_lstm_run(ctx, architecture, attention):
    form = TrainForm(base="new:nano", mode="pretrain", corpus="tang", **NUMBERS, architecture=architecture)
    config = form.to_config(ctx)
    assert config.model.architecture == "lstm"
    assert config.model.overrides.get("use_attention") == attention


def test_fine_tuning_ignores_the_architecture(ctx):
    form = TrainForm(base=SHIPPED, mode="lora", corpus="tang", **NUMBERS, architecture="lstm_attention")
    config = form.to_config(ctx)
    assert config.model.overrides == {} and config.model.init_from.endswith("minimind-tang")
    assert getattr(config.model, "architecture", "transformer") != "lstm"


# ---- through the page's API ------------------------------------------------------------------

def test_the_api_compares_runs_and_takes_the_architecture_last(tmp_path, ctx):
    _two_runs(ctx)
    app = build_app(ctx.workspace.root, shipped_dir=ctx.shipped_dir, background_jobs=False)
    with LiveServer(app, free_port()) as server:
        client = Client(server.url, verbose=False)
        params = client.view_api(print_info=False, return_format="dict")["named_endpoints"][
            "/start_training"]["parameters"]
        assert len(params) == START_INPUTS and params[27]["parameter_default"] == "rope"
        plot, table = client.predict(["r-alibi", "r-lstm"], "tokens", api_name="/compare_runs")
        assert {row[2] for row in plot["value"]["data"]} == {"r-alibi · train", "r-alibi · validation",
                                                              "r-lstm · train", "r-lstm · validation"}
        assert table["headers"] == compare.COLUMNS and [r[0] for r in table["data"]] == ["r-alibi", "r-lstm"]
        with pytest.raises(Exception, match="no run named '../r-alibi' in this workspace") as refused:
            client.predict(["../r-alibi"], "step", api_name="/compare_runs")
        assert str(tmp_path) not in str(refused.value)

"""The Train tab's Reinforce (GRPO) mode: the config its inputs build (rewards, weights, parameters),
bad rewards and out-of-bounds numbers refused with a message before any work, and a run's rewards
plot and held-out answers read back from a run folder written by hand. Fast: model folders are
stand-ins (a config.json)."""

import json

import gradio as gr
import pytest
from gradio_client import Client

from minimind.errors import ConfigError
from minimind.training import RunDir, TrainConfig
from minimind.training.rewards import describe_rewards
from webapp.app import build_app
from webapp.context import AppContext, user_errors
from webapp.jobs import JobManager
from webapp.tabs import grpo, run_view, train, train_form
from webapp.tabs.train_form import TrainForm
from webapp.workspace import WorkspaceError
from webapp_helpers import START_INPUTS, LiveServer, free_port, page_workspace

NUMBERS = {"steps": 5, "batch": 2, "seq_len": 64, "lr": 1e-4, "accum": 1,
           "precision": "fp32", "rank": 4, "alpha": 8, "eval_every": 0}
BASE = "shipped:minimind-tang"
DISTILL_AND_DPO = ["full", 0.5, BASE, 2.0, 0.5]  # weights, beta, teacher, temperature, kl_weight


@pytest.fixture
def ctx(tmp_path):
    ws, shipped = page_workspace(tmp_path, corpora=("prompts", "chats"))
    return AppContext(ws, JobManager(ws), shipped_dir=shipped)


def _widgets(**ticked) -> list:
    """The reward boxes' values as the page sends them: every reward unticked at its defaults,
    except those given as name=(weight, {param: value as typed})."""
    values = []
    for kind in describe_rewards():
        weight, params = ticked.get(kind["name"], (1.0, {}))
        values += [kind["name"] in ticked, weight]
        for p in kind["params"]:
            typed = ", ".join(p["default"]) if p["kind"] == "list" else p["default"]
            values.append(params.get(p["name"], typed))
    return values


def _config(ctx, corpus="prompts", mode="grpo", **objective):
    return TrainForm(base=BASE, mode=mode, corpus=corpus, **NUMBERS, **objective).to_config(ctx)


def test_the_mode_and_its_reward_boxes_come_from_the_library():
    assert "grpo" in train_form.MODES and train_form.MODES[-1] == "grpo"
    assert [k["name"] for k in grpo.REWARD_KINDS] == [k["name"] for k in describe_rewards()]
    assert grpo.default_spec() == [{"name": "form", "weight": 1.0}, {"name": "rhyme", "weight": 1.0},
                                   {"name": "title", "weight": 0.5}]
    lr, steps, batch = train_form.defaults_for("grpo")
    assert lr < train_form.defaults_for("grpo", "lora")[0] and steps > 0 and batch >= 1


def test_the_config_built_from_the_page_inputs(ctx):
    spec = grpo.reward_spec(*_widgets(form=(1.0, {}), rhyme=(0.5, {}),
                                      contains=(2.0, {"text": "月， 花\n春"}), length=(1, {"max_chars": 28}),
                                      regex=(0.25, {"pattern": "[。！]$"})))
    assert spec == [{"name": "form", "weight": 1.0}, {"name": "rhyme", "weight": 0.5},
                    {"name": "length", "weight": 1, "max_chars": 28},  # parameters at their default left out
                    {"name": "regex", "weight": 0.25, "pattern": "[。！]$"},
                    {"name": "contains", "weight": 2.0, "text": ["月", "花", "春"]}]
    config = _config(ctx, rewards=spec, group_size=4, grpo_beta=0.1, max_new_tokens=32, weights="lora")
    assert (config.mode, config.objective, config.adapter, config.adapter_kind) == ("grpo", "grpo", "lora", "lora")
    assert config.grpo.rewards == spec
    assert (config.grpo.group_size, config.grpo.beta, config.grpo.max_new_tokens) == (4, 0.1, 32)
    assert config.model.init_from == str(ctx.shipped_dir / "minimind-tang") and not config.new_model
    assert config.data.files == [str(ctx.workspace.corpora / "prompts" / "tang_prompts.jsonl")]
    assert TrainConfig.from_dict(config.to_dict()).grpo.rewards == spec  # what config.yaml keeps

    # an API caller may send the list as JSON text; with no rewards at all it gets the page's default
    text = _config(ctx, rewards=json.dumps([{"name": "avoid", "weight": 1, "text": ["春"]}]))
    assert text.grpo.rewards == [{"name": "avoid", "weight": 1, "text": ["春"]}] and text.adapter == ""
    default = _config(ctx)
    assert default.grpo.rewards == grpo.default_spec() and default.grpo.group_size == 8

    # other modes ignore the grpo inputs, even bad ones
    sft = _config(ctx, "chats", "lora", rewards=[], group_size=100)
    assert sft.grpo.rewards == [] and sft.grpo.group_size == 8


def test_a_bad_reward_shows_the_config_error_before_any_run(ctx):
    bad = grpo.reward_spec(*_widgets(regex=(1.0, {"pattern": "(unclosed"})))
    with pytest.raises(ConfigError, match=r"reward 'regex': pattern '\(unclosed' does not compile"):
        _config(ctx, rewards=bad)
    # on the page: the same message, and no run folder
    with pytest.raises(gr.Error, match="does not compile") as shown:
        user_errors(lambda: train.start(ctx, TrainForm(base=BASE, mode="grpo", corpus="prompts", **NUMBERS,
                                                       rewards=bad)))()
    assert "Traceback" not in str(shown.value) and not list(ctx.workspace.runs.iterdir())
    with pytest.raises(ConfigError, match="parameter .pattern. is required"):
        _config(ctx, rewards=grpo.reward_spec(*_widgets(regex=(1.0, {}))))
    with pytest.raises(ConfigError, match=r"weight must be a number between 0 and 1000 \(only the weights. ratios matter\), got None"):
        _config(ctx, rewards=grpo.reward_spec(*_widgets(form=(None, {}))))
    with pytest.raises(ConfigError, match="unknown reward 'python'"):
        _config(ctx, rewards=[{"name": "python", "code": "import os"}])


@pytest.mark.parametrize("objective, message", [
    ({"group_size": 1}, "group size must be a whole number between 2 and 16"),
    ({"group_size": 17}, "group size must be a whole number between 2 and 16"),
    ({"group_size": 2.5}, "group size must be a whole number"),
    ({"group_size": None}, "group size must be a whole number"),
    ({"max_new_tokens": 0}, "max new tokens must be a whole number between 1 and 256"),
    ({"max_new_tokens": 257}, "max new tokens must be a whole number between 1 and 256"),
    ({"grpo_beta": -0.1}, "KL beta must be a number between 0 and 1"),
    ({"grpo_beta": float("nan")}, "KL beta must be a number between 0 and 1"),
    ({"rewards": []}, "tick at least one reward"),
    ({"rewards": "{not json"}, "rewards must be a JSON list"),
    ({"rewards": {"name": "form"}}, "rewards must be a list"),
    ({"weights": "half"}, "weights must be one of full, lora, qlora"),
])
def test_out_of_bounds_inputs_are_refused(ctx, objective, message):
    with pytest.raises(WorkspaceError, match=message):
        _config(ctx, **objective)


def test_the_corpus_must_hold_prompts_and_the_start_an_existing_model(ctx):
    with pytest.raises(WorkspaceError, match="grpo learns from prompts .* is chat"):
        _config(ctx, "chats")
    with pytest.raises(WorkspaceError, match="holds prompts without answers: train on it with mode grpo"):
        _config(ctx, "prompts", "sft")
    with pytest.raises(WorkspaceError, match="grpo fine-tunes an existing model"):
        TrainForm(base="new:nano", mode="grpo", corpus="prompts", **NUMBERS).to_config(ctx)


GRPO_METRICS = [
    {"step": 1, "loss": 0.01, "reward": 0.30, "reward_form": 0.40, "reward_rhyme": 0.20, "reward_std": 0.1,
     "kl": 0.0, "clip_fraction": 0.0, "answer_tokens": 20.0, "rollout_tokens_per_s": 900.0, "lr": 2e-5},
    {"step": 2, "val_reward": 0.35, "val_reward_form": 0.5, "val_reward_rhyme": 0.2, "val_answer_tokens": 22.0},
    {"step": 2, "loss": 0.02, "reward": 0.45, "reward_form": 0.60, "reward_rhyme": 0.30, "reward_std": 0.1,
     "kl": 0.002, "clip_fraction": 0.1, "answer_tokens": 21.0, "rollout_tokens_per_s": 950.0, "lr": 2e-5},
    {"step": 4, "val_reward": 0.5, "val_reward_form": 0.7, "val_reward_rhyme": 0.3, "val_answer_tokens": 23.0},
]
SAMPLES = [
    {"step": 2, "prompt": "以《春夜》为题写一首五言绝句", "answer": "春夜月明多", "reward": 0.4,
     "rewards": {"form": 0.5, "rhyme": 0.3}},
    {"step": 2, "prompt": "以《秋风》为题写一首七言绝句", "answer": "秋风", "reward": 0.1,
     "rewards": {"form": 0.2, "rhyme": 0.0}},
    {"step": 4, "prompt": "以《春夜》为题写一首五言绝句", "answer": "春眠不觉晓\n处处闻啼鸟", "reward": 0.66666,
     "rewards": {"form": 0.83333, "rhyme": 0.5}},
]


FORM_AND_RHYME = [{"name": "form", "weight": 1.0}, {"name": "rhyme", "weight": 1.0}]  # what GRPO_METRICS log


def _grpo_run(ctx, name="r-grpo", samples=SAMPLES, status=None):
    run = RunDir(ctx.workspace.runs / name).create()
    TrainConfig.from_dict({"mode": "grpo", "max_steps": 4, "data": {"files": ["x"]}, "model": {"init_from": "m"},
                           "grpo": {"rewards": FORM_AND_RHYME}}).save(run.config_file)
    for record in GRPO_METRICS:
        run.append_metrics(record)
    if samples:
        run.append_samples(samples)
    run.write_status(**(status or {"state": "finished", "mode": "grpo", "objective": "grpo", "step": 4,
                                   "total": 4, "val_reward": 0.5, "val_answer_tokens": 23.0}))
    return run


def test_the_rewards_plot_and_the_rollout_table_of_a_run(ctx):
    run = _grpo_run(ctx)
    assert run_view.run_objective(run) == "grpo"
    assert run_view.objective_series(run, "grpo") == ["reward", "reward_form", "reward_rhyme", "kl", "val_reward"]
    series = {name: list(g["value"]) for name, g in run_view.objective_curve(run).groupby("series")}
    assert series == {"reward": [0.30, 0.45], "reward_form": [0.40, 0.60], "reward_rhyme": [0.20, 0.30],
                      "kl": [0.0, 0.002], "val_reward": [0.35, 0.5]}  # reward_std, val_reward_form: not plotted
    facts = run_view.objective_facts(run.read_status(), "grpo")
    assert facts == ["**Held-out reward:** 0.500", "**Answer tokens:** 23"]

    table = grpo.rollout_table(run)
    assert list(table.columns) == ["step", "prompt", "answer", "reward", "form", "rhyme"]
    assert list(table["step"]) == [4, 2, 2]  # newest evaluation first, each in its own order
    assert table.iloc[0].to_dict() == {"step": 4, "prompt": "以《春夜》为题写一首五言绝句",
                                       "answer": "春眠不觉晓\n处处闻啼鸟", "reward": 0.667, "form": 0.833,
                                       "rhyme": 0.5}
    assert list(table["answer"])[1:] == ["春夜月明多", "秋风"]

    # a line cut by a kill is skipped; before the first evaluation there is no table
    with run.samples_file.open("a", encoding="utf-8") as fh:
        fh.write('{"step": 6, "prompt": "cut')
    assert len(grpo.rollout_table(run)) == 3
    assert grpo.rollout_table(_grpo_run(ctx, "r-early", samples=[])) is None

    many = [{**SAMPLES[0], "step": step} for step in range(1, 30) for _ in range(4)]
    long = grpo.rollout_table(_grpo_run(ctx, "r-long", samples=many))
    assert len(long) == grpo.ROLLOUT_ROWS and long["step"].iloc[0] == 29


def test_the_plot_is_redrawn_when_its_series_change(ctx):
    """Gradio 6 leaves a series that first appears in a value update undrawn: an update whose
    series differ from those last drawn names them as the legend, which redraws the plot."""
    _grpo_run(ctx)
    first, series = run_view.watch_objective(ctx, "r-grpo", [])
    assert series == ["reward", "reward_form", "reward_rhyme", "kl", "val_reward"]
    assert first["colors_in_legend"] == series and first["visible"] is True
    same, _ = run_view.watch_objective(ctx, "r-grpo", series)
    assert "colors_in_legend" not in same and same["value"] is not None  # values only: no flicker
    hidden, none = run_view.watch_objective(ctx, "", series)
    assert hidden["visible"] is False and none == []


def test_the_page_api_serves_rollouts_and_refuses_a_bad_reward(tmp_path):
    """Through gradio_client, as a program would use the page: /start_training takes the rewards
    as a list (a bad one refused with the ConfigError's message, no run made), /watch_objective
    plots a grpo run's rewards and /watch_rollouts gives its held-out answers."""
    ws, shipped = page_workspace(tmp_path, corpora=("prompts",))
    app = build_app(tmp_path / "ws", shipped_dir=shipped, background_jobs=False)
    ctx = AppContext(ws, JobManager(ws), shipped_dir=shipped)
    _grpo_run(ctx)
    with LiveServer(app, free_port()) as server:
        client = Client(server.url, verbose=False)
        api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
        params = api["/start_training"]["parameters"]
        assert len(params) == START_INPUTS and all(p["parameter_has_default"] for p in params[12:])
        assert [p["parameter_default"] for p in params[17:21]] == [grpo.default_spec(), 8, 0.1, 96]
        assert "/watch_rollouts" in api

        bad = [{"name": "regex", "weight": 1, "pattern": "(unclosed"}]
        with pytest.raises(Exception, match="pattern '\\(unclosed' does not compile") as refused:
            client.predict(BASE, "grpo", "prompts", *NUMBERS.values(), *DISTILL_AND_DPO, bad, 4, 0.04, 32,
                           api_name="/start_training")
        assert "Traceback" not in str(refused.value) and str(tmp_path) not in str(refused.value)
        with pytest.raises(Exception, match="group size must be a whole number between 2 and 16"):
            client.predict(BASE, "grpo", "prompts", *NUMBERS.values(), *DISTILL_AND_DPO, grpo.default_spec(),
                           64, 0.04, 32, api_name="/start_training")
        assert [p.name for p in ws.runs.iterdir()] == ["r-grpo"]

        plot = client.predict("r-grpo", api_name="/watch_objective")
        assert plot["visible"] is True and {row[2] for row in plot["value"]["data"]} == {
            "reward", "reward_form", "reward_rhyme", "kl", "val_reward"}
        rollouts = client.predict("r-grpo", api_name="/watch_rollouts")
        assert rollouts["visible"] is True
        assert rollouts["value"]["headers"] == ["step", "prompt", "answer", "reward", "form", "rhyme"]
        assert rollouts["value"]["data"][0][:2] == [4, "以《春夜》为题写一首五言绝句"]
        assert client.predict("", api_name="/watch_rollouts")["visible"] is False
        with pytest.raises(Exception, match="run"):  # a run is named by id, never by a path
            client.predict("../../etc", api_name="/watch_rollouts")

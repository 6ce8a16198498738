"""The Train tab's dpo and distill modes: the config each choice builds, the wrong choices
refused with a message, and each objective's own metrics read back from a run folder.
Fast: model folders are stand-ins (a config.json), run folders are written by hand."""


import pytest
from gradio_client import Client

from minimind.errors import ConfigError
from minimind.training import RunDir, TrainConfig
from webapp.app import build_app
from webapp.context import AppContext
from webapp.jobs import JobManager
from webapp.tabs import run_view, train_form
from webapp.tabs.train_form import TrainForm
from webapp.workspace import WorkspaceError
from helpers import ROOT
from webapp_helpers import START_INPUTS, LiveServer, fake_model, free_port, page_workspace

NUMBERS = {"steps": 5, "batch": 2, "seq_len": 64, "lr": 1e-4, "accum": 1,
           "precision": "fp32", "rank": 4, "alpha": 8, "eval_every": 0}


@pytest.fixture
def ctx(tmp_path):
    ws, shipped = page_workspace(tmp_path)
    fake_model(shipped / "minimind-small")
    fake_model(shipped / "tang-adapter", adapter=True)
    tokenizer = ws.corpora / "chats" / "tokenizer"  # a tokenizer trained with the corpus: not for a student
    tokenizer.mkdir()
    (tokenizer / "tokenizer.json").write_text("{}")
    ws.save_corpus("pairs", [ROOT / "samples" / "tang_chat_sample.jsonl"], {"kind": "auto"},
                   {"kind": "preference", "documents": 100})
    return AppContext(ws, JobManager(ws), shipped_dir=shipped)


def _config(ctx, base, mode, corpus, **objective):
    return TrainForm(base=base, mode=mode, corpus=corpus, **NUMBERS, **objective).to_config(ctx)


def test_the_mode_choice_offers_dpo_and_distill_with_their_own_pickers(ctx):
    assert train_form.MODES == ["pretrain", "sft", "lora", "qlora", "dpo", "distill", "grpo"]
    teachers = [value for _, value in train_form.teacher_choices(ctx)]
    assert teachers == ["shipped:minimind-tang", "shipped:minimind-small"]  # the default first; no adapter
    bases = [value for _, value in train_form.base_choices(ctx)]
    assert "new:auto" in bases and set(teachers) < set(bases) and "shipped:tang-adapter" not in bases


def test_dpo_full_weights_and_lora(ctx):
    full = _config(ctx, "shipped:minimind-tang", "dpo", "pairs", weights="full", beta=0.25)
    assert (full.mode, full.adapter, full.adapter_kind, full.objective) == ("dpo", "", "", "dpo")
    assert full.dpo.beta == 0.25
    assert full.model.init_from == str(ctx.shipped_dir / "minimind-tang") and not full.new_model
    assert full.data.files == [str(ctx.workspace.corpora / "pairs" / "tang_chat_sample.jsonl")]

    lora = _config(ctx, "shipped:minimind-tang", "dpo", "pairs", weights="lora", beta=0.1)
    assert (lora.adapter, lora.adapter_kind, lora.lora.rank, lora.lora.alpha) == ("lora", "lora", 4, 8)
    qlora = _config(ctx, "shipped:minimind-tang", "dpo", "pairs", weights="qlora")
    assert qlora.adapter == "qlora"


def test_distill_into_a_new_student_or_an_existing_model(ctx):
    new = _config(ctx, "new:nano", "distill", "chats", weights="full", teacher="shipped:minimind-tang",
                  temperature=3.0, kl_weight=0.7)
    assert (new.mode, new.objective, new.adapter, new.new_model) == ("distill", "distill", "", True)
    assert new.model.preset == "nano" and new.model.init_from == ""
    assert new.model.tokenizer == ""  # the student takes the teacher's tokenizer, not the corpus's
    assert new.distill.teacher == str(ctx.shipped_dir / "minimind-tang")
    assert (new.distill.temperature, new.distill.kl_weight) == (3.0, 0.7)
    assert new.distill.ce_weight == pytest.approx(0.3)
    assert _config(ctx, "new:auto", "distill", "chats", teacher="shipped:minimind-tang").model.preset == "auto"

    small = _config(ctx, "shipped:minimind-small", "distill", "chats", weights="lora",
                    teacher="shipped:minimind-tang")
    assert small.model.init_from == str(ctx.shipped_dir / "minimind-small") and small.adapter == "lora"
    assert not small.new_model

    # pretrain from the same corpus still takes the corpus's tokenizer; other modes ignore dpo/distill inputs
    pre = _config(ctx, "new:nano", "pretrain", "chats", weights="lora", teacher="shipped:minimind-tang")
    assert pre.model.tokenizer.endswith("tokenizer") and pre.adapter == "" and pre.distill.teacher == ""
    sft = _config(ctx, "shipped:minimind-tang", "lora", "chats", weights="qlora", beta=0)
    assert (sft.mode, sft.adapter, sft.adapter_kind) == ("lora", "", "lora")


@pytest.mark.parametrize("base, mode, corpus, objective, message", [
    ("new:auto", "dpo", "pairs", {}, "dpo fine-tunes an existing model"),
    ("shipped:minimind-tang", "dpo", "chats", {}, "preference pairs .* is chat"),
    ("shipped:minimind-tang", "sft", "pairs", {}, "holds preference pairs: train on it with mode dpo"),
    ("shipped:minimind-tang", "dpo", "pairs", {"beta": 0}, "beta must be a number above 0"),
    ("shipped:minimind-tang", "dpo", "pairs", {"beta": None}, "beta must be a number"),
    ("shipped:minimind-tang", "dpo", "pairs", {"weights": "half"}, "weights must be one of full, lora, qlora"),
    ("new:nano", "distill", "chats", {"teacher": None}, "choose a teacher"),
    ("new:nano", "distill", "chats", {"teacher": "shipped:tang-adapter"}, "choose a teacher"),
    ("new:nano", "distill", "chats", {"teacher": "/etc"}, "choose a teacher"),
    ("new:nano", "distill", "chats", {"teacher": "shipped:minimind-tang", "weights": "lora"},
     "lora weights adapt an existing model"),
    ("new:nano", "distill", "chats", {"teacher": "shipped:minimind-tang", "kl_weight": 1.5},
     "KL weight must be a number between 0 and 1"),
    ("new:nano", "distill", "chats", {"teacher": "shipped:minimind-tang", "temperature": 0},
     "temperature must be a number above 0"),
    ("shipped:tang-adapter", "dpo", "pairs", {}, "choose what to start from"),
])
def test_wrong_choices_are_refused_with_a_message(ctx, base, mode, corpus, objective, message):
    with pytest.raises(WorkspaceError, match=message):
        _config(ctx, base, mode, corpus, **objective)


def test_a_corpus_saved_as_chat_without_a_summary_is_refused_by_the_config(ctx):
    ctx.workspace.save_corpus("old", [ROOT / "samples" / "tang_chat_sample.jsonl"], {"kind": "chat"}, {})
    with pytest.raises(ConfigError, match=r"dpo learns from preference pairs .*; the corpus \(data.kind\) is chat"):
        _config(ctx, "shipped:minimind-tang", "dpo", "old")


def test_defaults_for_every_mode_and_weights():
    for mode in train_form.MODES:
        lr, steps, batch = train_form.defaults_for(mode)
        assert 0 < lr <= 1 and steps > 0 and batch >= 1
    assert train_form.defaults_for("dpo")[0] < train_form.defaults_for("dpo", "lora")[0]  # full DPO moves gently
    assert train_form.defaults_for("distill")[1] == 300  # full weights: a new student, trained like pretraining
    assert train_form.defaults_for("distill", "lora")[1] == 100


def _run(ctx, name, mode, metrics, status=None):
    folder = ctx.workspace.runs / name
    run = RunDir(folder).create()
    config = {"mode": mode, "max_steps": 4, "data": {"files": ["x"]}, "model": {"init_from": "m"}}
    if mode == "distill":
        config["distill"] = {"teacher": "t"}
    TrainConfig.from_dict(config).save(run.config_file)
    for record in metrics:
        run.append_metrics(record)
    if status is not None:
        run.write_status(**status)
    return run


DPO_METRICS = [
    {"step": 2, "loss": 0.69, "accuracy": 0.5, "reward_margin": 0.01, "chosen_reward": 0.0, "rejected_reward": 0.0,
     "lr": 1e-5},
    {"step": 4, "loss": 0.6, "accuracy": 0.75, "reward_margin": 0.2, "chosen_reward": 0.1, "rejected_reward": -0.1,
     "lr": 1e-5},
    {"step": 4, "val_loss": 0.62, "val_accuracy": 0.83, "val_reward_margin": 1.2, "val_kl": 0.05,
     "val_chosen_ppl": 30.0, "val_chosen_bpc": 4.1},
]
DISTILL_METRICS = [
    {"step": 2, "loss": 3.0, "ce": 4.0, "kl": 2.0, "lr": 1e-3},
    {"step": 4, "loss": 2.5, "ce": 3.5, "kl": 1.5, "lr": 1e-3},
    {"step": 4, "val_loss": 3.4, "val_ppl": 30.0, "val_bpc": 4.0, "val_kl": 1.4},
]


def _series(frame):
    return {name: list(group["value"]) for name, group in frame.groupby("series")}


def test_the_objective_plot_and_facts_follow_the_run_objective(ctx):
    dpo = _run(ctx, "r-dpo", "dpo", DPO_METRICS, {"state": "running", "objective": "dpo", "val_accuracy": 0.83,
                                                   "val_reward_margin": 1.2, "val_kl": 0.05})
    assert run_view.run_objective(dpo) == "dpo"
    assert _series(run_view.objective_curve(dpo)) == {
        "accuracy": [0.5, 0.75], "reward_margin": [0.01, 0.2],
        "val_accuracy": [0.83], "val_reward_margin": [1.2], "val_kl": [0.05]}
    assert list(run_view.objective_curve(dpo).columns) == ["step", "value", "series"]
    facts = run_view.objective_facts(dpo.read_status(), "dpo")
    assert facts == ["**Preference accuracy:** 0.83", "**Reward margin:** 1.2", "**KL to reference:** 0.05"]

    # a queued run has no objective in its status yet: its config names the mode
    distill = _run(ctx, "r-distill", "distill", DISTILL_METRICS)
    assert run_view.run_objective(distill) == "distill"
    assert _series(run_view.objective_curve(distill)) == {"ce": [4.0, 3.5], "kl": [2.0, 1.5], "val_kl": [1.4]}
    assert run_view.objective_facts({"val_kl": 1.4, "val_ppl": 30.0}, "distill") == [
        "**KL to teacher:** 1.4", "**Val perplexity:** 30.00"]

    plain = _run(ctx, "r-lora", "lora", [{"step": 2, "loss": 3.0}, {"step": 2, "val_loss": 3.1}],
                 {"state": "finished", "objective": "language_model"})
    assert run_view.run_objective(plain) == "language_model"
    assert run_view.objective_curve(plain) is None
    assert run_view.objective_facts(plain.read_status(), "language_model") == []
    assert run_view.objective_curve(_run(ctx, "r-empty", "dpo", [])) is None  # nothing logged yet

    # the loss plot is every objective's: train and validation lines
    loss = run_view.loss_curve(dpo)
    assert set(loss["series"]) == {"train", "validation"} and list(loss["loss"]) == [0.69, 0.6, 0.62]


def test_the_page_serves_the_objective_plot_and_keeps_the_old_api(tmp_path):
    """Through gradio_client: /watch_run keeps its seven outputs (facts now with the objective's
    figures), /watch_objective shows a dpo run's metrics, and the twelve inputs clients sent
    before still suffice (the new ones have defaults)."""
    ws, shipped = page_workspace(tmp_path, corpora=())
    app = build_app(tmp_path / "ws", shipped_dir=shipped, background_jobs=False)
    ctx = AppContext(ws, JobManager(ws), shipped_dir=shipped)
    _run(ctx, "r-dpo", "dpo", DPO_METRICS, {"state": "finished", "mode": "dpo", "objective": "dpo", "step": 4,
                                             "total": 4, "val_loss": 0.62, "val_accuracy": 0.83,
                                             "val_reward_margin": 1.2, "val_kl": 0.05})
    _run(ctx, "r-lora", "lora", [{"step": 2, "loss": 3.0}], {"state": "finished", "mode": "lora", "step": 2,
                                                            "total": 2})
    with LiveServer(app, free_port()) as server:
        client = Client(server.url, verbose=False)
        progress, facts, curve, log, runs, queue, run_id = client.predict("r-dpo", api_name="/watch_run")
        assert "step 4/4" in progress and "**Preference accuracy:** 0.83 · **Reward margin:** 1.2" in facts
        plot = client.predict("r-dpo", api_name="/watch_objective")  # an update: shown, with its data
        assert plot["visible"] is True and {row[2] for row in plot["value"]["data"]} == {
            "accuracy", "reward_margin", "val_accuracy", "val_reward_margin", "val_kl"}
        assert client.predict("r-lora", api_name="/watch_objective")["visible"] is False  # the loss plot suffices
        api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/start_training"]
        params = api["parameters"]
        assert len(params) == START_INPUTS and all(p["parameter_has_default"] for p in params[12:])  # + grpo's four, stop after, minutes, processes, parallelism, report_to, extend_vocab, architecture
        assert [p["parameter_default"] for p in params[12:17]] == ["full", 0.5, "shipped:minimind-tang", 2.0, 0.5]

"""Classification on the page and its API (issue 18, item 3): a labelled corpus shows its classes,
the Train tab offers (and builds) the classify task, a run's confusion.json becomes a tinted table,
a tiny trained classifier gives label probabilities in the Try panel (two side by side), and
/api/classify answers them, refusing hostile input with a short message and no server path."""

import json
import random
import re

import pytest
from fastapi.testclient import TestClient

from minimind.checkpoint import is_classifier
from minimind.training import TrainConfig, train
from webapp import classifiers
from webapp.app import build_app
from webapp.context import AppContext
from webapp.jobs import JobManager
from webapp.tabs import chat, corpus, run_view, train as train_tab, train_form
from webapp.tabs.train_form import TrainForm
from webapp.workspace import Workspace, WorkspaceError
from helpers import SAMPLE_TEXTS
from webapp_helpers import make_shipped

POEM = "".join(SAMPLE_TEXTS[:3])      # class "poem": pieces of Tang poems
PLAY = " ".join(SAMPLE_TEXTS[3:6])    # class "play": pieces of English lines
NUMBERS = {"steps": 6, "batch": 8, "seq_len": 32, "lr": 3e-3, "accum": 1,
           "precision": "fp32", "rank": 8, "alpha": 16, "eval_every": 3}


def write_csv(path, n: int = 40, seed: int = 0, unbalanced: bool = False):
    """A CSV of labelled text: Chinese poem pieces ("poem") and English play pieces ("play")."""
    rng = random.Random(seed)
    lines = ["text,label"]
    for i in range(n):
        poem = i % 2 or (unbalanced and i % 20)
        source, label = (POEM, "poem") if poem else (PLAY, "play")
        start = rng.randrange(len(source) - 12)
        piece = source[start:start + rng.randrange(6, 12)].replace(",", " ").replace('"', " ").replace("\n", " ")
        lines.append(f"{piece.strip() or 'x'},{label}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def ctx(tmp_path):
    shipped = make_shipped(tmp_path / "checkpoints")
    ws = Workspace(tmp_path / "ws")
    return AppContext(ws, JobManager(ws), shipped_dir=shipped)


def saved_labelled(ctx, tmp_path, name="reviews", **kw):
    files = [str(ctx.workspace.store_upload(write_csv(tmp_path / f"{name}.csv", **kw)))]
    corpus.save(ctx, name, files, "auto", "", "paragraph", False, False, 6400)
    return name


# ---- Corpus tab ----------------------------------------------------------------------------------

def uploaded(ctx, tmp_path, **kw):
    """A CSV as the page's upload route would have received it."""
    folder = tmp_path / "gradio"
    folder.mkdir(exist_ok=True)
    path = write_csv(folder / "reviews.csv", **kw)
    ctx.uploads.attach({str(path)}, folder)
    return path


def test_a_labelled_csv_shows_its_kind_and_classes_and_saves_them(ctx, tmp_path):
    upload = uploaded(ctx, tmp_path)
    summary, _, _, problems, files = corpus.inspect(ctx, [str(upload)], None, "auto", "", "paragraph", False)
    assert "**Kind:** labelled" in summary
    assert "**Classes (2):**" in summary and "- play: 20" in summary and "- poem: 20" in summary
    assert problems == "No problems found."
    message, table = corpus.save(ctx, "reviews", files, "auto", "", "paragraph", False, False, 6400)
    assert "reviews" in message and list(table["kind"]) == ["labelled"]
    assert ctx.workspace.corpus("reviews")["summary"]["classes"] == {"play": 20, "poem": 20}


def test_unbalanced_classes_are_warned_about_and_a_chosen_label_field_is_kept(ctx, tmp_path):
    upload = uploaded(ctx, tmp_path, n=60, unbalanced=True)
    summary, _, _, problems, files = corpus.inspect(ctx, [str(upload)], None, "auto", "", "paragraph", False)
    assert "- poem: 57" in summary and "- play: 3" in summary  # largest first
    assert "unbalanced classes" in problems and "macro-F1" in problems
    corpus.save(ctx, "named", files, "labelled", "text", "paragraph", False, False, 6400, "label")
    assert ctx.workspace.corpus("named")["settings"]["label_field"] == "label"
    with pytest.raises(WorkspaceError, match="label field"):
        corpus.inspect(ctx, [str(upload)], None, "auto", "", "paragraph", False, ["label"])


# ---- Train tab -----------------------------------------------------------------------------------

def test_a_labelled_corpus_offers_the_classify_task(ctx, tmp_path):
    saved_labelled(ctx, tmp_path)
    ctx.workspace.save_corpus("poems", [write_csv(tmp_path / "p.csv")], {"kind": "auto"},
                              {"kind": "text", "documents": 40})
    shown, task, mode, lr, steps, batch = train_tab.on_corpus(ctx, "reviews", "dpo", "full")
    assert shown["visible"] is True and task == "classify" and mode == "lora"  # dpo cannot classify
    assert lr == pytest.approx(1e-3)  # a classifier's LoRA learning rate (its head is new)
    assert train_tab.on_corpus(ctx, "reviews", "sft", "full")[1:3] == ("classify", "sft")
    assert train_tab.on_corpus(ctx, "reviews", "sft", "full")[3] == pytest.approx(5e-4)  # a full classifier fine-tune (measured: benchmarks/NOTES.md)
    shown, task, mode, *_ = train_tab.on_corpus(ctx, "poems", "dpo", "full")
    assert shown["visible"] is False and task == "generate" and mode == "dpo"
    assert train_tab.on_corpus(ctx, "no such corpus", "sft", "full")[1] == "generate"


def test_picking_a_corpus_of_the_same_kind_keeps_the_typed_settings(ctx, tmp_path):
    """A corpus change that changes neither task nor mode leaves steps, rate and batch alone: its answer
    can arrive after the user typed them (a browser test trained 100 steps instead of the 6 typed)."""
    saved_labelled(ctx, tmp_path)
    ctx.workspace.save_corpus("poems", [write_csv(tmp_path / "p.csv")], {"kind": "auto"},
                              {"kind": "text", "documents": 40})
    kept = train_tab.on_corpus(ctx, "poems", "lora", "full", "generate")
    assert kept[1:3] == ("generate", "lora") and all(update == {"__type__": "update"} for update in kept[3:])
    switched = train_tab.on_corpus(ctx, "reviews", "lora", "full", "generate")
    assert switched[1] == "classify" and switched[3] == pytest.approx(1e-3)


def test_the_classify_config_is_built_and_wrong_choices_are_refused(ctx, tmp_path):
    saved_labelled(ctx, tmp_path)
    config = TrainForm(base="shipped:minimind-tang", mode="lora", corpus="reviews", **NUMBERS,
                       task="classify", class_weights="balanced").to_config(ctx)
    assert isinstance(config, TrainConfig)
    assert config.task == "classify" and config.mode == "lora" and config.classify.class_weights == "balanced"
    assert config.model.init_from.endswith("minimind-tang") and config.max_steps == 6
    assert config.data.files[0].endswith("reviews.csv")
    for mode in ("sft", "qlora"):
        assert TrainForm(base="shipped:minimind-tang", mode=mode, corpus="reviews", **NUMBERS,
                         task="classify").to_config(ctx).classify.class_weights == ""
    refusals = [
        (dict(mode="lora", task="generate"), "labelled text: train a classifier"),
        (dict(mode="pretrain", task="classify"), "mode sft .*, lora or qlora"),
        (dict(mode="dpo", task="classify"), "dpo learns from preference pairs"),
        (dict(mode="lora", task="classify", base="new:nano"), "fine-tunes an existing model"),
        (dict(mode="lora", task="classify", class_weights="inverse"), "class weights must be none or balanced"),
        (dict(mode="lora", task="summarize"), "task must be one of"),
    ]
    for settings, message in refusals:
        base = settings.pop("base", "shipped:minimind-tang")
        mode = settings.pop("mode")
        with pytest.raises(WorkspaceError, match=message):
            TrainForm(base=base, mode=mode, corpus="reviews", **NUMBERS, **settings).to_config(ctx)
    ctx.workspace.save_corpus("poems", [write_csv(tmp_path / "p.csv")], {"kind": "auto"},
                              {"kind": "text", "documents": 40})
    with pytest.raises(WorkspaceError, match="a classifier learns from labelled text"):
        TrainForm(base="shipped:minimind-tang", mode="lora", corpus="poems", **NUMBERS,
                  task="classify").to_config(ctx)


def hand_written_run(ctx, run_id="20260101-000000-classify"):
    """A finished classifier run folder written by hand: metrics, status and confusion.json."""
    folder = ctx.workspace.runs / run_id
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("task: classify\nmode: lora\n")
    (folder / "status.json").write_text(json.dumps({"state": "finished", "mode": "lora", "objective": "classify",
                                                    "step": 4, "total": 4, "val_accuracy": 0.75,
                                                    "val_macro_f1": 0.7333}))
    rows = [{"step": 2, "loss": 0.6, "accuracy": 0.5}, {"step": 2, "val_loss": 0.5, "val_accuracy": 0.5,
                                                        "val_macro_f1": 0.33},
            {"step": 4, "loss": 0.4, "accuracy": 0.75}, {"step": 4, "val_loss": 0.4, "val_accuracy": 0.75,
                                                         "val_macro_f1": 0.7333}]
    (folder / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = {"step": 4, "loss": 0.4, "accuracy": 0.75, "macro_f1": 0.7333, "rows": 8,
              "labels": ["李白", "杜甫"], "matrix": [[4, 0], [2, 2]]}
    (folder / "confusion.json").write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
    return run_id


def test_the_run_view_shows_accuracy_f1_and_the_confusion_matrix(ctx):
    run_id = hand_written_run(ctx)
    plot, series = run_view.watch_objective(ctx, run_id)
    assert series == ["accuracy", "val_accuracy", "val_macro_f1"] and plot["visible"] is True
    assert list(plot["value"].query("series == 'val_macro_f1'")["value"]) == [0.33, 0.7333]
    facts = run_view.watch(ctx, run_id)[1]
    assert "**Val accuracy:** 0.750" in facts and "**Val macro-F1:** 0.733" in facts
    line, table, drawn = run_view.watch_confusion(ctx, run_id)
    assert line["visible"] is True and "all 8 validation rows" in line["value"] and "macro-F1 0.733" in line["value"]
    frame = table["value"].data  # a pandas Styler: the counts, each cell tinted by its share of the row
    assert list(frame.columns) == ["true \\ predicted", "李白", "杜甫"]
    assert frame.values.tolist() == [["李白", 4, 0], ["杜甫", 2, 2]]
    css = table["value"].to_html()
    assert "rgba(99,102,241,0.90)" in css and "rgba(239,68,68,0.53)" in css  # right 4/4; wrong 2/4
    # unchanged: nothing sent again on the next tick; another run without a matrix: hidden
    again = run_view.watch_confusion(ctx, run_id, drawn)
    assert "value" not in again[1] and again[2] == drawn
    other = ctx.workspace.runs / "20260101-000001-lora"
    other.mkdir()
    (other / "config.yaml").write_text("mode: lora\n")
    (other / "status.json").write_text(json.dumps({"state": "running", "mode": "lora"}))
    line, table, drawn = run_view.watch_confusion(ctx, other.name, drawn)
    assert line["visible"] is False and table["visible"] is False and drawn is None


def test_a_broken_confusion_file_is_not_drawn(ctx):
    run_id = hand_written_run(ctx)
    (ctx.workspace.runs / run_id / "confusion.json").write_text('{"labels": ["a"], "matrix": [[1, 2]]}')
    assert classifiers.read_confusion(ctx.workspace.runs / run_id) is None
    assert "value" not in run_view.watch_confusion(ctx, run_id)[1]  # never drawn: stays hidden, nothing sent
    assert run_view.watch_confusion(ctx, run_id, "another@1")[1]["visible"] is False  # one drawn before: hidden


# ---- a tiny trained classifier: the Try panel and the API ----------------------------------------

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A workspace with one finished classifier run (LoRA, from the tiny shipped model) and a
    finished run that is no classifier: (workspace folder, shipped folder, classifier run id)."""
    root = tmp_path_factory.mktemp("trained")
    shipped = make_shipped(root / "checkpoints")
    ws = Workspace(root / "ws")
    data = write_csv(root / "labelled.csv", n=60)
    run_id = "20260101-000000-lora"
    config = TrainConfig.from_dict({
        "task": "classify", "mode": "lora", "model": {"init_from": str(shipped / "minimind-tang")},
        "data": {"files": [str(data)], "seq_len": 32, "cache_dir": str(root / "cache"), "val_fraction": 0.2},
        "lora": {"rank": 8}, "optim": {"lr": 3e-3, "warmup_steps": 0}, "max_steps": 12, "eval_every": 6,
        "batch_size": 8, "log_every": 1, "precision": "fp32", "device": "cpu", "run_dir": str(ws.runs / run_id)})
    assert train(config)["state"] == "finished"
    plain = ws.runs / "20260101-000001-sft"  # a language model run: finished, no classifier
    (plain / "checkpoints").mkdir(parents=True)
    (plain / "status.json").write_text(json.dumps({"state": "finished", "mode": "sft"}))
    import shutil
    shutil.copytree(shipped / "minimind-tang", plain / "checkpoints" / "step-2")
    return root / "ws", shipped, run_id


@pytest.fixture
def trained_ctx(trained):
    ws_path, shipped, _ = trained
    ws = Workspace(ws_path)
    return AppContext(ws, JobManager(ws), shipped_dir=shipped)


def test_the_try_panel_shows_label_probabilities_one_or_two_side_by_side(trained, trained_ctx):
    ctx, run_id = trained_ctx, trained[2]
    found = classifiers.classifier_choices(ctx)
    assert [model_id for _, model_id in found] == [f"run:{run_id}"]
    assert is_classifier(ctx.model_folder(f"run:{run_id}"))
    # the chat offers the models that write text, not the classifier
    assert f"run:{run_id}" not in {v for _, v in chat.chat_choices(ctx)}
    assert "shipped:minimind-tang" in {v for _, v in chat.chat_choices(ctx)}
    first, second = chat.try_classifier(ctx, POEM[:10], f"run:{run_id}")
    probabilities = first["value"]
    assert set(probabilities) == {"play", "poem"} and sum(probabilities.values()) == pytest.approx(1.0)
    assert probabilities["poem"] > 0.5 and run_id in first["label"]
    assert second["visible"] is False
    first, second = chat.try_classifier(ctx, PLAY[:20], f"run:{run_id}", f"run:{run_id}", True)
    assert second["visible"] is True and second["value"] == pytest.approx(first["value"])
    assert first["value"]["play"] > 0.5
    import gradio as gr
    with pytest.raises(gr.Error, match="type a text"):
        chat.try_classifier(ctx, "  ", f"run:{run_id}")
    with pytest.raises(classifiers.ClassifyError, match="not a classifier"):
        chat.try_classifier(ctx, "x", "shipped:minimind-tang")
    with pytest.raises(WorkspaceError, match="not one of the shipped models"):
        chat.try_classifier(ctx, "x", "run:../../etc")


def test_the_classify_api_answers_and_refuses(trained, monkeypatch):
    from webapp.gate import Access

    ws_path, shipped, run_id = trained
    app = build_app(ws_path, shipped_dir=shipped, background_jobs=False, access=Access())
    with TestClient(app) as client:
        listed = client.get("/api/classify").json()
        assert listed == {"object": "list", "data": [{"id": f"run-{run_id}", "object": "classifier",
                                                      "labels": ["play", "poem"]}]}
        answer = client.post("/api/classify", json={"model": f"run-{run_id}", "texts": [POEM[:10], PLAY[:20]]})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["labels"] == ["play", "poem"] and [r["label"] for r in body["results"]] == ["poem", "play"]
        assert sum(body["results"][0]["probabilities"].values()) == pytest.approx(1.0)
        # the bare run id names it too; a single string is one text
        assert client.post("/api/classify", json={"model": run_id, "texts": POEM[:8]}).json()["results"][0]["label"]
        # a classifier is not served under /v1 (it writes no text); the language models are
        assert f"run-{run_id}" not in {m["id"] for m in client.get("/v1/models").json()["data"]}
        refusals = [
            ({"model": "run-nope", "texts": ["x"]}, 404, "no classifier of that name"),
            ({"model": "../../../etc/passwd", "texts": ["x"]}, 404, "no classifier of that name"),
            ({"model": str(ws_path / "runs" / run_id), "texts": ["x"]}, 404, "no classifier of that name"),
            ({"model": "minimind-tang", "texts": ["x"]}, 404, "no classifier of that name"),   # a language model
            ({"model": "run-20260101-000001-sft", "texts": ["x"]}, 404, "no classifier"),        # a non-classifier run
            ({"model": f"run-{run_id}", "texts": [1, 2]}, 400, "texts[0] is int"),
            ({"model": f"run-{run_id}", "texts": {"a": "b"}}, 400, "texts must be a string or a list"),
            ({"model": f"run-{run_id}", "texts": []}, 400, "texts must be"),
            ({"model": f"run-{run_id}", "texts": [""]}, 400, "is empty"),
            ({"model": f"run-{run_id}", "texts": ["x"] * 65}, 400, "at most 64 texts"),
            ({"model": f"run-{run_id}", "texts": ["字" * 20_001]}, 400, "at most 20,000"),
            ({"model": f"run-{run_id}"}, 400, "texts is missing"),
            ({"model": ["run-x"], "texts": ["x"]}, 400, "model must be the name"),
            (["not", "an", "object"], 400, "must be a JSON object"),
        ]
        for payload, status, message in refusals:
            got = client.post("/api/classify", json=payload)
            assert got.status_code == status and message in got.json()["error"]["message"], (payload, got.text)
            assert str(ws_path) not in got.text and "Traceback" not in got.text
        broken = client.post("/api/classify", content=b'{"model": ', headers={"content-type": "application/json"})
        assert broken.status_code == 400 and "not valid JSON" in broken.json()["error"]["message"]
        huge = client.post("/api/classify", content=b'{"texts": ["' + b"x" * (3 * 2**20) + b'"]}')
        assert huge.status_code == 413


def test_the_classify_api_takes_the_same_key_as_v1(trained):
    from webapp.gate import Access

    ws_path, shipped, run_id = trained
    app = build_app(ws_path, shipped_dir=shipped, background_jobs=False, access=Access(api_key="sesame"))
    with TestClient(app) as client:
        payload = {"model": f"run-{run_id}", "texts": ["x"]}
        refused = client.post("/api/classify", json=payload)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
        assert client.get("/api/classify").status_code == 401
        ok = client.post("/api/classify", json=payload, headers={"Authorization": "Bearer sesame"})
        assert ok.status_code == 200


def test_a_full_classifier_run_is_a_base_for_a_classifier_not_a_teacher(ctx):
    run_id = hand_written_run(ctx)
    step = ctx.workspace.runs / run_id / "checkpoints" / "step-4"
    step.mkdir(parents=True)
    (step / "config.json").write_text(json.dumps({"architectures": ["MiniMindForSequenceClassification"]}))
    assert f"run:{run_id}" in {v for _, v in train_form.base_choices(ctx)}
    assert f"run:{run_id}" in {v for _, v in classifiers.classifier_choices(ctx)}
    teachers = {v for _, v in train_form.teacher_choices(ctx)}
    assert f"run:{run_id}" not in teachers and "shipped:minimind-tang" in teachers


def test_the_classify_api_is_bounded_like_v1(trained):
    """Requests beyond the server's admission queue get 429 at once, not an unbounded wait."""
    from minimind.serving.pool import GenerationPool
    from webapp.gate import Access

    ws_path, shipped, run_id = trained
    app = build_app(ws_path, shipped_dir=shipped, background_jobs=False, access=Access())
    app.state.pool = GenerationPool(max_queue=1)
    with TestClient(app) as client:
        held = app.state.pool.admit()  # the one slot is taken
        refused = client.post("/api/classify", json={"model": f"run-{run_id}", "texts": ["x"]})
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "queue_full"
        held.release()
        assert client.post("/api/classify", json={"model": f"run-{run_id}", "texts": ["x"]}).status_code == 200


# ---- Export tab: a classifier run exports as ONNX, scored for accuracy on its held-out split ----

def test_a_classifier_run_holds_out_the_texts_its_trainer_held_out(trained):
    """The export's held-out texts of a labelled run are the trainer's stratified validation split:
    their class counts are the row sums of the run's own confusion matrix."""
    from minimind.export.heldout import validation_labels

    ws_path, _, run_id = trained
    run = ws_path / "runs" / run_id
    texts, labels = validation_labels(run)
    confusion = json.loads((run / "confusion.json").read_text(encoding="utf-8"))
    counts = {c: sum(row) for c, row in zip(confusion["labels"], confusion["matrix"])}
    assert {c: labels.count(c) for c in set(labels)} == counts and len(texts) == len(labels)
    # ... and, token for token, the rows the trainer prepared for validation (its own cache)
    from minimind.checkpoint import load_tokenizer_for
    from minimind.data import classify_ids, prepare_corpus

    config = TrainConfig.load(run / "config.yaml")
    tokenizer = load_tokenizer_for(sorted((run / "checkpoints").iterdir())[-1])
    prepared = prepare_corpus(config.data.files, tokenizer, config.data)
    trainer_rows = sorted(map(tuple, prepared.validation["input_ids"]))
    assert sorted(map(tuple, classify_ids(tokenizer, texts, config.data.seq_len))) == trainer_rows


def test_a_classifier_run_exports_as_onnx_with_its_held_out_accuracy(trained, trained_ctx):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from webapp.tabs import export as export_tab

    ctx, run_id = trained_ctx, trained[2]
    run = trained[0] / "runs" / run_id
    picked = export_tab.formats_for(ctx, f"run:{run_id}")  # picking the classifier checks ONNX
    assert picked["value"] == ["onnx"] and "ONNX only" in picked["info"]
    assert "value" not in export_tab.formats_for(ctx, "shipped:minimind-tang")  # a language model: kept
    from minimind.export import applicable_formats
    assert applicable_formats(ctx.model_folder(f"run:{run_id}")) == ["onnx", "onnx-int8"]  # a LoRA classifier
    table, downloads, message = export_tab.run_export(ctx, f"run:{run_id}", ["onnx", "hf"], None)
    rows = {row["format"]: row for row in table.to_dict("records")}
    assert list(table.columns) == export_tab.CLASSIFIER_COLUMNS
    assert rows["onnx"]["status"] == "verified" and rows["hf"]["status"].startswith("failed")
    assert "exports as onnx" in rows["hf"]["status"]
    # the source's accuracy on the run's validation split is what the run measured there last
    status = json.loads((run / "status.json").read_text())
    assert rows["onnx"]["source accuracy %"] == pytest.approx(100 * status["val_accuracy"], abs=0.01)
    assert rows["onnx"]["accuracy %"] == pytest.approx(rows["onnx"]["source accuracy %"], abs=0.01)
    assert rows["onnx"]["labels as source"].split("/")[0] == rows["onnx"]["labels as source"].split("/")[1]
    assert "validation split of run" in message and "source classifier scores" in message
    assert re.search(r'<a href="/downloads/[^"]+-onnx\.zip" download=', downloads)

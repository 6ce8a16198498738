"""Mode classify: a sequence classifier trained by the one loop on a labelled corpus, full and under
LoRA (the head trains, and loads back from the adapter), its metrics (loss, accuracy, macro-F1 with
F1 checked by hand), the confusion matrix in the run folder, class weights, and the errors a user
meets when corpus and mode do not match."""

import json

import numpy as np
import pytest
import torch
from builders import PLAY, POEM, write_labelled_corpus
from training_helpers import (
    assert_same_losses,
    interrupted_run,
    make_config,
    save_base_model,
    write_text_corpus,
)

from minimind.checkpoint import is_classifier, load_model
from minimind.classifier import (
    ADAPTER_LABELS,
    MiniMindForSequenceClassification,
    classifier_from,
    predict,
)
from minimind.errors import ConfigError
from minimind.training import train
from minimind.training.objectives.classify import (
    accuracy,
    class_weights,
    confusion,
    macro_f1,
)


def classify_config(tmp_path, base, files, **overrides):
    settings = dict(task="classify", mode="sft", model__init_from=str(base), data__seq_len=32, data__val_fraction=0.2,
                    optim__lr=3e-3, optim__warmup_steps=0, max_steps=12, eval_every=6, batch_size=8,
                    classify__head_lr_scale=1)  # (lr 3e-3 is 6x a real full fine-tune's: the default x10 on top
                                                # overshot this toy; the default is measured in benchmarks/classify.py)
    return make_config(tmp_path, files, **{**settings, **overrides})


# ---- metrics ------------------------------------------------------------------------------------

def test_macro_f1_matches_hand_computed_cases():
    # 3 classes; rows true, columns predicted
    m = [[3, 1, 0],
         [0, 2, 2],
         [1, 0, 1]]
    # F1 per class = 2TP / (support + predicted): 6/(4+4), 4/(4+3), 2/(2+3)
    assert macro_f1(m) == pytest.approx(np.mean([6 / 8, 4 / 7, 2 / 5]))
    assert accuracy(m) == pytest.approx(6 / 10)
    # a class with neither examples nor predictions is left out (scikit-learn's labels = seen ones)
    assert macro_f1([[2, 0, 0], [1, 1, 0], [0, 0, 0]]) == pytest.approx(np.mean([4 / 5, 2 / 3]))
    # predicted but never true (or true but never predicted): F1 0, counted (zero_division=0)
    assert macro_f1([[1, 1], [0, 0]]) == pytest.approx(np.mean([2 / 3, 0.0]))
    assert macro_f1([[0, 0], [0, 0]]) == 0.0
    assert macro_f1([[5, 0], [0, 5]]) == 1.0


def test_macro_f1_agrees_with_scikit_learn_when_installed():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for _ in range(20):
        true, pred = rng.integers(0, 4, 30), rng.integers(0, 4, 30)
        m = confusion(torch.as_tensor(true), torch.as_tensor(pred), 4)
        assert macro_f1(m) == pytest.approx(metrics.f1_score(true, pred, average="macro", zero_division=0))


def test_confusion_counts_rows_true_columns_predicted():
    m = confusion(torch.tensor([0, 0, 1, 2]), torch.tensor([0, 1, 1, 0]), 3)
    assert m.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 0]]


def test_class_weights_balanced_named_and_refused():
    assert class_weights("", ["a", "b"], [0, 0, 1]) is None
    balanced = class_weights("balanced", ["a", "b"], [0, 0, 0, 1])
    assert balanced.tolist() == pytest.approx([4 / 6, 4 / 2])
    assert class_weights({"b": 3}, ["a", "b"], [0, 1]).tolist() == [1.0, 3.0]
    with pytest.raises(ConfigError, match="'c', not classes"):
        class_weights({"c": 2}, ["a", "b"], [0, 1])


# ---- runs ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["sft", "lora"])
def test_classify_run_beats_chance_and_saves_a_classifier(tmp_path, tokenizer, mode):
    base = save_base_model(tmp_path / "base", tokenizer)
    corpus = write_labelled_corpus(tmp_path)
    status = train(classify_config(tmp_path, base, [corpus], mode=mode, lora__rank=8))
    run = tmp_path / "run"
    assert status["state"] == "finished"
    assert status["val_accuracy"] > 0.75 and status["val_macro_f1"] > 0.7  # chance: 0.5
    # every evaluation logs loss, accuracy and macro-F1
    evals = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "val_loss" in r]
    assert evals and all({"val_loss", "val_accuracy", "val_macro_f1"} <= set(r) for r in evals)
    # the confusion matrix covers every validation row (stratified: 6 of each class)
    report = json.loads((run / "confusion.json").read_text())
    assert report["labels"] == ["play", "poem"]
    assert np.sum(report["matrix"]) == report["rows"] == 12
    assert report["accuracy"] == pytest.approx(status["val_accuracy"])
    # the checkpoint is a classifier (a folder with id2label, or an adapter with its labels), and loads back
    checkpoint = sorted((run / "checkpoints").glob("step-*"))[-1]
    assert is_classifier(checkpoint)
    if mode == "lora":
        assert json.loads((checkpoint / ADAPTER_LABELS).read_text())["classes"] == ["play", "poem"]
        assert "score" in json.loads((checkpoint / "adapter_config.json").read_text())["modules_to_save"]
    else:
        assert json.loads((checkpoint / "config.json").read_text())["id2label"] == {"0": "play", "1": "poem"}
    model = load_model(checkpoint, merge=True)
    assert isinstance(model, MiniMindForSequenceClassification)
    probabilities = predict(model, tokenizer, [POEM[:10], PLAY[:20]])
    assert list(probabilities[0]) == ["play", "poem"]
    assert sum(probabilities[0].values()) == pytest.approx(1.0)
    assert probabilities[0]["poem"] > 0.5 and probabilities[1]["play"] > 0.5


@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_lora_classifier_trains_its_head_and_loads_with_the_trained_head(tmp_path, tokenizer, pooling):
    base = save_base_model(tmp_path / "base", tokenizer)
    corpus = write_labelled_corpus(tmp_path)
    train(classify_config(tmp_path, base, [corpus], mode="lora", max_steps=4, eval_every=4,
                          classify__pooling=pooling))
    checkpoint = sorted((tmp_path / "run" / "checkpoints").glob("step-*"))[-1]
    assert json.loads((checkpoint / "labels.json").read_text(encoding="utf-8"))["pooling"] == pooling
    unmerged = load_model(checkpoint)
    merged = load_model(checkpoint, merge=True)
    assert merged.config.classifier_pooling == unmerged.config.classifier_pooling == pooling
    ids = torch.tensor([tokenizer.encode(POEM[:8]) + [tokenizer.eos_token_id]])
    assert torch.allclose(unmerged(input_ids=ids).logits, merged(input_ids=ids).logits, atol=1e-5)
    start = classifier_from(load_model(base), ["play", "poem"], seed=42)  # the head the run started from
    assert not torch.allclose(merged.score.weight, start.score.weight, atol=1e-4)


def test_a_lora_classifiers_head_learns_at_its_own_scaled_rate(tmp_path, tokenizer):
    base = save_base_model(tmp_path / "base", tokenizer)
    corpus = write_labelled_corpus(tmp_path)
    train(classify_config(tmp_path, base, [corpus], mode="lora", max_steps=2, classify__head_lr_scale=10))
    checkpoint = sorted((tmp_path / "run" / "checkpoints").glob("step-*"))[-1]
    groups = json.loads((checkpoint / "trainer" / "state.json").read_text())["optimizer"]["param_groups"]
    head = [g for g in groups if "lr_scale" in g]
    assert len(head) == 1 and len(head[0]["params"]) == 1 and head[0]["lr_scale"] == 10  # peft's trained copy
    assert all(g["lr"] == pytest.approx(head[0]["lr"] / 10) for g in groups if g is not head[0])


def test_class_weights_reach_the_run(tmp_path, tokenizer):
    base = save_base_model(tmp_path / "base", tokenizer)
    corpus = write_labelled_corpus(tmp_path)
    train(classify_config(tmp_path, base, [corpus], max_steps=2, classify__class_weights="balanced"))
    log = (tmp_path / "run" / "train.log").read_text()
    assert "class weights 1, 1" in log
    # the toy's classes show in their length (Chinese pieces take more tokens): its batches stay random
    assert "batches are drawn at random: grouped by length, they would hold one class each" in log


def test_corpus_and_mode_must_match(tmp_path, tokenizer):
    base = save_base_model(tmp_path / "base", tokenizer)
    labelled, text = write_labelled_corpus(tmp_path), write_text_corpus(tmp_path)
    with pytest.raises(ConfigError, match="holds labelled text: train a classifier .* not mode sft alone"):
        train(classify_config(tmp_path, base, [labelled], task="generate"))
    with pytest.raises(ConfigError, match="holds labelled text: train a classifier .* not mode pretrain"):
        train(make_config(tmp_path, [labelled], run_dir=str(tmp_path / "run3")))
    with pytest.raises(ConfigError, match="a classifier learns from labelled text.*this corpus is text"):
        train(classify_config(tmp_path, base, [text], run_dir=str(tmp_path / "run2")))
    with pytest.raises(ConfigError, match="task classify fine-tunes a classifier with mode sft"):
        classify_config(tmp_path, base, [labelled], mode="dpo").resolved("cpu")
    with pytest.raises(ConfigError, match=r"a classifier learns from labelled text.*the corpus \(data.kind\) is chat"):
        classify_config(tmp_path, base, [labelled], data__kind="chat").resolved("cpu")
    with pytest.raises(ConfigError, match="class_weights"):
        classify_config(tmp_path, base, [labelled], classify__class_weights="inverse").resolved("cpu")
    with pytest.raises(ConfigError, match="classify.pooling must be one of last, mean"):
        classify_config(tmp_path, base, [labelled], classify__pooling="max").resolved("cpu")
    with pytest.raises(ConfigError, match="init_from"):
        classify_config(tmp_path, base, [labelled], model__init_from="").resolved("cpu")


def test_qlora_classifier_runs_on_a_4_bit_base_and_loads_back(tmp_path, tokenizer):
    base = save_base_model(tmp_path / "base", tokenizer)
    corpus = write_labelled_corpus(tmp_path)
    # precision auto: bf16 where the CPU has bf16 instructions, fp32 where it has not
    # (forced bf16 QLoRA takes about 3 minutes there, against a second)
    status = train(classify_config(tmp_path, base, [corpus], mode="qlora", lora__rank=4, max_steps=2, eval_every=2,
                                   precision="auto"))
    assert status["state"] == "finished" and 0.0 <= status["val_accuracy"] <= 1.0
    checkpoint = tmp_path / "run" / "checkpoints" / "step-2"
    assert is_classifier(checkpoint) and (checkpoint / ADAPTER_LABELS).is_file()
    model = load_model(checkpoint, merge=True)
    assert isinstance(model, MiniMindForSequenceClassification) and model.config.id2label == {0: "play", 1: "poem"}


def test_stopped_and_resumed_classify_run_matches_an_uninterrupted_one(tmp_path, tokenizer):
    """Full fine-tune (a LoRA run resumes close, not exactly: so does a LoRA language-model run today)."""
    mode = "sft"
    base = save_base_model(tmp_path / "base", tokenizer)
    corpus = write_labelled_corpus(tmp_path)
    build = lambda where: classify_config(where, base, [corpus], mode=mode, max_steps=8, eval_every=1000)
    interrupted_run(build, tmp_path, stop_at=3)  # stopped at step 3, resumed to the end
    assert_same_losses(tmp_path / "a" / "run", tmp_path / "b" / "run", range(1, 9))
    report_a = json.loads((tmp_path / "a" / "run" / "confusion.json").read_text())
    report_b = json.loads((tmp_path / "b" / "run" / "confusion.json").read_text())
    assert report_a["matrix"] == report_b["matrix"]


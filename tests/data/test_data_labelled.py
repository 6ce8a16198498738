"""Labelled corpora (kind `labelled`, for task classify): detection beside the other kinds, field names
detected or chosen, labels as class names in every format, record and corpus errors with file and
position, the unbalanced-classes warning, the stratified split, prepared rows and their batch, and
`data inspect` showing the classes."""

import csv
import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from builders import data_config as config
from builders import write_jsonl
from helpers import ROOT

from minimind.data import (
    DataConfig,
    class_order,
    inspect_corpus,
    prepare_corpus,
    read_documents,
    stratified_split,
)
from minimind.errors import ConfigError, CorpusError
from minimind.training.batches import collate, eval_batches


def reviews(n: int = 12) -> list[dict]:
    return [{"text": f"review number {i} " + ("great" if i % 2 else "awful"), "label": "pos" if i % 2 else "neg"}
            for i in range(n)]


def labels_of(docs) -> list[str]:
    return list(docs.dataset["label"])


# ---- detection and fields ------------------------------------------------------------------------

def test_text_and_label_is_detected_as_labelled(tmp_path):
    docs = read_documents([write_jsonl(tmp_path / "r.jsonl", reviews())], config(tmp_path))
    assert docs.kind == "labelled"
    assert labels_of(docs)[:2] == ["neg", "pos"] and docs.dataset["text"][1] == "review number 1 great"
    assert docs.stats.classes == {"neg": 6, "pos": 6}


def test_other_kinds_are_still_detected_as_before(tmp_path):
    tang = [{"title": f"t{i}", "author": "李白", "text": "床前明月光"} for i in range(3)]  # author is no label
    assert read_documents([write_jsonl(tmp_path / "t.jsonl", tang)], config(tmp_path)).kind == "text"
    pairs = [{"prompt": "p", "chosen": "a", "rejected": "b", "label": "x"}]
    assert read_documents([write_jsonl(tmp_path / "p.jsonl", pairs)], config(tmp_path)).kind == "preference"
    chats = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
              "label": "x"}]
    assert read_documents([write_jsonl(tmp_path / "c.jsonl", chats)], config(tmp_path)).kind == "chat"


@pytest.mark.parametrize("text_name,label_name", [("sentence", "class"), ("review", "category"),
                                                  ("content", "target"), ("text", "labels")])
def test_common_field_names_are_detected(tmp_path, text_name, label_name):
    rows = [{text_name: r["text"], label_name: r["label"]} for r in reviews()]
    docs = read_documents([write_jsonl(tmp_path / "r.jsonl", rows)], config(tmp_path))
    assert docs.kind == "labelled" and docs.stats.classes == {"neg": 6, "pos": 6}


def test_fields_can_be_chosen_and_author_is_a_label_when_the_kind_is_forced(tmp_path):
    rows = [{"body": r["text"], "stars": 5 if r["label"] == "pos" else 1} for r in reviews()]
    docs = read_documents([write_jsonl(tmp_path / "r.jsonl", rows)], config(tmp_path, text_field="body",
                                                                              label_field="stars"))
    assert docs.kind == "labelled" and docs.stats.classes == {"1": 6, "5": 6}  # numbers become class names
    poems = [{"title": "t", "author": "李白" if i % 2 else "杜甫", "text": f"詩 {i}"} for i in range(6)]
    docs = read_documents([write_jsonl(tmp_path / "p.jsonl", poems)], config(tmp_path, kind="labelled"))
    assert docs.stats.classes == {"李白": 3, "杜甫": 3}


def test_every_format_reads_labels_as_class_names(tmp_path):
    rows = reviews()
    with (tmp_path / "r.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["review", "category"])
        writer.writerows([r["text"], r["label"]] for r in rows)
    with (tmp_path / "r.tsv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter="\t")
        writer.writerow(["sentence", "label"])
        writer.writerows([r["text"], r["label"]] for r in rows)
    (tmp_path / "r.json").write_text(json.dumps(rows), encoding="utf-8")
    pq.write_table(pa.table({"text": [r["text"] for r in rows], "label": [int(r["label"] == "pos") for r in rows]}),
                   tmp_path / "r.parquet")
    for name in ("r.csv", "r.tsv", "r.json"):
        docs = read_documents([tmp_path / name], config(tmp_path))
        assert docs.kind == "labelled" and docs.stats.classes == {"neg": 6, "pos": 6}, name
    docs = read_documents([tmp_path / "r.parquet"], config(tmp_path))
    assert docs.kind == "labelled" and docs.stats.classes == {"0": 6, "1": 6}


def test_class_order_is_numeric_for_numbers_else_alphabetical():
    assert class_order(["10", "2", "1", "2"]) == ["1", "2", "10"]
    assert class_order(["b", "a", "10", "2"]) == ["10", "2", "a", "b"]


# ---- errors and warnings ------------------------------------------------------------------------

@pytest.mark.parametrize("bad,message", [
    ({"text": "x", "label": ""}, "empty label in field 'label'"),
    ({"text": "x", "label": None}, "empty label in field 'label'"),
    ({"text": "x", "label": ["a", "b"]}, "multi-label classification is not supported"),
    ({"text": "  ", "label": "pos"}, "empty 'text'; expected the text to classify"),
    ({"text": 3, "label": "pos"}, "field 'text' is a number"),
    ({"text": "x"}, "missing label"),
])
def test_bad_records_name_the_file_and_line(tmp_path, bad, message):
    path = write_jsonl(tmp_path / "r.jsonl", reviews(4) + [bad] + reviews(4))
    with pytest.raises(CorpusError, match=message) as err:
        read_documents([path], config(tmp_path))
    assert err.value.file.endswith("r.jsonl") and err.value.position == "line 5"


def test_a_named_label_field_missing_from_the_first_record_is_reported_as_missing(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [{"text": "x"}] + reviews(4))
    with pytest.raises(CorpusError, match="missing label.*'label'") as err:
        read_documents([path], config(tmp_path, label_field="label"))
    assert err.value.position == "line 1"


def test_a_text_file_cannot_be_labelled(tmp_path):
    (tmp_path / "a.txt").write_text("hello\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="kind 'labelled' needs records"):
        read_documents([tmp_path / "a.txt"], config(tmp_path, kind="labelled"))


def test_one_class_only_is_refused(tmp_path):
    rows = [{"text": f"t{i}", "label": "pos"} for i in range(5)]
    with pytest.raises(CorpusError, match="one class only") as err:
        read_documents([write_jsonl(tmp_path / "r.jsonl", rows)], config(tmp_path))
    assert err.value.position == "line 1"


def test_a_label_seen_once_is_refused_with_what_to_do(tmp_path):
    rows = reviews(6) + [{"text": "odd one", "label": "mixed"}]
    with pytest.raises(CorpusError, match="'mixed' appears only once.*one to train on and one to validate: add "
                                          "examples of it, or remove or relabel") as err:
        read_documents([write_jsonl(tmp_path / "r.jsonl", rows)], config(tmp_path))
    assert err.value.file.endswith("r.jsonl") and err.value.position == "line 7"


def test_a_text_column_taken_for_labels_is_named_as_the_likely_mistake(tmp_path):
    rows = [{"text": "same", "label": f"unique {i}"} for i in range(6)]
    with pytest.raises(CorpusError, match="is that the label field"):
        read_documents([write_jsonl(tmp_path / "r.jsonl", rows)], config(tmp_path))


def test_unbalanced_classes_are_a_warning_with_the_counts(tmp_path):
    rows = [{"text": f"t{i}", "label": "common"} for i in range(40)] + [{"text": "r1", "label": "rare"},
                                                                         {"text": "r2", "label": "rare"}]
    stats = inspect_corpus([write_jsonl(tmp_path / "r.jsonl", rows)], config(tmp_path))
    assert any("unbalanced classes" in w and "common 40" in w and "rare 2" in w for w in stats.warnings)
    balanced = inspect_corpus([write_jsonl(tmp_path / "b.jsonl", reviews())], config(tmp_path))
    assert not any("unbalanced" in w for w in balanced.warnings)


def test_label_field_and_text_field_must_differ():
    with pytest.raises(ConfigError, match="label_field and text_field"):
        DataConfig(text_field="x", label_field="x")


# ---- split, rows, batches -----------------------------------------------------------------------

def test_stratified_split_keeps_every_class_in_both_splits_deterministically():
    labels = np.array(["a"] * 50 + ["b"] * 10 + ["c"] * 2)
    train, val = stratified_split(labels, 0.1, seed=3)
    assert sorted(np.concatenate([train, val]).tolist()) == list(range(62))
    assert {label: int((labels[val] == label).sum()) for label in "abc"} == {"a": 5, "b": 1, "c": 1}
    assert set(labels[train]) == {"a", "b", "c"}
    again = stratified_split(labels, 0.1, seed=3)
    assert train.tolist() == again[0].tolist() and val.tolist() == again[1].tolist()
    assert stratified_split(labels, 0.1, seed=4)[1].tolist() != val.tolist()


def test_prepared_rows_end_in_eos_and_carry_class_ids(tmp_path, tokenizer):
    rows = reviews(20) + [{"text": "word " * 50, "label": "pos"}]
    corpus = prepare_corpus([write_jsonl(tmp_path / "r.jsonl", rows)], tokenizer,
                            config(tmp_path, seq_len=48, val_fraction=0.2))
    assert corpus.kind == "labelled" and corpus.classes == ["neg", "pos"]
    assert corpus.train.column_names == ["input_ids", "label"]
    assert (len(corpus.train), len(corpus.validation)) == (17, 4)  # 2 of each class held out
    assert sorted(corpus.validation["label"]) == [0, 0, 1, 1]
    assert all(ids[-1] == tokenizer.eos_token_id and len(ids) <= 48 for ids in corpus.train["input_ids"])
    assert corpus.stats.truncated == 1 and any("cut to their first 47 tokens" in w for w in corpus.stats.warnings)
    again = prepare_corpus([tmp_path / "r.jsonl"], tokenizer, config(tmp_path, seq_len=48, val_fraction=0.2))
    assert again.from_cache and again.classes == corpus.classes


def test_labelled_batches_pad_the_text_and_give_one_class_id_a_row(tmp_path):
    batch = collate({"input_ids": [[5, 6, 2], [7, 2]], "label": [1, 0]}, pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 2], [7, 2, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["labels"].tolist() == [1, 0]
    same = collate({"input_ids": [[5, 2], [7, 2]], "label": [0, 0]}, pad_id=0)
    assert same["attention_mask"].tolist() == [[1, 1], [1, 1]]  # always given: the classifier pools by it
    from datasets import Dataset

    rows = Dataset.from_dict({"input_ids": [[1, 2]] * 5, "label": [0, 1, 0, 1, 0]})
    assert sum(len(b["labels"]) for b in eval_batches(rows, 2, 0, 0)) == 5


# ---- inspect ------------------------------------------------------------------------------------

def test_data_inspect_shows_the_classes(tmp_path, capsys):
    """The command once as a process (its output as a user sees it), then in this process (`main`,
    the same code without another interpreter's start-up) for its JSON and named fields."""
    from minimind.cli import main

    path = write_jsonl(tmp_path / "r.jsonl", reviews())
    command = ["data", "inspect", str(path), "--cache-dir", str(tmp_path / "c")]
    shown = subprocess.run([sys.executable, "-m", "minimind", *command], capture_output=True, text=True, cwd=ROOT,
                           timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "kind: labelled" in shown.stdout and "classes (2): neg 6, pos 6" in shown.stdout
    assert main(command + ["--json"]) in (0, None)
    assert json.loads(capsys.readouterr().out)["classes"] == {"neg": 6, "pos": 6}
    renamed = [{"body": r["text"], "grade": r["label"]} for r in reviews()]
    path = write_jsonl(tmp_path / "g.jsonl", renamed)
    assert main(["data", "inspect", str(path), "--text-field", "body", "--label-field", "grade",
                 "--cache-dir", str(tmp_path / "c"), "--json"]) in (0, None)
    assert json.loads(capsys.readouterr().out)["classes"] == {"neg": 6, "pos": 6}

"""Preference corpora (prompt + chosen + rejected, for DPO): detection, record errors, every format,
prepared pair rows whose labels cover exactly the answers, the chosen-first batch, inspect and the page."""

import csv
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from builders import (
    assert_bad_second_record,
    assistant,
    bad_record_cases,
    user,
    write_jsonl,
)
from builders import data_config as config
from helpers import ROOT

from minimind.cli import main
from minimind.data import (
    IGNORE,
    inspect_corpus,
    iter_texts,
    prepare_corpus,
    read_documents,
    split_indices,
)
from minimind.errors import CorpusError
from minimind.tokenizer import IM_END
from minimind.training.batches import BatchStream, collate, eval_batches, split_pairs

SAMPLE = ROOT / "samples" / "tang_preference.jsonl"
POEM_5 = "床前明月光，疑是地上霜。\n舉頭望明月，低頭思故鄉。"
POEM_7 = "朝辭白帝彩雲間，千里江陵一日還。\n兩岸猿聲啼不住，輕舟已過萬重山。"
PAIRS = [{"prompt": f"以《詩{i}》为题写一首五言绝句", "chosen": f"{POEM_5}（{i}）", "rejected": f"{POEM_7}（{i}）"}
         for i in range(12)]
SYSTEM = {"role": "system", "content": "你是一位唐代诗人，用诗回答。"}


# ---- reading -----------------------------------------------------------------------------------


def test_detected_and_normalised(tmp_path):
    records = [PAIRS[0],
               {"prompt": [SYSTEM, user("写诗"), assistant("好"), user("五言")], "chosen": [assistant(POEM_5)],
                "rejected": [assistant(POEM_7)], "score": 3}]
    docs = read_documents([write_jsonl(tmp_path / "p.jsonl", records)], config(tmp_path))
    assert docs.kind == "preference" and docs.stats.documents == 2
    rows = list(docs.dataset)
    assert rows[0]["prompt"] == [user(PAIRS[0]["prompt"])]  # a text prompt is one user message
    assert rows[0]["chosen"] == PAIRS[0]["chosen"] and rows[0]["rejected"] == PAIRS[0]["rejected"]
    assert rows[1]["prompt"] == [SYSTEM, user("写诗"), assistant("好"), user("五言")]
    assert (rows[1]["chosen"], rows[1]["rejected"]) == (POEM_5, POEM_7)  # TRL's one-message lists taken apart
    assert docs.stats.characters == sum(len(PAIRS[0][k]) for k in ("prompt", "chosen", "rejected")) + \
        len(SYSTEM["content"]) + len("写诗好五言") + len(POEM_5) + len(POEM_7)
    # a tokenizer learns from every part of a pair
    assert list(iter_texts([tmp_path / "p.jsonl"]))[:3] == [PAIRS[0]["prompt"], PAIRS[0]["chosen"],
                                                          PAIRS[0]["rejected"]]


def test_forced_kind(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", PAIRS[:3])
    assert read_documents([path], config(tmp_path, kind="preference")).kind == "preference"
    with pytest.raises(CorpusError, match="missing field 'messages'"):
        inspect_corpus([path], config(tmp_path, kind="chat"))
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"text": "a"}])
    with pytest.raises(CorpusError, match="missing field 'prompt'") as caught:
        inspect_corpus([plain], config(tmp_path, kind="preference"))
    assert caught.value.position == "line 1"
    with pytest.raises(CorpusError, match="holds plain text"):
        (tmp_path / "plain.txt").write_text("hello\n", encoding="utf-8")
        inspect_corpus([tmp_path / "plain.txt"], config(tmp_path, kind="preference"))


def test_mixed_kinds_are_refused(tmp_path):
    chat = {"messages": [user("q"), assistant("a")]}
    path = write_jsonl(tmp_path / "mixed.jsonl", [PAIRS[0], chat])
    with pytest.raises(CorpusError, match="mixed kinds: found a chat record") as caught:
        inspect_corpus([path], config(tmp_path))
    assert caught.value.position == "line 2" and "first record is preference" in str(caught.value)
    write_jsonl(tmp_path / "chat.jsonl", [chat])
    with pytest.raises(CorpusError, match="one kind per corpus"):
        inspect_corpus([tmp_path / "chat.jsonl", write_jsonl(tmp_path / "p.jsonl", PAIRS[:1])], config(tmp_path))


OK = PAIRS[0]
# (case id, the second record of the file, words the reason must contain)
BAD_RECORDS = [
    ("missing chosen", {"prompt": "q", "rejected": "b", "chosen_": "a"}, "missing field 'chosen'"),
    ("missing rejected", {"prompt": "q", "chosen": "a", "rejected_": "b"}, "missing field 'rejected'"),
    ("missing prompt", {"chosen": "a", "rejected": "b"}, "missing field 'prompt'"),
    ("identical sides", {"prompt": "q", "chosen": POEM_5, "rejected": POEM_5 + " "}, "are identical"),
    ("identical message sides", {"prompt": "q", "chosen": [assistant("a")], "rejected": "a"}, "are identical"),
    ("empty prompt text", {"prompt": "  ", "chosen": "a", "rejected": "b"}, "empty 'prompt'"),
    ("empty prompt list", {"prompt": [], "chosen": "a", "rejected": "b"}, "empty 'prompt'"),
    ("prompt of blank messages", {"prompt": [user(" ")], "chosen": "a", "rejected": "b"}, "empty 'prompt'"),
    ("empty chosen", {"prompt": "q", "chosen": "", "rejected": "b"}, "empty 'chosen'"),
    ("empty rejected", {"prompt": "q", "chosen": "a", "rejected": [assistant(" \n")]}, "empty 'rejected'"),
    ("prompt ends with assistant", {"prompt": [user("q"), assistant("a")], "chosen": "a", "rejected": "b"},
     "roles out of order in 'prompt': found user → assistant; expected an optional system message"),
    ("two user turns", {"prompt": [user("q"), user("q2")], "chosen": "a", "rejected": "b"},
     "found user → user"),
    ("system not first", {"prompt": [user("q"), SYSTEM, user("q2")], "chosen": "a", "rejected": "b"},
     "found user → system → user"),
    ("system only", {"prompt": [SYSTEM], "chosen": "a", "rejected": "b"}, "roles out of order"),
    ("bad role in prompt", {"prompt": [{"role": "robot", "content": "q"}], "chosen": "a", "rejected": "b"},
     "message 1 of 'prompt' has role 'robot'"),
    ("prompt not text", {"prompt": 42, "chosen": "a", "rejected": "b"}, "field 'prompt' is a number"),
    ("two messages in chosen", {"prompt": "q", "chosen": [assistant("a"), assistant("b")], "rejected": "b"},
     "exactly one assistant message"),
    ("user message as chosen", {"prompt": "q", "chosen": [user("a")], "rejected": "b"},
     "field 'chosen' holds a user message"),
    ("rejected not text", {"prompt": "q", "chosen": "a", "rejected": None}, "field 'rejected' is null"),
]


@bad_record_cases(BAD_RECORDS)
def test_bad_record_names_line_and_reason(tmp_path, record, words):
    assert_bad_second_record(tmp_path / "pairs.jsonl", OK, record, words)


def test_every_format_reads_the_same_pairs(tmp_path):
    records = [{**p, "id": i} for i, p in enumerate(PAIRS[:4])]
    records.append({"prompt": [SYSTEM, user("写一首五言绝句")], "chosen": [assistant(POEM_5)], "rejected": POEM_7,
                    "id": 4})
    expected = read_documents([write_jsonl(tmp_path / "a.jsonl", records)], config(tmp_path)).dataset.to_list()
    (tmp_path / "b.json").write_text(json.dumps(records, ensure_ascii=False, indent=1), encoding="utf-8")
    cells = [{k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in r.items()}
             for r in records]  # message lists as JSON text in a cell
    for name, delimiter in (("c.csv", ","), ("d.tsv", "\t")):
        with open(tmp_path / name, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, ["id", "prompt", "chosen", "rejected"], delimiter=delimiter)
            writer.writeheader()
            writer.writerows(cells)
    pq.write_table(pa.Table.from_pylist(cells), tmp_path / "e.parquet")  # JSON-text message columns
    structured = [{"prompt": r["prompt"] if isinstance(r["prompt"], list) else [user(r["prompt"])],
                   "chosen": r["chosen"] if isinstance(r["chosen"], list) else [assistant(r["chosen"])],
                   "rejected": [assistant(r["rejected"])]} for r in records]
    pq.write_table(pa.Table.from_pylist(structured), tmp_path / "f.parquet", row_group_size=2)  # list<struct>
    for name in ("b.json", "c.csv", "d.tsv", "e.parquet", "f.parquet"):
        docs = read_documents([tmp_path / name], config(tmp_path))
        assert docs.kind == "preference", name
        assert docs.dataset.to_list() == expected, name


def test_single_json_object_with_message_lists_is_a_record(tmp_path):
    record = {"prompt": [user("q")], "chosen": [assistant("a")], "rejected": [assistant("b")]}
    (tmp_path / "one.json").write_text(json.dumps(record), encoding="utf-8")
    assert read_documents([tmp_path / "one.json"], config(tmp_path)).stats.documents == 1


def test_table_without_the_columns(tmp_path):
    (tmp_path / "t.csv").write_text("prompt,answer\nq,a\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="expected the columns of kind 'preference'"):
        inspect_corpus([tmp_path / "t.csv"], config(tmp_path, kind="preference"))
    (tmp_path / "u.csv").write_text("question,chosen,rejected\nq,a,b\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="missing field 'prompt'") as caught:
        inspect_corpus([tmp_path / "u.csv"], config(tmp_path))
    assert caught.value.position == "row 1 (line 2)"


# ---- preparation -------------------------------------------------------------------------------


def answer(tokenizer, ids, labels) -> str:
    return tokenizer.decode([t for t, lab in zip(ids, labels) if lab != IGNORE])


def test_prepared_rows_label_exactly_the_answers(tmp_path, tokenizer):
    records = PAIRS + [{"prompt": [SYSTEM, user("写诗"), assistant("不写"), user("写一首")],
                        "chosen": POEM_5, "rejected": POEM_7}]
    path = write_jsonl(tmp_path / "p.jsonl", records)
    corpus = prepare_corpus([path], tokenizer, config(tmp_path, seq_len=256, val_fraction=0.25, seed=3))
    columns = ["chosen_input_ids", "chosen_labels", "rejected_input_ids", "rejected_labels"]
    assert corpus.kind == "preference" and corpus.train.column_names == columns == corpus.validation.column_names
    assert all(corpus.train.features[c].feature.dtype == "int32" for c in columns)
    train_idx, val_idx = split_indices(len(records), 0.25, 3)  # split by pair, as for any corpus
    assert (len(corpus.train), len(corpus.validation)) == (len(train_idx), len(val_idx))
    for rows, idx in ((corpus.train, train_idx), (corpus.validation, val_idx)):
        for row, i in zip(rows, idx):
            for side in ("chosen", "rejected"):
                ids, labels = row[f"{side}_input_ids"], row[f"{side}_labels"]
                assert len(ids) == len(labels) < 256
                assert answer(tokenizer, ids, labels) == records[i][side] + IM_END  # nothing of the prompt
                assert all(lab == t for lab, t in zip(labels, ids) if lab != IGNORE)
            start = next(j for j, lab in enumerate(row["chosen_labels"]) if lab != IGNORE)
            assert row["rejected_input_ids"][:start] == row["chosen_input_ids"][:start]  # the same rendered prompt
            assert row["rejected_labels"][:start] == [IGNORE] * start
    # rendered exactly as chat SFT renders the conversation prompt + [assistant answer]
    last = corpus.train[-1] if len(records) - 1 in train_idx else corpus.validation[-1]
    rendered = tokenizer.apply_chat_template(records[-1]["prompt"] + [assistant(POEM_5)], tokenize=True,
                                             return_dict=True)["input_ids"]
    assert last["chosen_input_ids"] == list(rendered)
    assert corpus.val_characters == sum(len(records[i]["chosen"]) for i in val_idx)
    assert corpus.val_tokens == sum(sum(lab != IGNORE for lab in r["chosen_labels"]) for r in corpus.validation)
    assert corpus.stats.dropped == corpus.stats.truncated == 0 and corpus.stats.tokens > 0
    again = prepare_corpus([path], tokenizer, config(tmp_path, seq_len=256, val_fraction=0.25, seed=3))
    assert again.from_cache and again.train.column_names == columns and again.train[0] == corpus.train[0]


def test_truncation_and_dropped_pairs(tmp_path, tokenizer):
    long_prompt = "写一首诗 " * 40
    records = [PAIRS[0],
               {**PAIRS[1], "rejected": POEM_7 * 6},          # the rejected side is cut, still has answer tokens
               {**PAIRS[2], "prompt": long_prompt}]          # nothing of either answer fits: dropped
    path = write_jsonl(tmp_path / "p.jsonl", records)
    seq_len = max(len(tokenizer.apply_chat_template([user(PAIRS[0]["prompt"]), assistant(PAIRS[i][side])],
                                                    tokenize=True, return_dict=True)["input_ids"])
                  for i in (0, 1) for side in ("chosen", "rejected"))  # the first pair and pair 2's chosen fit
    corpus = prepare_corpus([path], tokenizer, config(tmp_path, seq_len=seq_len, val_fraction=0))
    assert len(corpus.train) == 2 and corpus.stats.dropped == 1 and corpus.stats.truncated == 2  # cut + dropped
    assert any("1 pairs dropped" in w for w in corpus.stats.warnings)
    cut = corpus.train[1]
    assert len(cut["rejected_input_ids"]) == seq_len and cut["rejected_labels"][-1] != IGNORE
    kept = answer(tokenizer, cut["rejected_input_ids"], cut["rejected_labels"]).rstrip("\ufffd")  # cut mid-character
    assert len(kept) > 10 and (POEM_7 * 6).startswith(kept)
    assert answer(tokenizer, cut["chosen_input_ids"], cut["chosen_labels"]) == PAIRS[1]["chosen"] + IM_END
    with pytest.raises(Exception, match="no training pair keeps an answer token"):
        prepare_corpus([write_jsonl(tmp_path / "q.jsonl", records[2:])], tokenizer,
                       config(tmp_path, seq_len=seq_len, val_fraction=0))


# ---- batches -----------------------------------------------------------------------------------


def test_collate_gives_chosen_rows_then_rejected_rows(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "p.jsonl", [PAIRS[0], {**PAIRS[1], "rejected": POEM_7 * 2}, PAIRS[2]])
    corpus = prepare_corpus([path], tokenizer, config(tmp_path, seq_len=256, val_fraction=0))
    rows = corpus.train[[2, 0, 1]]
    pad = tokenizer.pad_token_id
    batch = collate(rows, pad)
    assert set(batch) == {"input_ids", "labels", "attention_mask"}
    sides = rows["chosen_input_ids"] + rows["rejected_input_ids"]
    side_labels = rows["chosen_labels"] + rows["rejected_labels"]
    width = max(map(len, sides))
    assert batch["input_ids"].shape == batch["labels"].shape == batch["attention_mask"].shape == (6, width)
    for r, (ids, labels) in enumerate(zip(sides, side_labels)):
        n = len(ids)
        assert batch["input_ids"][r, :n].tolist() == ids and batch["labels"][r, :n].tolist() == labels
        assert (batch["input_ids"][r, n:] == pad).all() and (batch["labels"][r, n:] == IGNORE).all()
        assert batch["attention_mask"][r].tolist() == [1] * n + [0] * (width - n)
        assert (batch["labels"][r] == IGNORE).sum() > 0  # the prompt is never a target
    chosen, rejected = split_pairs(batch["labels"])
    assert torch.equal(chosen, batch["labels"][:3]) and torch.equal(rejected, batch["labels"][3:])
    one = collate(corpus.train[[0]], pad)  # equal widths still get an attention mask
    assert one["input_ids"].shape[0] == 2 and "attention_mask" in one
    # the trainer's stream and evaluation read preference rows unchanged: B pairs -> 2B rows
    stream = BatchStream(corpus.train, batch_size=2, grad_accum=1, seed=0, pad_id=pad)
    assert next(stream.micro_batches(0))["input_ids"].shape[0] == 4
    assert [b["input_ids"].shape[0] for b in eval_batches(corpus.train, 2, 0, pad)] == [4, 2]


def test_collate_of_other_rows_is_unchanged():
    rows = {"input_ids": [[5, 6, 7], [8, 9, 10]], "labels": [[IGNORE, 6, 7], [IGNORE, IGNORE, 10]]}
    batch = collate(rows, 0)
    assert set(batch) == {"input_ids", "labels"} and batch["input_ids"].shape == (2, 3)
    assert collate({"input_ids": [[1, 2], [3]]}, 0)["labels"].tolist() == [[1, 2], [3, IGNORE]]


# ---- inspect: library, CLI, page ---------------------------------------------------------------


def test_inspect_counts_parts(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "p.jsonl", PAIRS)
    bare = inspect_corpus([path], config(tmp_path))
    assert bare.kind == "preference" and bare.documents == 12 and bare.tokens is None
    assert list(bare.parts) == ["prompt", "chosen", "rejected"] and not bare.part_tokens
    assert bare.parts["chosen"].max == max(len(p["chosen"]) for p in PAIRS)
    assert bare.parts["rejected"].mean == pytest.approx(sum(len(p["rejected"]) for p in PAIRS) / 12, abs=0.01)
    assert sum(bare.parts["prompt"].histogram.counts) == 12
    assert bare.samples[0] == (f"prompt: {PAIRS[0]['prompt']}\nchosen: {POEM_5.replace(chr(10), ' / ')}（0）\n"
                               f"rejected: {POEM_7.replace(chr(10), ' / ')}（0）")
    counted = inspect_corpus([path], config(tmp_path), tokenizer)
    assert counted.tokens > 0 and list(counted.part_tokens) == ["prompt", "chosen", "rejected"]
    chosen_tokens = max(len(tokenizer(p["chosen"] + IM_END, add_special_tokens=False)["input_ids"]) for p in PAIRS)
    assert counted.part_tokens["chosen"].max == chosen_tokens
    from minimind.data import Stats
    assert Stats.from_dict(json.loads(json.dumps(counted.to_dict()))) == counted


def test_data_inspect_cli_on_the_sample(tmp_path, tokenizer_dir, capsys):
    code = main(["data", "inspect", str(SAMPLE), "--cache-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "kind: preference" in out and "pairs: 720" in out
    assert "prompt: mean" in out and "chosen: mean" in out and "rejected: mean" in out
    sample = out[out.index("sample 1:"):].splitlines()
    assert sample[1].startswith("  prompt: ") and sample[2].startswith("  chosen: ")
    assert sample[3].startswith("  rejected: ")
    code = main(["data", "inspect", str(SAMPLE), "--tokenizer", str(tokenizer_dir), "--json", "--cache-dir",
                 str(tmp_path)])
    stats = json.loads(capsys.readouterr().out)
    assert code == 0 and stats["kind"] == "preference" and stats["documents"] == 720
    assert stats["part_tokens"]["chosen"]["mean"] > 0 and stats["tokens"] > stats["characters"] / 4


def test_the_sample_is_a_small_valid_preference_corpus(tmp_path, tokenizer):
    assert SAMPLE.stat().st_size <= 300_000
    records = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    asked = [r["prompt"] if isinstance(r["prompt"], str) else r["prompt"][-1]["content"] for r in records]
    assert all("写一首" in a and a[-4:] in ("五言绝句", "七言绝句", "五言律诗", "七言律诗") for a in asked)
    assert any(isinstance(r["prompt"], list) for r in records)
    corpus = prepare_corpus([SAMPLE], tokenizer, config(tmp_path, seq_len=512, val_fraction=0.05))
    assert len(corpus.train) + len(corpus.validation) == 720 and corpus.stats.dropped == 0


def test_corpus_tab_shows_pairs(tmp_path):
    from webapp_helpers import make_shipped

    from webapp.context import AppContext
    from webapp.jobs import JobManager
    from webapp.tabs import corpus as tab
    from webapp.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    ctx = AppContext(ws, JobManager(ws), shipped_dir=make_shipped(tmp_path / "shipped"))
    upload = tmp_path / "gradio" / "tang_preference.jsonl"
    upload.parent.mkdir()
    upload.write_bytes(SAMPLE.read_bytes())
    ctx.uploads.attach({str(upload)}, upload.parent)
    summary, hist, samples, problems, files = tab.inspect(ctx, [str(upload)], None, "auto", "", "paragraph", True)
    assert "**Kind:** preference" in summary and "**Pairs:** 720" in summary and "720 pairs" in summary
    assert "**Chosen:** mean" in summary and "tokens" in summary
    assert list(samples.columns) == ["prompt", "chosen", "rejected"] and len(samples) == 3
    assert samples["prompt"][1].startswith("以《") and hist.value["data"] and problems == "No problems found."
    message, _ = tab.save(ctx, "dpo", files, "auto", "", "paragraph", True, False, 6400)
    assert "(720 pairs)" in message

"""Prompt corpora (kind `prompts`, for GRPO: the model writes the answers): detection beside preference
pairs, text and message prompts with their reward fields, record errors, every format and a forced
.txt, prepared rows rendered exactly as chat renders a prompt, the too-long prompt dropped, the batch
the GRPO objective reads, inspect and the page, and the shipped Tang prompt samples."""

import csv
import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from builders import (
    assert_bad_second_record,
    assistant,
    bad_record_cases,
    user,
    write_jsonl,
)
from builders import data_config as config
from helpers import ROOT

from minimind.chat_format import encode_chat
from minimind.data import (
    PROMPT_COLUMNS,
    PROMPT_ROOM,
    Stats,
    inspect_corpus,
    iter_texts,
    prepare_corpus,
    read_documents,
    split_indices,
)
from minimind.errors import ConfigError, CorpusError
from minimind.tokenizer import load_tokenizer
from minimind.training.batches import BatchStream, collate, eval_batches

SAMPLE = ROOT / "samples" / "tang_prompts.jsonl"
HELDOUT = ROOT / "samples" / "tang_prompts_heldout.jsonl"
FORMS = ("五言绝句", "七言绝句", "五言律诗", "七言律诗")
SYSTEM = {"role": "system", "content": "你是一位唐代诗人，用诗回答。"}
PROMPTS = [{"prompt": f"以《詩{i}》为题写一首{FORMS[i % 4]}", "form": FORMS[i % 4]} for i in range(12)]
PAIR = {"prompt": "写一首诗", "chosen": "床前明月光", "rejected": "春眠不覺曉"}


@pytest.fixture(scope="module")
def tang_tokenizer():
    """The shipped Tang model's tokenizer: the one GRPO from MiniMind-Tang renders prompts with."""
    return load_tokenizer(ROOT / "checkpoints" / "minimind-tang")


def params_of(docs) -> list[dict]:
    return [json.loads(p) for p in docs.dataset["params"]]


# ---- reading -----------------------------------------------------------------------------------


def test_a_prompt_alone_is_a_prompt_and_pairs_stay_pairs(tmp_path):
    records = [PROMPTS[0],
               {"prompt": [SYSTEM, user("写诗"), assistant("写什么？"), user("五言")], "must_contain": "月",
                "must_avoid": ["花", "酒"], "source": "ignored", "score": 3},
               {"prompt": "随便写", "form": None, "must_contain": []}]  # null and empty: asked for nothing
    docs = read_documents([write_jsonl(tmp_path / "p.jsonl", records)], config(tmp_path))
    assert docs.kind == "prompts" and docs.stats.documents == 3 and docs.dataset.column_names == \
        ["prompt", "params", "chars"]
    assert docs.dataset["prompt"] == [[user(PROMPTS[0]["prompt"])], records[1]["prompt"], [user("随便写")]]
    assert params_of(docs) == [{"form": PROMPTS[0]["form"]}, {"must_contain": ["月"], "must_avoid": ["花", "酒"]},
                               {}]  # one text becomes a list of one; unknown fields are dropped
    assert docs.stats.characters == len(PROMPTS[0]["prompt"]) + len(SYSTEM["content"] + "写诗写什么？五言") + 3
    assert docs.stats.params == {"form": 1, "must_contain": 1, "must_avoid": 1}
    assert list(iter_texts([tmp_path / "p.jsonl"]))[:2] == [PROMPTS[0]["prompt"], SYSTEM["content"]]
    # preference detection is unchanged, and a prompt with one answer side is a pair missing the other
    assert read_documents([write_jsonl(tmp_path / "pair.jsonl", [PAIR])], config(tmp_path)).kind == "preference"
    half = write_jsonl(tmp_path / "half.jsonl", [{"prompt": "q", "chosen": "a"}])
    with pytest.raises(CorpusError, match="missing field 'rejected'"):
        inspect_corpus([half], config(tmp_path))


def test_mixed_kinds_are_refused(tmp_path):
    path = write_jsonl(tmp_path / "mixed.jsonl", [PROMPTS[0], PAIR])
    with pytest.raises(CorpusError, match="mixed kinds: found a preference record") as caught:
        inspect_corpus([path], config(tmp_path))
    assert caught.value.position == "line 2" and "first record is prompt-only" in str(caught.value)
    path = write_jsonl(tmp_path / "mixed2.jsonl", [PAIR, {"prompt": "写诗"}])
    with pytest.raises(CorpusError, match="mixed kinds: found a prompt-only record") as caught:
        inspect_corpus([path], config(tmp_path))
    assert caught.value.position == "line 2"
    with pytest.raises(CorpusError, match="holds prompt-only records but .* holds plain text; expected one kind"):
        inspect_corpus([write_jsonl(tmp_path / "t.jsonl", [{"text": "詩"}]),
                        write_jsonl(tmp_path / "p.jsonl", PROMPTS[:1])], config(tmp_path))


OK = PROMPTS[0]
# (case id, the second record of the file, words the reason must contain)
BAD_RECORDS = [
    ("empty prompt", {"prompt": " \n"}, "empty 'prompt'; expected the request text"),
    ("empty prompt list", {"prompt": []}, "empty 'prompt'"),
    ("roles out of order", {"prompt": [user("q"), assistant("a")]},
     "roles out of order in 'prompt': found user → assistant; expected an optional system message"),
    ("system not first", {"prompt": [user("q"), SYSTEM, user("q2")]}, "found user → system → user"),
    ("bad role", {"prompt": [{"role": "poet", "content": "q"}]}, "message 1 of 'prompt' has role 'poet'"),
    ("prompt not text", {"prompt": 7}, "field 'prompt' is a number (7); expected text"),
    ("form not a string", {"prompt": "q", "form": 5}, "field 'form' is a number (5); expected text naming"),
    ("form a list", {"prompt": "q", "form": ["五言绝句"]}, "field 'form' is a list of 1 items"),
    ("must_contain a number", {"prompt": "q", "must_contain": 3},
     "field 'must_contain' is a number (3); expected a text or a list of texts"),
    ("must_contain an object", {"prompt": "q", "must_contain": {"a": 1}}, "field 'must_contain' is an object"),
    ("must_avoid holding a number", {"prompt": "q", "must_avoid": ["花", 2]},
     "item 2 of field 'must_avoid' is a number (2); expected non-empty text"),
    ("must_avoid holding blank text", {"prompt": "q", "must_avoid": [" "]},
     "item 1 of field 'must_avoid' is a string ' '; expected non-empty text"),
    ("no prompt", {"form": "五言绝句"}, "missing field 'prompt'"),
]


@bad_record_cases(BAD_RECORDS)
def test_bad_record_names_line_and_reason(tmp_path, record, words):
    assert_bad_second_record(tmp_path / "prompts.jsonl", OK, record, words)


def test_every_format_reads_the_same_prompts(tmp_path):
    records = [{**p, "id": i} for i, p in enumerate(PROMPTS[:3])]
    records.append({"prompt": [SYSTEM, user("写一首五言绝句")], "must_contain": ["月", "霜"], "must_avoid": "酒",
                    "id": 3})
    expected = read_documents([write_jsonl(tmp_path / "a.jsonl", records)], config(tmp_path)).dataset.to_list()
    (tmp_path / "b.json").write_text(json.dumps(records, ensure_ascii=False, indent=1), encoding="utf-8")
    columns = ["id", "prompt", "form", "must_contain", "must_avoid"]
    cells = [{k: (r.get(k, "") if isinstance(r.get(k, ""), (str, int)) else json.dumps(r[k], ensure_ascii=False))
              for k in columns} for r in records]  # lists as JSON text in a cell, absent fields empty
    for name, delimiter in (("c.csv", ","), ("d.tsv", "\t")):
        with open(tmp_path / name, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, columns, delimiter=delimiter)
            writer.writeheader()
            writer.writerows(cells)
    pq.write_table(pa.Table.from_pylist(cells), tmp_path / "e.parquet")
    structured = [{"prompt": r["prompt"] if isinstance(r["prompt"], list) else [user(r["prompt"])],
                   "form": r.get("form"), "must_contain": r.get("must_contain"),
                   "must_avoid": [r["must_avoid"]] if "must_avoid" in r else None} for r in records]
    pq.write_table(pa.Table.from_pylist(structured), tmp_path / "f.parquet", row_group_size=2)  # nulls, lists
    for name in ("b.json", "c.csv", "d.tsv", "e.parquet", "f.parquet"):
        docs = read_documents([tmp_path / name], config(tmp_path))
        assert docs.kind == "prompts", name
        assert docs.dataset.to_list() == expected, name
    one = tmp_path / "one.json"  # a single object whose prompt is a message list is one record
    one.write_text(json.dumps({"prompt": [user("q")]}), encoding="utf-8")
    assert read_documents([one], config(tmp_path)).stats.documents == 1


def test_forced_prompts_read_text(tmp_path):
    txt = tmp_path / "asks.txt"
    txt.write_text("写一首五言绝句\n\n以《春》为题写一首七言律诗\n  \n续写：床前明月光\n", encoding="utf-8")
    docs = read_documents([txt], config(tmp_path, kind="prompts"))  # one prompt a line, blank lines skipped
    assert docs.kind == "prompts" and docs.dataset["prompt"] == [[user("写一首五言绝句")],
                                                                [user("以《春》为题写一首七言律诗")],
                                                                [user("续写：床前明月光")]]
    assert params_of(docs) == [{}, {}, {}]
    assert read_documents([txt], config(tmp_path)).kind == "text"  # not forced: plain text as before
    records = write_jsonl(tmp_path / "t.jsonl", [{"text": "写一首诗", "form": "五言绝句"}, {"content": "再写一首"}])
    docs = read_documents([records], config(tmp_path, kind="prompts"))  # the text field holds the prompt
    assert docs.dataset["prompt"] == [[user("写一首诗")], [user("再写一首")]]
    assert params_of(docs) == [{"form": "五言绝句"}, {}]
    (tmp_path / "t.csv").write_text("text,form\n写一首诗,七言绝句\n", encoding="utf-8")
    assert params_of(read_documents([tmp_path / "t.csv"], config(tmp_path, kind="prompts"))) == [{"form": "七言绝句"}]
    blank = write_jsonl(tmp_path / "blank.jsonl", [{"text": "写"}, {"text": " "}])
    with pytest.raises(CorpusError, match="line 2: empty 'text'; expected the prompt text"):
        inspect_corpus([blank], config(tmp_path, kind="prompts"))
    (tmp_path / "u.csv").write_text("question,answer\nq,a\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="expected the columns of kind 'prompts'"):
        inspect_corpus([tmp_path / "u.csv"], config(tmp_path, kind="prompts"))


# ---- preparation -------------------------------------------------------------------------------


def test_prepared_rows_are_what_chat_feeds_the_model(tmp_path, tang_tokenizer):
    records = PROMPTS + [{"prompt": [SYSTEM, user("写诗"), assistant("写什么？"), user("写春天")],
                          "must_contain": "春", "must_avoid": ["秋", "冬"]}]
    path = write_jsonl(tmp_path / "p.jsonl", records)
    corpus = prepare_corpus([path], tang_tokenizer, config(tmp_path, seq_len=128, val_fraction=0.25, seed=3))
    assert corpus.kind == "prompts" and corpus.train.column_names == list(PROMPT_COLUMNS) == \
        corpus.validation.column_names
    assert corpus.train.features["prompt_ids"].feature.dtype == "int32"
    train_idx, val_idx = split_indices(len(records), 0.25, 3)  # split by prompt, as for any corpus
    assert (len(corpus.train), len(corpus.validation)) == (len(train_idx), len(val_idx))
    for rows, idx in ((corpus.train, train_idx), (corpus.validation, val_idx)):
        for row, i in zip(rows, idx):
            messages = records[i]["prompt"] if isinstance(records[i]["prompt"], list) else [user(records[i]["prompt"])]
            assert row["prompt_ids"] == encode_chat(tang_tokenizer, messages)  # the chat path, generation opened
            assert tang_tokenizer.decode(row["prompt_ids"]).endswith("<|im_start|>assistant\n")
            assert row["prompt"] == messages[-1]["content"]
            expected = {k: v if k == "form" or isinstance(v, list) else [v] for k, v in records[i].items()
                        if k != "prompt"}
            assert json.loads(row["params"]) == expected
    assert corpus.val_tokens == 0 and corpus.val_characters == 0  # nothing is labelled
    assert corpus.stats.dropped == corpus.stats.truncated == 0
    assert corpus.stats.tokens == sum(len(r["prompt_ids"]) for r in corpus.train) + \
        sum(len(r["prompt_ids"]) for r in corpus.validation)
    again = prepare_corpus([path], tang_tokenizer, config(tmp_path, seq_len=128, val_fraction=0.25, seed=3))
    assert again.from_cache and again.train.column_names == list(PROMPT_COLUMNS) and again.train[0] == corpus.train[0]


def test_a_prompt_with_no_room_to_answer_is_dropped(tmp_path, tang_tokenizer):
    fits = [user(PROMPTS[0]["prompt"])]
    seq_len = len(encode_chat(tang_tokenizer, fits)) + PROMPT_ROOM  # exactly room for the short prompt
    records = [PROMPTS[0], {"prompt": PROMPTS[0]["prompt"] + "，要有月亮和霜", "form": "五言绝句"}, PROMPTS[4]]
    path = write_jsonl(tmp_path / "p.jsonl", records)
    corpus = prepare_corpus([path], tang_tokenizer, config(tmp_path, seq_len=seq_len, val_fraction=0))
    assert len(corpus.train) == 2 and corpus.stats.dropped == 1 and corpus.stats.truncated == 0
    assert corpus.train["prompt"] == [PROMPTS[0]["prompt"], PROMPTS[4]["prompt"]]
    assert any(f"1 prompts dropped: longer than {seq_len - PROMPT_ROOM} tokens" in w for w in corpus.stats.warnings)
    assert "prompts dropped, too long to leave room for an answer in seq_len: 1" in corpus.stats.summary()
    with pytest.raises(ConfigError, match="every training prompt is longer than"):
        prepare_corpus([write_jsonl(tmp_path / "q.jsonl", records[1:2])], tang_tokenizer,
                       config(tmp_path, seq_len=seq_len, val_fraction=0))


# ---- batches -----------------------------------------------------------------------------------


def test_collate_gives_the_grpo_batch(tmp_path, tang_tokenizer):
    records = PROMPTS[:3] + [{"prompt": "写诗", "must_avoid": ["酒"]}]
    corpus = prepare_corpus([write_jsonl(tmp_path / "p.jsonl", records)], tang_tokenizer,
                            config(tmp_path, seq_len=128, val_fraction=0))
    rows = corpus.train[[3, 0]]
    batch = collate(rows, tang_tokenizer.pad_token_id)
    assert set(batch) == {"prompt_ids", "prompt", "params"}
    assert batch["prompt_ids"] == rows["prompt_ids"] and all(type(t) is int for t in batch["prompt_ids"][0])
    assert batch["prompt"] == ["写诗", PROMPTS[0]["prompt"]]
    assert batch["params"] == [{"must_avoid": ["酒"]}, {"form": PROMPTS[0]["form"]}]
    # the trainer's stream and evaluation read prompt rows through the same collate
    stream = BatchStream(corpus.train, batch_size=2, grad_accum=2, seed=0, pad_id=0)
    micro = list(stream.micro_batches(0))
    assert len(micro) == 2 and all(len(m["prompt_ids"]) == len(m["params"]) == 2 for m in micro)
    assert sorted(p for m in micro for p in m["prompt"]) == sorted(corpus.train["prompt"])
    assert [len(b["prompt"]) for b in eval_batches(corpus.train, 3, 0, 0)] == [3, 1]


# ---- inspect: library, page --------------------------------------------------------------------


def test_inspect_counts_prompt_tokens(tmp_path, tang_tokenizer):
    path = write_jsonl(tmp_path / "p.jsonl", PROMPTS + [{"prompt": "写诗\n要押韵", "must_contain": "月"}])
    bare = inspect_corpus([path], config(tmp_path))
    assert bare.kind == "prompts" and bare.documents == 13 and bare.tokens is None and not bare.parts
    assert bare.params == {"form": 12, "must_contain": 1}
    assert bare.samples[0] == f"prompt: {PROMPTS[0]['prompt']}\nform: {PROMPTS[0]['form']}"
    summary = bare.summary()
    assert "prompts: 13" in summary and "prompts with reward fields: form 12, must_contain 1" in summary
    assert "sample 1:\n  prompt: '以《詩0》为题写一首五言绝句'\n  form: '五言绝句'" in summary
    counted = inspect_corpus([path], config(tmp_path, samples=13), tang_tokenizer)
    lengths = [len(encode_chat(tang_tokenizer, [user(r["prompt"])])) for r in PROMPTS]
    lengths.append(len(encode_chat(tang_tokenizer, [user("写诗\n要押韵")])))
    assert counted.tokens == sum(lengths) and counted.token_histogram.unit == "tokens"
    assert counted.samples[-1] == "prompt: 写诗 / 要押韵\nmust_contain: 月"
    assert Stats.from_dict(json.loads(json.dumps(counted.to_dict()))) == counted


def test_corpus_tab_shows_prompts(tmp_path):
    from webapp.context import SAMPLES, AppContext
    from webapp.jobs import JobManager
    from webapp.tabs import corpus as tab
    from webapp.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    ctx = AppContext(ws, JobManager(ws), shipped_dir=ROOT / "checkpoints")
    sample = next(name for name, file in SAMPLES.items() if file == SAMPLE.name)
    summary, hist, samples, problems, files = tab.inspect(ctx, [], sample, "auto", "", "paragraph", True)
    assert "**Kind:** prompts" in summary and "**Prompts:** 2,000" in summary and "2,000 prompts" in summary
    assert "**With reward fields:** form 2,000" in summary and "**Tokens**" in summary
    assert list(samples.columns) == ["prompt", "form"] and len(samples) == 3
    assert samples["prompt"][0].startswith("以《") and samples["form"][0] in FORMS
    assert hist.value["data"] and problems == "No problems found."
    message, _ = tab.save(ctx, "grpo", files, "auto", "", "paragraph", True, False, 6400)
    assert "(2,000 prompts)" in message


# ---- the shipped samples -----------------------------------------------------------------------


def read(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def title(record) -> str:
    return record["prompt"][record["prompt"].index("《") + 1: record["prompt"].index("》")]


@pytest.mark.parametrize("path, per_form", [(SAMPLE, 500), (HELDOUT, 50)], ids=["train", "heldout"])
def test_the_shipped_prompt_samples(tmp_path, tang_tokenizer, path, per_form):
    assert path.stat().st_size < 4 * per_form * 100  # well under 1 MB: under 100 bytes a prompt
    records = read(path)
    assert Counter(r["form"] for r in records) == {form: per_form for form in FORMS}  # balanced
    assert all(r["prompt"] == f"以《{title(r)}》为题写一首{r['form']}" and set(r) == {"prompt", "form"}
               for r in records)
    assert len({title(r) for r in records}) == len(records)  # distinct titles
    corpus = prepare_corpus([path], tang_tokenizer, config(tmp_path, seq_len=256, val_fraction=0.02, seed=1234))
    assert corpus.kind == "prompts" and corpus.stats.dropped == 0 and corpus.stats.skipped_count == 0
    assert len(corpus.train) + len(corpus.validation) == 4 * per_form and len(corpus.validation) >= 1
    assert corpus.stats.params == {"form": 4 * per_form}
    assert {json.loads(p)["form"] for p in corpus.train["params"]} == set(FORMS)


def test_heldout_titles_are_not_in_the_training_prompts():
    assert not {title(r) for r in read(HELDOUT)} & {title(r) for r in read(SAMPLE)}

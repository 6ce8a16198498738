"""Reading every format, packing plain text, masking chat, the document split and the cache."""

import csv
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import minimind.data.prepare as prepare_module
from minimind.data import (IGNORE, DataConfig, Stats, inspect_corpus, iter_texts, prepare_corpus, read_documents,
                           split_indices)
from minimind.errors import ConfigError, CorpusError
from minimind.tokenizer import IM_END, train_tokenizer
from builders import data_config as config
from builders import write_jsonl
from helpers import ROOT, SAMPLE_TEXTS

SAMPLES = ROOT / "samples"
DOCS = [f"{t} ({i})" for i, t in enumerate(SAMPLE_TEXTS[:8] * 6)]  # 48 distinct documents


def decode_rows(tokenizer, rows) -> str:
    """The text of every labelled token of `rows`, decoded as one stream (a character may span two rows)."""
    return tokenizer.decode([t for r in rows for t, lab in zip(r["input_ids"], r["labels"]) if lab != IGNORE])


def test_every_format_reads_the_same_documents(tmp_path):
    records = [{"title": f"t{i}", "author": "a", "text": d} for i, d in enumerate(DOCS)]
    write_jsonl(tmp_path / "a.jsonl", records)
    (tmp_path / "b.json").write_text(json.dumps(records, ensure_ascii=False, indent=2), encoding="utf-8")
    with open(tmp_path / "c.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, ["title", "author", "text"])
        writer.writeheader()
        writer.writerows(records)
    with open(tmp_path / "d.tsv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, ["title", "text"], delimiter="\t", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "e.parquet", row_group_size=10)
    (tmp_path / "f.txt").write_text("\n\n".join(DOCS) + "\n", encoding="utf-8")
    (tmp_path / "g.md").write_text("\n".join(DOCS) + "\n", encoding="utf-8")
    (tmp_path / "h.jsonl").write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")  # no \n at end
    for name, extra in [("a.jsonl", {}), ("b.json", {}), ("c.csv", {}), ("d.tsv", {}), ("e.parquet", {}),
                        ("f.txt", {"split": "paragraph"}), ("g.md", {"split": "line"}), ("h.jsonl", {})]:
        docs = read_documents([tmp_path / name], config(tmp_path, **extra))
        assert docs.kind == "text", name
        assert docs.dataset["text"] == DOCS, name
        assert docs.stats.characters == sum(map(len, DOCS))


def test_text_field_content_and_named_fields(tmp_path):
    write_jsonl(tmp_path / "c.jsonl", [{"content": d} for d in DOCS[:3]])
    write_jsonl(tmp_path / "p.jsonl", [{"poem": d, "text": "ignored"} for d in DOCS[:3]])
    assert list(iter_texts([tmp_path / "c.jsonl"])) == DOCS[:3]
    assert list(iter_texts([tmp_path / "p.jsonl"], text_field="poem")) == DOCS[:3]


def test_paragraph_split_and_long_paragraphs(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text("Para one\nstill one\n\n\n  \nPara two\r\n\r\nthree\n", encoding="utf-8")
    paragraphs = DataConfig(split="paragraph")
    assert list(iter_texts([path], config=paragraphs)) == ["Para one\nstill one", "Para two", "three"]
    long = tmp_path / "long.txt"
    long.write_text("".join(f"line {i} " + "x" * 90 + "\n" for i in range(100)), encoding="utf-8")
    docs = read_documents([long], config(tmp_path, max_document_chars=2000, split="paragraph"))
    assert docs.stats.documents == 5 and all(len(t) <= 2100 for t in docs.dataset["text"])
    assert "\n".join(docs.dataset["text"]) + "\n" == long.read_text()


def test_sections_keep_running_text_and_cut_at_breaks(tmp_path):
    """The default split: paragraphs stay together with the blank lines between them (a speech and the
    one that answers it), a section ends at the paragraph that passes section_chars, or at a break of
    three blank lines once it holds a quarter of that; nothing is lost or added but the cut blank lines."""
    speech = "ROMEO.\nBut soft, what light through yonder window breaks?\n"
    scene = "\n".join([speech] * 40)                      # ~2,400 characters, single blank lines inside
    book = tmp_path / "play.txt"
    book.write_text("\n\n\n\nSCENE I.\n\n" + scene + "\n\n\n\nSCENE II.\n\n" + scene + "\n\n" + "tail.\n",
                    encoding="utf-8")
    docs = read_documents([book], config(tmp_path, section_chars=4000))
    texts = docs.dataset["text"]
    assert [t.split("\n")[0] for t in texts] == ["SCENE I.", "SCENE II."]    # cut at the scene break
    assert texts[0] == "SCENE I.\n\n" + scene.strip("\n")                  # blank lines kept inside
    assert texts[1].endswith("breaks?\n\n\ntail.")  # two blank lines are no break
    assert docs.stats.documents == 2
    small = read_documents([book], config(tmp_path, section_chars=1000))      # a section per ~1,000 chars
    assert all(len(t) < 1000 + 2 * len(speech) for t in small.dataset["text"])
    assert "".join(t.replace("\n", "") for t in small.dataset["text"]) == book.read_text().replace("\n", "")
    with pytest.raises(ConfigError, match="section_chars"):
        DataConfig(section_chars=10)


def test_json_array_streams_across_chunks_with_exact_lines(tmp_path):
    records = [{"text": f"record {i} " + "詩" * 300} for i in range(3000)]  # ~ 3 MB, several read chunks
    body = "[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n]\n"
    (tmp_path / "big.json").write_text(body, encoding="utf-8")
    docs = read_documents([tmp_path / "big.json"], config(tmp_path))
    assert docs.stats.documents == 3000 and docs.dataset[2999]["text"] == records[2999]["text"]
    broken = body.replace('{"text": "record 2500 ', '{"text": record 2500 ')
    (tmp_path / "broken.json").write_text(broken, encoding="utf-8")
    with pytest.raises(CorpusError, match=r"broken\.json: record 2501 \(line 2502\)") as caught:
        read_documents([tmp_path / "broken.json"], config(tmp_path))
    assert caught.value.position == "record 2501 (line 2502)"


def test_plain_text_is_packed_into_full_rows_split_by_document(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "poems.jsonl", [{"text": d} for d in DOCS])
    cfg = config(tmp_path, seq_len=32, val_fraction=0.25, seed=3)
    corpus = prepare_corpus([path], tokenizer, cfg)
    assert corpus.kind == "text" and corpus.train.column_names == ["input_ids", "labels"]
    train_idx, val_idx = split_indices(len(DOCS), 0.25, 3)
    assert len(val_idx) == 12 and not set(train_idx) & set(val_idx)
    eos = tokenizer.eos_token
    for split, idx in (("train", train_idx), ("validation", val_idx)):
        rows = corpus.train if split == "train" else corpus.validation
        assert all(len(r["input_ids"]) == 32 == len(r["labels"]) for r in rows)
        for r in list(rows)[:-1]:
            assert r["labels"] == r["input_ids"]
        # the rows hold exactly these documents, in order, each followed by EOS: nothing lost, nothing mixed
        assert decode_rows(tokenizer, rows) == "".join(DOCS[i] + eos for i in idx)
        last = rows[-1]
        pad = [lab == IGNORE for lab in last["labels"]]
        assert all(t == tokenizer.pad_token_id for t, p in zip(last["input_ids"], pad) if p)
    val_docs = [DOCS[i] for i in val_idx]
    assert corpus.val_characters == sum(map(len, val_docs))
    assert corpus.val_tokens == sum(len(tokenizer(d, add_special_tokens=False)["input_ids"]) + 1 for d in val_docs)
    assert corpus.stats.tokens == sum(len(tokenizer(d, add_special_tokens=False)["input_ids"]) for d in DOCS)
    assert corpus.stats.train_documents == 36 and corpus.stats.val_documents == 12
    assert corpus.stats.chars_per_token == pytest.approx(corpus.stats.characters / corpus.stats.tokens)


def test_split_is_deterministic_by_seed_and_never_empty():
    for n in (2, 3, 10, 1000):
        for fraction in (0.001, 0.05, 0.5, 0.99):
            train, val = split_indices(n, fraction, seed=7)
            assert len(val) >= 1 and len(train) >= 1 and len(train) + len(val) == n
            assert sorted(np.concatenate([train, val]).tolist()) == list(range(n))
            again = split_indices(n, fraction, seed=7)
            assert train.tolist() == again[0].tolist() and val.tolist() == again[1].tolist()
    assert split_indices(1000, 0.1, 1)[1].tolist() != split_indices(1000, 0.1, 2)[1].tolist()
    assert len(split_indices(1, 0.5, 0)[1]) == 0 and len(split_indices(10, 0.0, 0)[1]) == 0


def test_same_inputs_give_the_same_rows_in_another_cache(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "poems.jsonl", [{"text": d} for d in DOCS])
    a = prepare_corpus([path], tokenizer, DataConfig(cache_dir=str(tmp_path / "a"), seq_len=16, seed=5))
    b = prepare_corpus([path], tokenizer, DataConfig(cache_dir=str(tmp_path / "b"), seq_len=16, seed=5))
    assert a.fingerprint == b.fingerprint and not b.from_cache
    assert a.train["input_ids"] == b.train["input_ids"] and a.validation["input_ids"] == b.validation["input_ids"]
    c = prepare_corpus([path], tokenizer, DataConfig(cache_dir=str(tmp_path / "a"), seq_len=16, seed=6))
    assert c.fingerprint != a.fingerprint and c.validation["input_ids"] != a.validation["input_ids"]


def test_second_prepare_comes_from_the_cache_without_tokenizing(tmp_path, tokenizer, monkeypatch):
    path = write_jsonl(tmp_path / "poems.jsonl", [{"text": d} for d in DOCS])
    cfg = config(tmp_path, seq_len=16)
    first = prepare_corpus([path], tokenizer, cfg)

    def forbidden(*args, **kwargs):
        raise AssertionError("tokenized again")

    monkeypatch.setattr(prepare_module, "tokenize_batch", forbidden)
    again = prepare_corpus([path], tokenizer, cfg)  # `forbidden` proves nothing was tokenized again
    assert again.from_cache and not first.from_cache and again.fingerprint == first.fingerprint
    assert again.train["input_ids"] == first.train["input_ids"] and again.stats == first.stats
    assert again.train.cache_files[0]["filename"].startswith(str(tmp_path / "cache"))  # memory-mapped from the cache
    with pytest.raises(Exception, match="tokenized again"):  # a changed setting is a new key
        prepare_corpus([path], tokenizer, config(tmp_path, seq_len=17))
    write_jsonl(path, [{"text": d} for d in DOCS[:-1]])  # same name, new content: a new key
    with pytest.raises(Exception, match="tokenized again"):
        prepare_corpus([path], tokenizer, cfg)


def test_chat_labels_mask_every_non_assistant_token(tmp_path, tokenizer):
    records = [{"messages": [{"role": "system", "content": "你是诗人"}, {"role": "user", "content": f"写诗 {i}"},
                             {"role": "assistant", "content": DOCS[i]}, {"role": "user", "content": "再来"},
                             {"role": "assistant", "content": DOCS[i + 1]}]} for i in range(20)]
    path = write_jsonl(tmp_path / "chat.jsonl", records)
    corpus = prepare_corpus([path], tokenizer, config(tmp_path, seq_len=256, val_fraction=0.2))
    assert corpus.kind == "chat" and len(corpus.train) == 16 and len(corpus.validation) == 4
    _, val_idx = split_indices(20, 0.2, 0)
    train_idx = [i for i in range(20) if i not in set(val_idx)]
    for rows, idx in ((corpus.train, train_idx), (corpus.validation, val_idx)):
        for row, i in zip(rows, idx):
            ids, labels = row["input_ids"], row["labels"]
            assert all(lab in (IGNORE, t) for t, lab in zip(ids, labels))
            assert decode_rows(tokenizer, [row]) == DOCS[i] + IM_END + DOCS[i + 1] + IM_END
            masked = tokenizer.decode([t for t, lab in zip(ids, labels) if lab == IGNORE])
            assert masked == (f"<|im_start|>system\n你是诗人{IM_END}\n<|im_start|>user\n写诗 {i}{IM_END}\n"
                              f"<|im_start|>assistant\n\n<|im_start|>user\n再来{IM_END}\n<|im_start|>assistant\n\n")
    assert corpus.val_characters == sum(len(DOCS[i]) + len(DOCS[i + 1]) for i in val_idx)
    assert corpus.val_tokens == sum(sum(lab != IGNORE for lab in r["labels"]) for r in corpus.validation)


def test_instruction_records_become_masked_turns(tmp_path, tokenizer):
    records = [{"instruction": "Continue the line", "input": DOCS[i][:5], "output": DOCS[i]} for i in range(6)]
    records.append({"instruction": "Say hello", "input": "", "output": "Hello world!", "system": "be brief"})
    path = write_jsonl(tmp_path / "alpaca.jsonl", records)
    assert list(iter_texts([path]))[:3] == ["Continue the line\n\n" + DOCS[0][:5], DOCS[0], "Continue the line\n\n"
                                            + DOCS[1][:5]]
    corpus = prepare_corpus([path], tokenizer, config(tmp_path, val_fraction=0.0))
    assert corpus.kind == "instruction" and len(corpus.train) == 7 and len(corpus.validation) == 0
    rows = list(corpus.train)
    assert decode_rows(tokenizer, rows[-1:]) == "Hello world!" + IM_END
    assert tokenizer.decode(rows[-1]["input_ids"]).startswith("<|im_start|>system\nbe brief")


def test_long_examples_are_truncated_and_counted(tmp_path, tokenizer):
    long_answer = " ".join(DOCS)
    records = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": long_answer}]},
               {"messages": [{"role": "user", "content": long_answer}, {"role": "assistant", "content": "ok"}]},
               {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "short"}]}]
    path = write_jsonl(tmp_path / "chat.jsonl", records)
    corpus = prepare_corpus([path], tokenizer, config(tmp_path, seq_len=64, val_fraction=0.0))
    assert corpus.stats.truncated == 2 and corpus.stats.dropped == 1  # the long prompt leaves no answer token
    assert len(corpus.train) == 2 and all(len(r["input_ids"]) <= 64 for r in corpus.train)
    assert max(len(r["input_ids"]) for r in corpus.train) == 64
    assert any("1 examples dropped" in w for w in corpus.stats.warnings)
    assert prepare_corpus([path], tokenizer, config(tmp_path, seq_len=64, val_fraction=0.0)).stats == corpus.stats
    write_jsonl(path, records[1:2])
    with pytest.raises(ConfigError, match="seq_len=64 is too short"):
        prepare_corpus([path], tokenizer, config(tmp_path, seq_len=64))


def test_a_single_document_trains_and_says_nothing_is_held_out(tmp_path, tokenizer):
    (tmp_path / "one.txt").write_text("just one paragraph of text\n", encoding="utf-8")
    corpus = prepare_corpus([tmp_path / "one.txt"], tokenizer, config(tmp_path, seq_len=8))
    assert len(corpus.train) >= 1 and len(corpus.validation) == 0 and corpus.val_tokens == 0
    assert any("nothing is held out" in w for w in corpus.stats.warnings)


def test_two_worker_processes_give_the_same_rows(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "poems.jsonl", [{"text": d} for d in DOCS * 5])
    chat = write_jsonl(tmp_path / "chat.jsonl", [{"messages": [{"role": "user", "content": d[:4]},
                                                               {"role": "assistant", "content": d}]} for d in DOCS])
    for files, batch in (([path], 20), ([chat], 8)):
        one = prepare_corpus(files, tokenizer, DataConfig(cache_dir=str(tmp_path / "one"), batch_size=batch))
        two = prepare_corpus(files, tokenizer, DataConfig(cache_dir=str(tmp_path / "two"), batch_size=batch,
                                                          num_proc=2))
        assert one.train["input_ids"] == two.train["input_ids"] and one.train["labels"] == two.train["labels"]
        assert one.val_tokens == two.val_tokens
        shards = json.loads((two.path / "meta.json").read_text())["files"]["train"]
        assert len(shards) == (2 if files == [chat] else 1)  # chat rows stay in the workers' shards
        again = prepare_corpus(files, tokenizer, DataConfig(cache_dir=str(tmp_path / "two"), num_proc=2,
                                                            batch_size=batch))
        assert again.from_cache and again.train["labels"] == two.train["labels"]


def test_inspect_counts_tokens_only_with_a_tokenizer(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "poems.jsonl", [{"text": d} for d in DOCS])
    bare = inspect_corpus([path], config(tmp_path))
    assert bare.tokens is None and bare.documents == len(DOCS) and bare.length_histogram.counts
    assert sum(bare.length_histogram.counts) == len(DOCS) and len(bare.samples) == 3
    counted = inspect_corpus([path], config(tmp_path), tokenizer)
    assert counted.tokens == sum(len(tokenizer(d, add_special_tokens=False)["input_ids"]) for d in DOCS)
    assert sum(counted.token_histogram.counts) == len(DOCS)
    assert Stats.from_dict(json.loads(json.dumps(counted.to_dict()))) == counted
    assert "chars/token" in counted.summary()


def test_chat_texts_train_a_tokenizer(tmp_path):
    records = [{"messages": [{"role": "user", "content": "写一首诗"}, {"role": "assistant", "content": d}]}
               for d in DOCS]
    path = write_jsonl(tmp_path / "chat.jsonl", records)
    texts = list(iter_texts([path]))
    assert texts[:2] == ["写一首诗", DOCS[0]]
    tok, report = train_tokenizer([path, SAMPLES / "shakespeare_sample.txt"], vocab_size=400, min_frequency=1)
    assert len(tok) == 400 and report.characters > sum(map(len, DOCS))


def test_shipped_samples(tmp_path, tokenizer):
    plain = inspect_corpus([SAMPLES / "tang_poems_sample.jsonl", SAMPLES / "shakespeare_sample.txt"],
                           config(tmp_path, text_field="text"))
    # the poems one by one, the play in sections (its scenes)
    assert plain.kind == "text" and plain.documents > 2020 and plain.skipped_count == 0
    assert [f.documents for f in plain.files][1] in range(8, 20)
    chat = prepare_corpus([SAMPLES / "tang_chat_sample.jsonl"], tokenizer, config(tmp_path, seq_len=256))
    assert chat.kind == "chat" and len(chat.train) > 250 and len(chat.validation) >= 10
    assert all(p.stat().st_size <= 1_000_000 for p in SAMPLES.iterdir())  # each sample at most 1 MB ...
    assert sum(p.stat().st_size for p in SAMPLES.iterdir()) < 1_700_000      # ... and all of them small
    for name in ("LICENSE.chinese-poetry", "LICENSE.shakespeare", "README.md"):
        assert (SAMPLES / name).is_file()


def test_config_is_checked():
    for bad in (dict(kind="poetry"), dict(split="word"), dict(seq_len=2), dict(val_fraction=1.0),
                dict(num_proc=8), dict(max_file_mb=0), dict(text_field="")):
        with pytest.raises(ConfigError):
            DataConfig(**bad)


def test_tokenizer_without_chat_template_is_refused_for_chat(tmp_path, tokenizer):
    import copy

    plain = copy.deepcopy(tokenizer)
    plain.chat_template = None
    path = write_jsonl(tmp_path / "chat.jsonl", [{"messages": [{"role": "user", "content": "q"},
                                                               {"role": "assistant", "content": "a"}]}])
    with pytest.raises(ConfigError, match="chat template"):
        prepare_corpus([path], plain, config(tmp_path))

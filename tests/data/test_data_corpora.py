"""The shared real corpora (Tang poems, Shakespeare) prepared end to end; skipped without ../shared."""

import json

import pytest

from minimind.data import IGNORE, DataConfig, prepare_corpus, read_documents, split_indices
from minimind.tokenizer import IM_END
from helpers import shared_corpus


@pytest.fixture(scope="module")
def corpora():
    return [shared_corpus("tang_poems.jsonl"), shared_corpus("shakespeare.txt")]


def test_real_corpora_split_by_document_and_deterministically(tmp_path, tokenizer, corpora):
    cfg = DataConfig(text_field="text", seq_len=256, val_fraction=0.02, seed=11, cache_dir=str(tmp_path))
    corpus = prepare_corpus(corpora, tokenizer, cfg)
    docs = read_documents(corpora, cfg)
    n = len(docs.dataset)
    assert corpus.kind == "text" and n == 56448 + corpus.stats.files[1].documents
    assert corpus.stats.files[0].documents == 56448 and corpus.stats.skipped_count == 0
    train_idx, val_idx = split_indices(n, 0.02, 11)
    assert corpus.stats.val_documents == len(val_idx) == round(n * 0.02)
    # the validation rows are exactly the held-out documents (poems and paragraphs), each ending in EOS
    val_docs = docs.dataset.select(val_idx)["text"]
    ids = [t for row in corpus.validation for t, lab in zip(row["input_ids"], row["labels"]) if lab != IGNORE]
    assert tokenizer.decode(ids) == "".join(d + tokenizer.eos_token for d in val_docs)
    assert corpus.val_characters == sum(map(len, val_docs)) and corpus.val_tokens == len(ids)
    assert all(len(r) == 256 for r in corpus.train[:1000]["input_ids"])
    # no validation poem is a training document; the same seed gives the same split
    assert not set(train_idx) & set(val_idx)
    again = prepare_corpus(corpora, tokenizer, cfg)
    assert again.from_cache and again.fingerprint == corpus.fingerprint
    assert again.validation["input_ids"] == corpus.validation["input_ids"]
    assert split_indices(n, 0.02, 11)[1].tolist() == val_idx.tolist()
    assert 0.3 < corpus.stats.chars_per_token < 2.0


def test_real_poems_as_chat_mask_every_non_assistant_token(tmp_path, tokenizer, corpora):
    records = []
    with open(corpora[0], encoding="utf-8") as fh:
        for _, line in zip(range(300), fh):
            poem = json.loads(line)
            records.append({"messages": [{"role": "user", "content": f"以《{poem['title']}》为题写一首诗"},
                                         {"role": "assistant", "content": poem["text"]}]})
    path = tmp_path / "tang_chat.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records), encoding="utf-8")
    corpus = prepare_corpus([path], tokenizer, DataConfig(seq_len=1024, cache_dir=str(tmp_path / "c")))
    train_idx, val_idx = split_indices(300, 0.05, 0)
    for rows, idx in ((corpus.train, train_idx), (corpus.validation, val_idx)):
        assert len(rows) == len(idx)
        for row, i in zip(rows, idx):
            kept = [t for t, lab in zip(row["input_ids"], row["labels"]) if lab != IGNORE]
            masked = [t for t, lab in zip(row["input_ids"], row["labels"]) if lab == IGNORE]
            assert tokenizer.decode(kept) == records[i]["messages"][1]["content"] + IM_END
            assert tokenizer.decode(masked) == (f"<|im_start|>user\n{records[i]['messages'][0]['content']}"
                                                f"{IM_END}\n<|im_start|>assistant\n\n")

"""`python -m minimind data inspect|prepare`: stats on stdout, one-line errors, exit codes."""

import json

from minimind.cli import main
from helpers import ROOT

SAMPLES = ROOT / "samples"


def test_inspect_prints_stats(tmp_path, capsys):
    code = main(["data", "inspect", str(SAMPLES / "tang_poems_sample.jsonl"), str(SAMPLES / "shakespeare_sample.txt"),
                 "--cache-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "kind: text" in out and "documents: 2,026" in out and "sample 1:" in out  # 2,016 poems, 10 sections
    code = main(["data", "inspect", str(SAMPLES / "shakespeare_sample.txt"), "--split", "paragraph",
                 "--cache-dir", str(tmp_path)])
    assert code == 0 and "documents: 706" in capsys.readouterr().out


def test_inspect_json_with_tokenizer(tmp_path, tokenizer_dir, capsys):
    code = main(["data", "inspect", str(SAMPLES / "tang_chat_sample.jsonl"), "--tokenizer", str(tokenizer_dir),
                 "--json", "--cache-dir", str(tmp_path)])
    stats = json.loads(capsys.readouterr().out)
    assert code == 0 and stats["kind"] == "chat" and stats["tokens"] > stats["documents"] == 314


def test_inspect_with_a_tokenizer_says_how_it_spells_the_corpus(tmp_path, tokenizer_dir, capsys):
    songci = str(SAMPLES / "songci_sample.jsonl")  # simplified characters the test tokenizer never saw
    assert main(["data", "inspect", songci, "--tokenizer", str(tokenizer_dir), "--cache-dir", str(tmp_path)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("byte pieces: ") and "become tokens when a fine-tune sets model.extend_vocab" in line
    assert main(["data", "inspect", songci, "--tokenizer", str(tokenizer_dir), "--json",
                 "--cache-dir", str(tmp_path)]) == 0
    found = json.loads(capsys.readouterr().out)["coverage"]
    assert found["byte_fallback_share"] > 0.5 and found["new_token_candidates"] > 100
    english = str(SAMPLES / "shakespeare_sample.txt")
    assert main(["data", "inspect", english, "--tokenizer", str(tokenizer_dir), "--cache-dir", str(tmp_path)]) == 0
    assert "become tokens" not in capsys.readouterr().out  # every character whole: nothing to suggest


def test_bad_file_is_one_line_with_file_and_position(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"text": \n', encoding="utf-8")
    code = main(["data", "inspect", str(bad), "--cache-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: {bad}: line 2: malformed JSON") and err.count("\n") == 1
    code = main(["data", "inspect", str(bad), "--lenient", "--cache-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "skipped 1 bad records" in out and "line 2" in out


def test_prepare_writes_the_cache_then_reuses_it(tmp_path, tokenizer_dir, capsys):
    args = ["data", "prepare", str(SAMPLES / "shakespeare_sample.txt"), "--tokenizer", str(tokenizer_dir),
            "--seq-len", "128", "--val-fraction", "0.1", "--cache-dir", str(tmp_path), "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["train_rows"] > 0 and first["validation_rows"] > 0 and not first["from_cache"]
    assert (tmp_path / first["fingerprint"] / "train.arrow").is_file()
    assert main(args[:-1]) == 0
    out = capsys.readouterr().out
    assert "(from the cache)" in out and first["path"] in out


def test_prepare_needs_a_real_tokenizer(tmp_path, capsys):
    code = main(["data", "prepare", str(SAMPLES / "shakespeare_sample.txt"), "--tokenizer", str(tmp_path / "none"),
                 "--cache-dir", str(tmp_path)])
    assert code == 2 and "cannot load a tokenizer" in capsys.readouterr().err

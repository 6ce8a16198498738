"""Byte-level BPE: lossless on any Unicode, special tokens, chat template, training from files."""

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from minimind.tokenizer import IM_END, IM_START, SPECIAL_TOKENS, build_tokenizer, measure, train_tokenizer
from helpers import ROOT, SAMPLE_TEXTS


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_encode_decode_is_lossless_for_any_unicode(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=False) == text


def test_lossless_on_hard_cases(tokenizer):
    for text in ["", " ", "   leading and trailing   ", "\n\n\t\r\n", "中文和English混合🙂👨‍👩‍👧",
                 "ＡＢＣ全角", "a\u0301 combining", "\u200b zero width", "🚀" * 10, "<|im_end|> literal"]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text


def test_special_tokens_have_fixed_ids(tokenizer):
    assert [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert tokenizer.pad_token_id == 0 and tokenizer.bos_token_id == 1 and tokenizer.eos_token_id == 2


def test_chat_template_renders_chatml_and_marks_assistant_tokens(tokenizer):
    messages = [{"role": "system", "content": "你是诗人"}, {"role": "user", "content": "写诗"},
                {"role": "assistant", "content": "春眠不覺曉"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    assert text == ("<|im_start|>system\n你是诗人<|im_end|>\n<|im_start|>user\n写诗<|im_end|>\n"
                    "<|im_start|>assistant\n春眠不覺曉<|im_end|>\n")
    prompt = tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")
    out = tokenizer.apply_chat_template(messages, return_assistant_tokens_mask=True, return_dict=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    kept = [i for i, m in zip(ids, mask) if m]
    assert tokenizer.decode(kept) == "春眠不覺曉" + IM_END


def test_saved_folder_loads_with_auto_tokenizer(tokenizer_dir, tokenizer):
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
    assert IM_START in config["chat_template"]
    loaded = AutoTokenizer.from_pretrained(tokenizer_dir)
    assert loaded("床前明月光")["input_ids"] == tokenizer("床前明月光")["input_ids"]


def test_train_from_jsonl_and_txt_files(tmp_path):
    jsonl = tmp_path / "poems.jsonl"
    jsonl.write_text("\n".join(json.dumps({"title": "t", "author": "a", "text": t}, ensure_ascii=False)
                               for t in SAMPLE_TEXTS[:8] * 5), encoding="utf-8")
    txt = tmp_path / "plays.txt"
    txt.write_text("\n".join(SAMPLE_TEXTS[3:6] * 10), encoding="utf-8")
    tok, report = train_tokenizer([jsonl, txt], vocab_size=400, out_dir=tmp_path / "tok", min_frequency=1)
    assert len(tok) == 400 and report.tokens > 0 and report.chars_per_token > 1.0
    assert report.byte_fallback_share > 0  # a 400-entry BPE leaves Chinese characters in byte pieces
    whole, report = train_tokenizer([jsonl, txt], vocab_size=400, min_frequency=1, min_char_count=3)
    assert len(whole) > 400 and report.byte_fallback_share == 0.0  # each character here is seen 3+ times
    assert (tmp_path / "tok" / "tokenizer.json").is_file()


def test_cli_trains_and_encodes(tmp_path, capsys):
    """Training as a process (as a user runs it); encoding and the help in this process (`main`, the
    same code without another interpreter's start-up)."""
    from minimind.cli import main

    txt = tmp_path / "corpus.txt"
    txt.write_text("\n".join(SAMPLE_TEXTS), encoding="utf-8")
    trained = subprocess.run([sys.executable, "-m", "minimind", "tokenizer", "train", str(txt), "--vocab-size", "300",
                              "--min-frequency", "1", "--out", str(tmp_path / "tok")], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert trained.returncode == 0, trained.stderr
    assert "chars/token" in trained.stdout
    assert main(["tokenizer", "encode", "--tokenizer", str(tmp_path / "tok"), "To be"]) in (0, None)
    assert "tokens" in capsys.readouterr().out
    with pytest.raises(SystemExit) as helped:
        main(["--help"])
    assert helped.value.code == 0 and "tokenizer" in capsys.readouterr().out


def test_characters_seen_three_times_are_kept_whole_past_the_bpe_budget():
    """A 300-entry BPE cannot give each of these Chinese characters a token; the tokenizer adds
    one for every character seen at least 3 times, and the report counts the characters that
    still go through byte pieces (here only the one seen once)."""
    poems = SAMPLE_TEXTS[:3] * 3
    seen = {ch for text in poems for ch in text}
    tok = build_tokenizer(poems, vocab_size=300, min_frequency=1, min_char_count=3)
    bare = build_tokenizer(poems, vocab_size=300, min_frequency=1)
    assert len(bare) == 300 and len(tok) > 300
    split_by_bpe = [ch for ch in seen if len(bare(ch, add_special_tokens=False)["input_ids"]) > 1]
    assert split_by_bpe, "the test needs characters the bare BPE leaves in pieces"
    for text in poems:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert len(ids) <= len(text) and tok.decode(ids) == text
    assert all(len(tok(ch, add_special_tokens=False)["input_ids"]) == 1 for ch in seen)
    rare = "龘"  # never seen: its three bytes stay byte pieces
    chars, tokens, fallback = measure(tok, [poems[0] + rare])
    assert fallback == 1 and chars == len(poems[0]) + 1
    assert tok.decode(tok(rare, add_special_tokens=False)["input_ids"]) == rare

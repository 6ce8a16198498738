"""The shipped checkpoints: small enough, loadable with AutoModelForCausalLM, as good on their
held-out sample as their model card says, and producing well-formed text."""

import re
from pathlib import Path

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM

import minimind  # noqa: F401  (registers the model type)
from minimind.checkpoint import load_tokenizer_for
from minimind.data import DataConfig, iter_texts
from minimind.evaluate import evaluate_documents
from minimind.generation import SamplingParams, chat, complete
from helpers import ROOT

SHIPPED = {"minimind-tang": "heldout_sample.jsonl", "minimind-shakespeare": "heldout_sample.txt"}


def _folder(name: str) -> Path:
    folder = ROOT / "checkpoints" / name
    if not (folder / "model.safetensors").is_file():
        pytest.skip(f"{folder} is not trained yet (scripts/train_*.sh)")
    return folder


def _card_metric(folder: Path, prefix: str) -> float:
    front = (folder / "README.md").read_text(encoding="utf-8").split("---")[1]
    metrics = yaml.safe_load(front)["model-index"][0]["results"][0]["metrics"]
    return next(m["value"] for m in metrics if m["name"].startswith(prefix))


@pytest.mark.parametrize("name", list(SHIPPED))
def test_checkpoint_is_small_and_loads_with_auto_classes(name):
    folder = _folder(name)
    size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    assert size <= 30 * 2**20
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert type(model).__name__ == "MiniMindForCausalLM"
    assert (folder / "tokenizer.json").is_file() and (folder / "LICENSE.chinese-poetry").is_file() == (name == "minimind-tang")


@pytest.mark.parametrize("name", list(SHIPPED))
def test_heldout_bpc_matches_the_model_card(name):
    folder = _folder(name)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = load_tokenizer_for(folder)
    sample = folder / SHIPPED[name]
    docs = list(iter_texts([str(sample)], text_field="text" if sample.suffix == ".jsonl" else None,
                           config=DataConfig(split="paragraph")))
    measured = evaluate_documents(model, tokenizer, docs, context=256).bpc
    stated = _card_metric(folder, "held-out sample BPC")
    assert abs(measured - stated) <= 0.02 * stated, (measured, stated)
    assert _card_metric(folder, "held-out BPC") > 0


def test_tang_answers_with_a_well_formed_poem():
    folder = _folder("minimind-tang")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = load_tokenizer_for(folder)
    answer = chat(model, tokenizer, [{"role": "user", "content": "以《春夜》为题写一首五言绝句"}],
                  SamplingParams(temperature=0.8, top_p=0.9, top_k=40, max_new_tokens=96, seed=0)).read()
    han = re.findall(r"[\u4e00-\u9fff]", answer)
    assert len(han) >= 10 and len(han) >= 0.6 * len(answer.replace("\n", "").replace("，", "").replace("。", ""))
    assert "\ufffd" not in answer and "<|" not in answer


def test_shakespeare_continues_in_english_verse():
    folder = _folder("minimind-shakespeare")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = load_tokenizer_for(folder)
    text = complete(model, tokenizer, "ROMEO:", SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=60,
                                                                  seed=0)).read()
    words = re.findall(r"[A-Za-z']+", text)
    assert len(words) >= 3 and "\ufffd" not in text and "<|" not in text  # it may end the speech early
    assert sum(c.isascii() for c in text) >= 0.95 * len(text)

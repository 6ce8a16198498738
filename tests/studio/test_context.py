"""A model's declared context is one it holds.

Both shipped models were pretrained on 256-token rows but used to declare 1024, where their
held-out BPC was 25 % (Tang) and 9 % (Shakespeare) worse. Now a model declares the context it
was trained for, and this checks it: held-out BPC in windows of the full declared context is
at most 2 % above BPC in windows of the training row length; the card says the same context.
"""

import re
from pathlib import Path

import pytest
import yaml

from minimind.checkpoint import load_model, load_tokenizer_for
from minimind.evaluate import evaluate_documents
from minimind.training import TrainConfig, train
from scripts.finalize import sample_documents
from helpers import ROOT

SHIPPED = {"minimind-tang": "heldout_sample.jsonl", "minimind-shakespeare": "heldout_sample.txt"}

pytestmark = pytest.mark.usefixtures("one_thread")


def _card(folder: Path) -> str:
    return (folder / "README.md").read_text(encoding="utf-8")


def _training_rows(card: str) -> int:
    """Tokens per pretraining row, as the card's training section states them."""
    found = re.search(r"\*\*pretraining\*\*: [\d,]+ steps of \d+ × (\d+) tokens", card)
    assert found, "the card does not state its pretraining rows"
    return int(found.group(1))


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_a_shipped_model_holds_its_declared_context(name):
    folder = ROOT / "checkpoints" / name
    model, tokenizer = load_model(folder), load_tokenizer_for(folder)
    declared = model.config.max_position_embeddings
    card = _card(folder)
    trained = _training_rows(card)
    assert f"**Context: {declared} tokens**" in card
    model_row = next(line for line in card.splitlines() if line.startswith("| `") and "MB |" in line)
    assert f"| {declared} |" in model_row, "the card's model table states another context"
    documents = sample_documents(folder / SHIPPED[name])
    at_training = evaluate_documents(model, tokenizer, documents, context=trained).bpc
    at_declared = evaluate_documents(model, tokenizer, documents, context=declared).bpc
    assert at_declared <= 1.02 * at_training, (declared, at_declared, trained, at_training)
    stated = re.search(rf"windows of {trained} tokens: ([\d.]+)", card)
    assert stated and float(stated.group(1)) == pytest.approx(at_training, rel=0.02)


def test_a_new_model_declares_the_length_it_is_trained_on(tmp_path):
    """The trainer writes the row length as the context of a model it pretrains from scratch."""
    config = TrainConfig.from_dict({
        "mode": "pretrain", "max_steps": 2, "run_dir": str(tmp_path / "run"), "eval_batches": 1,
        "model": {"tokenizer": str(ROOT / "checkpoints" / "minimind-tang")},
        "data": {"files": [str(ROOT / "samples" / "tang_poems_sample.jsonl")], "text_field": "text",
                 "seq_len": 64, "cache_dir": str(tmp_path / "cache")}})
    status = train(config)
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["model"]["preset"] == "pico"  # 2 steps buy too few tokens for anything larger
    model = load_model(status["final_checkpoint"])
    assert model.config.max_position_embeddings == 64

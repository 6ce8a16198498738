"""Perplexity and bits per character: windowing scores every token exactly once."""

import math

import torch
import torch.nn.functional as F

from minimind import MiniMindForCausalLM
from minimind.evaluate import evaluate_documents, evaluate_text, score_ids
from helpers import tiny_config


def test_windowed_score_equals_one_full_pass():
    torch.manual_seed(0)
    model = MiniMindForCausalLM(tiny_config(max_position_embeddings=512)).eval()
    ids = torch.randint(5, 512, (1, 50)).tolist()[0]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1]
    full = F.cross_entropy(logits, torch.tensor(ids[1:]), reduction="sum").item()
    total, count = score_ids(model, ids, context=50)
    assert count == 49 and math.isclose(total, full, rel_tol=1e-5)
    # windows of 11 tokens with a one-token overlap still predict each token once
    _, count_small = score_ids(model, ids, context=11)
    assert count_small == 49


def test_bpc_relates_loss_tokens_and_characters(tokenizer):
    torch.manual_seed(0)
    model = MiniMindForCausalLM(tiny_config()).eval()
    text = "床前明月光，疑是地上霜。" * 3
    r = evaluate_text(model, tokenizer, text, context=16)
    assert r.characters == len(text)
    assert math.isclose(r.bpc, r.loss * r.tokens / math.log(2) / r.characters, rel_tol=1e-6)
    assert math.isclose(r.perplexity, math.exp(r.loss), rel_tol=1e-6)
    # a random model is near-uniform: loss close to ln(vocab)
    assert abs(r.loss - math.log(512)) < 1.0
    docs = evaluate_documents(model, tokenizer, ["床前明月光", "To be"], context=16)
    assert docs.characters == len("床前明月光") + len("To be")

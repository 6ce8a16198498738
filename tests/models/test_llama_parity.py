"""A dense MiniMind checkpoint is a Llama checkpoint once config.json is rewritten."""

import json

import pytest
import torch
from transformers import LlamaForCausalLM

from minimind import MiniMindForCausalLM
from helpers import tiny_config


@pytest.mark.parametrize("overrides", [
    {},
    {"tie_word_embeddings": False},
    {"num_key_value_heads": 4},
    {"rope_scaling_type": "linear", "rope_scaling_factor": 4.0},
    {"rope_scaling_type": "ntk", "rope_scaling_factor": 4.0, "rope_theta": 50000.0},
])
def test_llama_logits_match_after_config_rewrite(tmp_path, overrides):
    torch.manual_seed(0)
    ours = MiniMindForCausalLM(tiny_config(**overrides)).eval()
    # make the norms non-trivial so their placement is tested too
    with torch.no_grad():
        for name, p in ours.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    ours.save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(ours.config.to_llama_dict()))
    llama = LlamaForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    ids = torch.randint(0, 512, (2, 64), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    mask[1, :9] = 0
    with torch.no_grad():
        a = ours(ids).logits
        b = llama(ids).logits
        am = ours(ids, attention_mask=mask).logits[:, 9:]
        bm = llama(ids, attention_mask=mask).logits[:, 9:]
    assert (a - b).abs().max().item() < 1e-4
    assert (am - bm).abs().max().item() < 1e-4


def test_moe_refuses_llama_config():
    with pytest.raises(ValueError, match="no Llama equivalent"):
        tiny_config(use_moe=True).to_llama_dict()

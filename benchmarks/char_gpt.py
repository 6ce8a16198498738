"""The reference for benchmarks/quality.py: a character-level GPT with nanoGPT's CPU recipe.

Written here from the settings nanoGPT's README gives for training on a CPU (4 layers, 4
heads, width 128, block 64, batch 12, learning rate 1e-3, no dropout; AdamW with beta2
0.99 and weight decay 0.1, gradient clipping at 1, 100 warm-up steps, cosine decay to
1e-4), with one change a wall-clock budget forces: the cosine runs over the budget's
seconds instead of a fixed step count. Learned positions, pre-LayerNorm blocks without
biases, a GELU MLP, tied input and output embeddings.

Characters are its tokens: every character of the training text gets an id, one more id
stands for characters it never saw, and id 0 separates documents (as the end-of-text token
does for our models), so `minimind.evaluate.evaluate_documents` scores it exactly as it
scores ours: the same documents, each after a separator, NLL over every character and
document end, divided by the documents' characters.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

LAYERS, HEADS, WIDTH, BLOCK, BATCH = 4, 4, 128, 64, 12
LR, MIN_LR, WARMUP, WEIGHT_DECAY, BETAS, CLIP = 1e-3, 1e-4, 100, 0.1, (0.9, 0.99), 1.0


class CharTokenizer:
    """Characters to ids: 0 separates documents, 1 is any character the training text lacks."""

    eos_token_id = 0

    def __init__(self, texts: list[str]):
        self.ids = {ch: i + 2 for i, ch in enumerate(sorted({ch for text in texts for ch in text}))}

    def __len__(self) -> int:
        return len(self.ids) + 2

    def __call__(self, texts: list[str], add_special_tokens: bool = False) -> dict:
        return {"input_ids": [[self.ids.get(ch, 1) for ch in text] for text in texts]}


@dataclass
class _Config:
    max_position_embeddings: int = BLOCK   # what evaluate_documents reads for its default window


@dataclass
class _Output:
    logits: torch.Tensor


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH, bias=False), nn.LayerNorm(WIDTH, bias=False)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH, bias=False), nn.Linear(WIDTH, WIDTH, bias=False)
        self.up, self.down = nn.Linear(WIDTH, 4 * WIDTH, bias=False), nn.Linear(4 * WIDTH, WIDTH, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class CharGPT(nn.Module):
    def __init__(self, vocab_size: int):
        super().__init__()
        self.config = _Config()
        self.embed = nn.Embedding(vocab_size, WIDTH)
        self.position = nn.Embedding(BLOCK, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(WIDTH, bias=False)
        self.apply(self._init)
        for block in self.blocks:  # nanoGPT's scaled init of the residual projections
            for proj in (block.proj, block.down):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * LAYERS))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def forward(self, input_ids: torch.Tensor) -> _Output:
        t = input_ids.shape[1]
        x = self.embed(input_ids) + self.position(torch.arange(t, device=input_ids.device))
        for block in self.blocks:
            x = block(x)
        return _Output(self.ln(x) @ self.embed.weight.t())


def train_char_gpt(texts: list[str], budget_s: float, seed: int = 0) -> tuple[CharGPT, CharTokenizer, dict]:
    """Train on `texts` (each document after a separator) for `budget_s` seconds of wall clock."""
    torch.manual_seed(seed)
    tokenizer = CharTokenizer(texts)
    stream: list[int] = []
    for ids in tokenizer(texts)["input_ids"]:
        stream.append(tokenizer.eos_token_id)
        stream.extend(ids)
    data = torch.tensor(stream)
    model = CharGPT(len(tokenizer))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                   {"params": rest, "weight_decay": 0.0}], lr=LR, betas=BETAS)
    generator = torch.Generator().manual_seed(seed)
    start, step = time.perf_counter(), 0
    while (elapsed := time.perf_counter() - start) < budget_s:
        fraction = elapsed / budget_s
        lr = LR * (step + 1) / WARMUP if step < WARMUP else MIN_LR + 0.5 * (LR - MIN_LR) * (
            1 + math.cos(math.pi * fraction))
        for group in optimizer.param_groups:
            group["lr"] = lr
        offsets = torch.randint(0, len(data) - BLOCK - 1, (BATCH,), generator=generator)
        batch = torch.stack([data[o:o + BLOCK + 1] for o in offsets])
        logits = model(batch[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        step += 1
    seconds = time.perf_counter() - start
    return model.eval(), tokenizer, {"steps": step, "tokens seen": step * BATCH * BLOCK, "train s": seconds,
                                     "parameters": sum(p.numel() for p in model.parameters()),
                                     "vocabulary": len(tokenizer)}

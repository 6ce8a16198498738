"""Next-token cross-entropy on the labelled tokens: pretraining (every token of plain text)
and supervised fine-tuning (the assistant's tokens of a conversation: the data masks
the rest), full or under LoRA/QLoRA."""

from __future__ import annotations

import math

import torch

from ...evaluate import labelled_nll


class LanguageModel:
    name = "language_model"

    def __init__(self, precision, bpc_factor: float | None):
        self.precision = precision
        self.bpc_factor = bpc_factor  # validation tokens per character: loss x this / ln 2 = BPC

    def loss(self, model, batch: dict) -> tuple[torch.Tensor, dict]:
        """Mean next-token loss of one micro-batch (an MoE model adds its balancing loss)."""
        return model(**batch).loss, {}

    def evaluate(self, model, batches) -> dict:
        device = next(model.parameters()).device
        nll, count = labelled_nll(model, batches, self.precision.autocast, device)
        return nll_figures(nll / max(count, 1), self.bpc_factor)


def nll_figures(loss: float, bpc_factor: float | None) -> dict:
    """loss, perplexity and (when characters are known) bits per character of a mean NLL."""
    figures = {"loss": loss, "ppl": math.exp(min(loss, 50))}
    if bpc_factor:
        figures["bpc"] = loss * bpc_factor / math.log(2)
    return figures

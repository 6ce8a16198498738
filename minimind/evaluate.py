"""Held-out quality: loss, perplexity and bits per character of a model on a text.

BPC = total next-token negative log-likelihood of the text in bits ÷ its number
of characters. It is comparable across tokenizers (a character-level model and
a BPE model can be ranked on it), which loss and perplexity per token are not.
The text is scored in windows of the model's context that overlap by one token,
so every token is predicted exactly once; an end-of-text token in front lets the
first character be scored too.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch


@dataclass
class EvalResult:
    loss: float          # mean NLL per token, nats
    perplexity: float    # exp(loss)
    bpc: float           # bits per character
    tokens: int          # tokens scored
    characters: int      # characters of the text

    def as_dict(self) -> dict:
        return asdict(self)


def from_totals(nll_nats: float, tokens: int, characters: int) -> EvalResult:
    """Build an EvalResult from summed NLL (nats) over `tokens` predictions of `characters` chars."""
    loss = nll_nats / max(tokens, 1)
    return EvalResult(loss=loss, perplexity=math.exp(min(loss, 50.0)),
                      bpc=nll_nats / math.log(2) / max(characters, 1), tokens=tokens, characters=characters)


@torch.no_grad()
def score_ids(model, ids: list[int], context: int, batch_size: int = 8) -> tuple[float, int]:
    """(summed NLL in nats, number of predicted tokens) of `ids[1:]` given what precedes, in windows."""
    device = next(model.parameters()).device
    step = context - 1
    windows = [ids[i:i + context] for i in range(0, max(len(ids) - 1, 1), step)]
    windows = [w for w in windows if len(w) > 1]
    total, count = 0.0, 0
    for i in range(0, len(windows), batch_size):
        chunk = windows[i:i + batch_size]
        width = max(len(w) for w in chunk)
        input_ids = torch.zeros(len(chunk), width, dtype=torch.long)
        labels = torch.full((len(chunk), width), -100, dtype=torch.long)
        for row, w in enumerate(chunk):
            input_ids[row, :len(w)] = torch.tensor(w)
            labels[row, :len(w)] = torch.tensor(w)
        logits = model(input_ids=input_ids.to(device)).logits[:, :-1].float()
        target = labels[:, 1:].to(device)
        nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                                ignore_index=-100, reduction="sum")
        total += nll.item()
        count += int((target != -100).sum())
    return total, count


def evaluate_text(model, tokenizer, text: str, context: int | None = None, batch_size: int = 8) -> EvalResult:
    """Loss / perplexity / BPC of `model` on one text."""
    return evaluate_documents(model, tokenizer, [text], context, batch_size)


def evaluate_documents(model, tokenizer, documents: list[str], context: int | None = None,
                       batch_size: int = 8) -> EvalResult:
    """Score documents as one stream, each preceded by the EOS token (as they are trained).

    Characters are those of the documents; predicting each document's end is part
    of the NLL, as it is part of what the model has to learn.
    """
    context = context or min(getattr(model.config, "max_position_embeddings", 512), 512)
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    for doc_ids in tokenizer(documents, add_special_tokens=False)["input_ids"]:
        ids.append(eos)
        ids.extend(doc_ids)
    was_training = model.training
    model.eval()
    try:
        nll, count = score_ids(model, ids, context, batch_size)
    finally:
        model.train(was_training)
    return from_totals(nll, count, sum(len(d) for d in documents))


def token_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of each next token that has a label (position t predicts labels[t+1]).

    Returns (log-probs, mask), both of shape [batch, length - 1]; unlabelled positions
    (label -100) hold 0 and mask False. Computed in float32 whatever the logits' dtype."""
    logits, targets = logits[:, :-1].float(), labels[:, 1:]
    mask = targets != -100
    picked = torch.gather(logits.log_softmax(-1), 2, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return picked * mask, mask


@torch.no_grad()
def labelled_nll(model, batches, autocast, device) -> tuple[float, int]:
    """(summed NLL in nats, labelled tokens) of `model` over prepared batches (input_ids, labels,
    attention_mask): the held-out figure of a training run's validation split."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for batch in batches:
            batch = {k: v.to(device) for k, v in batch.items()}
            with autocast():
                logits = model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask")).logits
            logps, mask = token_logprobs(logits, batch["labels"])
            total -= logps.sum().item()
            count += int(mask.sum())
    finally:
        model.train(was_training)
    return total, count

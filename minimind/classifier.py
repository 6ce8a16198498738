"""MiniMindForSequenceClassification: the MiniMind decoder with a linear `score` head that reads
the hidden state of each row's last real token (as transformers' LlamaForSequenceClassification
does), and `predict`, which gives label probabilities for texts.

    model = MiniMindForSequenceClassification.from_pretrained(
        "checkpoints/minimind-tang", id2label={0: "李白", 1: "杜甫"}, label2id={"李白": 0, "杜甫": 1})
    # the decoder's weights load; the head is new (normal, std config.initializer_range)
    predict(model, tokenizer, ["床前明月光"])  # -> [{"李白": 0.7, "杜甫": 0.3}]

A causal model is causal: the last token is the only one that has read the whole text, so it is
the one pooled by default (`classifier_pooling: last`); `mean` pools the mean of every real
token's hidden state instead, each having read the text up to itself. Rows may be padded on
either side; `attention_mask` says where the real tokens are (without one, every token is real). The labels live in the config (`id2label`, `label2id`,
`num_labels`, standard PretrainedConfig fields), so a saved classifier folder names its classes
and `AutoModelForSequenceClassification` opens it once `import minimind` has run.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutputWithPast

from .config import CLASSIFIER_POOLINGS, MiniMindConfig
from .data.tokens import classify_ids
from .errors import CheckpointError, ConfigError
from .model import MiniMindModel, MiniMindPreTrainedModel

CLASSIFIER_ARCHITECTURE = "MiniMindForSequenceClassification"  # in a classifier folder's config.json
ADAPTER_LABELS = "labels.json"  # beside a classifier's LoRA adapter: {"classes": [...]} (peft's adapter_config
                                # has no place for them); the base + this + the adapter make the classifier


class MiniMindForSequenceClassification(MiniMindPreTrainedModel):
    """Decoder + `score` (hidden_size -> num_labels, no bias) on the pooled hidden states (`pooled`).

    `labels` (B,) class ids give the mean cross-entropy, weighted per class by `class_weights`
    when given (a tensor of num_labels weights, e.g. balanced: n / (k * count))."""

    def __init__(self, config: MiniMindConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = MiniMindModel(config)
        self.score = nn.Linear(config.hidden_size, config.num_labels, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, inputs_embeds=None, labels=None,
                class_weights: torch.Tensor | None = None, **kwargs) -> SequenceClassifierOutputWithPast:
        hidden, _, aux = self.model(input_ids, attention_mask, position_ids, None, inputs_embeds, False)
        logits = self.score(pooled(hidden, attention_mask, self.config.classifier_pooling))
        loss = None
        if labels is not None:
            loss = classification_loss(logits, labels, class_weights)
            if aux is not None and self.config.router_aux_loss_coef:
                loss = loss + self.config.router_aux_loss_coef * aux / self.config.num_hidden_layers
        return SequenceClassifierOutputWithPast(loss=loss, logits=logits)


def pooled(hidden: torch.Tensor, attention_mask: torch.Tensor | None, how: str) -> torch.Tensor:
    """(batch, hidden) of (batch, time, hidden): each row's last real token (`last`) or the mean of
    its real tokens (`mean`, taken in float32)."""
    if how == "mean":
        if attention_mask is None:
            return hidden.float().mean(1).to(hidden.dtype)
        mask = attention_mask[:, -hidden.shape[1]:].to(hidden.device, torch.float32).unsqueeze(-1)
        return ((hidden.float() * mask).sum(1) / mask.sum(1).clamp(min=1.0)).to(hidden.dtype)
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    return hidden[rows, last_token_index(attention_mask, hidden)]


def last_token_index(attention_mask: torch.Tensor | None, hidden: torch.Tensor) -> torch.Tensor:
    """Index of each row's last real token: the last position whose mask is 1, so right padding
    (…, x, pad, pad) and left padding (pad, pad, …, x) both find x. No mask: the last position."""
    b, t = hidden.shape[:2]
    if attention_mask is None:
        return torch.full((b,), t - 1, dtype=torch.long, device=hidden.device)
    mask = attention_mask[:, -t:].to(hidden.device).long()
    positions = torch.arange(t, device=hidden.device).expand(b, t)
    return (positions * mask).argmax(-1)  # argmax of position x mask: the highest masked-in position


def classification_loss(logits: torch.Tensor, labels: torch.Tensor,
                        class_weights: torch.Tensor | None = None, smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy of the class logits (float32), optionally weighted per class, against
    targets that give `smoothing` of their mass evenly to every class."""
    weight = class_weights.to(logits.device, torch.float32) if class_weights is not None else None
    return F.cross_entropy(logits.float(), labels.to(logits.device).long(), weight=weight, label_smoothing=smoothing)


def label_maps(classes: list[str]) -> dict:
    """`id2label`, `label2id` and `num_labels` of a classifier of these classes (in id order)."""
    return {"id2label": dict(enumerate(classes)), "label2id": {c: i for i, c in enumerate(classes)},
            "num_labels": len(classes)}


def write_adapter_labels(folder, classes: list[str], pooling: str = "last") -> None:
    """Record a classifier adapter's classes and what its head reads beside it (see ADAPTER_LABELS)."""
    import json
    from pathlib import Path

    (Path(folder) / ADAPTER_LABELS).write_text(
        json.dumps({"classes": list(classes), "pooling": pooling}, ensure_ascii=False), encoding="utf-8")


def read_adapter_labels(folder) -> tuple[list[str], str]:
    """The classes and pooling recorded beside a classifier adapter (adapters from before pooling
    was recorded read as "last"); a CheckpointError that names the file when it is missing or wrong."""
    import json
    from pathlib import Path

    try:
        saved = json.loads((Path(folder) / ADAPTER_LABELS).read_text(encoding="utf-8"))
        classes, pooling = [str(c) for c in saved["classes"]], saved.get("pooling", "last")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise CheckpointError(f"{folder}: a classifier adapter needs {ADAPTER_LABELS} naming its classes "
                              f"({err})") from None
    if pooling not in CLASSIFIER_POOLINGS:
        raise CheckpointError(f"{folder}: {ADAPTER_LABELS} names pooling {pooling!r}; one of "
                              f"{', '.join(CLASSIFIER_POOLINGS)} was expected")
    return classes, pooling


def classes_of(model) -> list[str]:
    """The class names of a classifier (under peft wrapping too), in id order."""
    config = model.config
    return [config.id2label[i] for i in range(config.num_labels)]


def classifier_from(model, classes: list[str], seed: int = 0, pooling: str | None = None
                    ) -> MiniMindForSequenceClassification:
    """A classifier of `classes` built on a loaded model's decoder: a causal MiniMind (its lm_head is
    dropped) gets a new head (normal, std initializer_range, drawn from `seed`) that reads `pooling`
    (default: the model config's). A classifier with exactly these classes is returned itself, its
    config set to read `pooling`; one with other classes keeps its decoder and gets a new head. Either
    way the result shares the given model's decoder (no copy)."""
    pooling = pooling or getattr(model.config, "classifier_pooling", "last")
    if isinstance(model, MiniMindForSequenceClassification) and classes_of(model) == list(classes):
        model.config.classifier_pooling = pooling
        return model
    if not isinstance(getattr(model, "model", None), MiniMindModel):
        raise ConfigError(f"a classifier is built on a transformer MiniMind decoder; this model is "
                          f"{type(model).__name__} (an LSTM model cannot classify yet)")
    config = MiniMindConfig.from_dict({**model.config.to_dict(), **label_maps(classes),
                                       "architectures": [CLASSIFIER_ARCHITECTURE], "classifier_pooling": pooling})
    torch.manual_seed(seed)
    with torch.device("meta"):
        classifier = MiniMindForSequenceClassification(config)
    classifier.model = model.model  # the decoder itself, not a copy
    classifier.score = nn.Linear(config.hidden_size, len(classes), bias=False,
                                 device=model.model.embed_tokens.weight.device, dtype=model.model.embed_tokens.weight.dtype)
    nn.init.normal_(classifier.score.weight, std=config.initializer_range)
    return classifier.train(model.training)


def is_classifier_model(model) -> bool:
    """Whether a loaded model (or a runner of an export) is a sequence classifier."""
    return type(model).__name__ == CLASSIFIER_ARCHITECTURE or (
        CLASSIFIER_ARCHITECTURE in (getattr(model.config, "architectures", None) or []))


@torch.no_grad()
def class_logits(model, rows: list[list[int]], pad_id: int, batch_size: int = 32) -> torch.Tensor:
    """(len(rows), num_labels) float32 logits on the CPU of token-id rows, right-padded in batches."""
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start:start + batch_size]
        width = max(len(row) for row in chunk)
        input_ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, row in enumerate(chunk):
            input_ids[i, :len(row)], mask[i, :len(row)] = torch.as_tensor(row), 1
        out.append(model(input_ids=input_ids.to(device), attention_mask=mask.to(device)).logits.float().cpu())
    return torch.cat(out)


def predict(model, tokenizer, texts: list[str], max_tokens: int | None = None,
            batch_size: int = 32) -> list[dict[str, float]]:
    """{label: probability} for each text, classes in id order: the text encoded exactly as the
    trainer encoded its rows (minimind.data.classify_ids: cut to `max_tokens` - 1 tokens + EOS;
    default the model's max_position_embeddings), batched and right-padded."""
    if isinstance(texts, str):
        texts = [texts]
    limit = max_tokens or model.config.max_position_embeddings
    classes = classes_of(model)
    was_training = model.training
    model.eval()
    try:
        logits = class_logits(model, classify_ids(tokenizer, list(texts), limit), tokenizer.pad_token_id, batch_size)
    finally:
        model.train(was_training)
    return [dict(zip(classes, row)) for row in logits.softmax(-1).tolist()]

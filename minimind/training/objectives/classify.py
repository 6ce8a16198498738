"""Sequence classification: cross-entropy of a classifier's class logits (minimind.classifier) on
a labelled corpus, full or under LoRA/QLoRA (the `score` head always trains).

Each evaluation reports loss, accuracy and macro-F1 over the validation rows; `report` makes
the same pass over every validation row and adds the confusion matrix (rows: the true class,
columns: the predicted one, classes in id order), which the loop saves as `confusion.json` at
the end of a run. Macro-F1 is written here, not taken from scikit-learn: the mean over classes
of 2·TP / (2·TP + FP + FN), a class with neither examples nor predictions left out of the mean
(scikit-learn's `f1_score(average="macro", zero_division=0)`).
"""

from __future__ import annotations

import numpy as np
import torch

from ...classifier import classification_loss
from ...errors import ConfigError


def macro_f1(matrix) -> float:
    """Macro-averaged F1 of a confusion matrix (rows true, columns predicted). A class with no
    examples and no predictions is not counted; one with either but no true positive scores 0."""
    m = np.asarray(matrix, dtype=np.float64)
    tp = np.diag(m)
    support, predicted = m.sum(1), m.sum(0)
    present = (support + predicted) > 0
    if not present.any():
        return 0.0
    f1 = 2 * tp[present] / (support[present] + predicted[present])  # = 2TP / (2TP + FP + FN)
    return float(f1.mean())


def accuracy(matrix) -> float:
    m = np.asarray(matrix, dtype=np.float64)
    return float(np.trace(m) / m.sum()) if m.sum() else 0.0


def confusion(true: torch.Tensor, predicted: torch.Tensor, classes: int) -> np.ndarray:
    """classes x classes counts: [t, p] is how many rows of class t were predicted p."""
    pairs = true.long().cpu() * classes + predicted.long().cpu()
    return torch.bincount(pairs, minlength=classes * classes).reshape(classes, classes).numpy()


def class_weights(setting, classes: list[str], train_labels) -> torch.Tensor | None:
    """Per-class weights of the loss: None (""), "balanced" (n / (k * count) over the training
    split, so every class weighs as much in all) or {label: weight} (an unnamed class weighs 1)."""
    if not setting:
        return None
    if setting == "balanced":
        counts = np.bincount(np.asarray(train_labels, dtype=np.int64), minlength=len(classes)).astype(np.float64)
        return torch.tensor(counts.sum() / (len(classes) * np.maximum(counts, 1)), dtype=torch.float32)
    unknown = sorted(set(map(str, setting)) - set(classes))
    if unknown:
        raise ConfigError(f"classify.class_weights names {', '.join(map(repr, unknown[:5]))}, not classes of this "
                          f"corpus ({', '.join(classes[:20])})")
    named = {str(k): float(v) for k, v in setting.items()}
    return torch.tensor([named.get(c, 1.0) for c in classes], dtype=torch.float32)


class Classify:
    name = "classify"

    def __init__(self, classes: list[str], precision, weights: torch.Tensor | None = None, smoothing: float = 0.0):
        self.classes = list(classes)
        self.precision = precision
        self.weights = weights  # per-class loss weights (training loss only; val_loss is unweighted)
        self.smoothing = smoothing  # label smoothing (training loss only)

    @classmethod
    def for_corpus(cls, cfg, corpus, precision, log):
        weights = class_weights(cfg.classify.class_weights, corpus.classes, list(corpus.train["label"]))
        log(f"objective: classify {len(corpus.classes)} classes ({', '.join(corpus.classes[:10])}"
            f"{', ...' if len(corpus.classes) > 10 else ''}) on the last token"
            + (f"; class weights {', '.join(f'{w:.3g}' for w in weights.tolist()[:10])}" if weights is not None
               else ""))
        return cls(corpus.classes, precision, weights, cfg.classify.label_smoothing)

    def loss(self, model, batch: dict) -> tuple[torch.Tensor, dict]:
        """Mean (weighted) cross-entropy of one micro-batch, and its accuracy."""
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        loss = classification_loss(logits, batch["labels"], self.weights, self.smoothing)
        return loss, {"accuracy": (logits.argmax(-1) == batch["labels"]).float().mean().detach()}

    @torch.no_grad()
    def report(self, model, batches) -> dict:
        """loss, accuracy, macro_f1, rows and the confusion matrix (as lists) over `batches`."""
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        k = len(self.classes)
        matrix, loss_sum, rows = np.zeros((k, k), dtype=np.int64), 0.0, 0
        try:
            for batch in batches:
                batch = {name: value.to(device) for name, value in batch.items()}
                with self.precision.autocast():
                    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
                loss_sum += classification_loss(logits, batch["labels"]).item() * len(batch["labels"])
                rows += len(batch["labels"])
                matrix += confusion(batch["labels"], logits.argmax(-1), k)
        finally:
            model.train(was_training)
        return {"loss": loss_sum / max(rows, 1), "accuracy": accuracy(matrix), "macro_f1": macro_f1(matrix),
                "rows": rows, "labels": list(self.classes), "matrix": matrix.tolist()}

    def evaluate(self, model, batches) -> dict:
        """Held-out loss (unweighted), accuracy and macro-F1."""
        figures = self.report(model, batches)
        return {name: figures[name] for name in ("loss", "accuracy", "macro_f1")}


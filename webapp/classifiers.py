"""Classifier runs on the page and its API: which offered models are classifiers, one loaded copy
of each (a few at a time), label probabilities of texts (minimind.classifier.predict), and a run's
confusion matrix (confusion.json) as a coloured table.

The confusion matrix is a table whose cells are tinted by their share of the row (the true
class), not a picture: Gradio 6 has no heatmap component, a table needs no plotting package, the
class names (often Chinese, e.g. poets) are HTML text in any font the browser has, and the counts
stay readable and copyable."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from pathlib import Path

import pandas as pd

from minimind.checkpoint import is_classifier
from minimind.errors import MiniMindError

MAX_TEXTS = 64            # texts in one request (API) or one try
MAX_TEXT_CHARS = 20_000   # characters of one text (the classifier reads its first tokens only)
KEEP_LOADED = 3           # classifiers kept loaded at once (least recently used dropped first)
CONFUSION_FILE = "confusion.json"


class ClassifyError(MiniMindError):
    """A request the page or the API refuses: its message is shown as is."""


def classifier_choices(ctx) -> list[tuple[str, str]]:
    """(label, id) of every offered model that is a classifier (a finished classifier run, or a
    shipped classifier folder)."""
    return [(label, model_id) for label, model_id, folder in ctx.offered_models() if is_classifier(folder)]


def check_texts(texts) -> list[str]:
    """The texts of a request: a non-empty string or list of at most MAX_TEXTS non-empty strings
    of at most MAX_TEXT_CHARS characters each."""
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts:
        raise ClassifyError(f"texts must be a string or a list of 1 to {MAX_TEXTS} strings")
    if len(texts) > MAX_TEXTS:
        raise ClassifyError(f"at most {MAX_TEXTS} texts per request (got {len(texts):,})")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ClassifyError(f"texts[{i}] is {type(text).__name__}; expected a string")
        if not text.strip():
            raise ClassifyError(f"texts[{i}] is empty; expected text to classify")
        if len(text) > MAX_TEXT_CHARS:
            raise ClassifyError(f"texts[{i}] has {len(text):,} characters; at most {MAX_TEXT_CHARS:,}")
    return texts


class ClassifierCache:
    """Loaded classifiers by folder (merged when an adapter), at most KEEP_LOADED at once; one
    prediction at a time per process (CPU-bound: more at once only share the same cores)."""

    def __init__(self, keep: int = KEEP_LOADED):
        self.keep = keep
        self._loaded: OrderedDict[tuple[str, float], tuple] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, folder: Path):
        from minimind.checkpoint import load_model, load_tokenizer_for

        marker = folder / ("adapter_config.json" if (folder / "adapter_config.json").is_file() else "config.json")
        key = (str(folder.resolve()), marker.stat().st_mtime if marker.is_file() else 0.0)
        if key in self._loaded:
            self._loaded.move_to_end(key)
            return self._loaded[key]
        model = load_model(folder, merge=True).eval()
        pair = (model, load_tokenizer_for(folder))
        self._loaded[key] = pair
        while len(self._loaded) > self.keep:
            self._loaded.popitem(last=False)
        return pair

    def predict(self, folder: Path, texts: list[str]) -> list[dict[str, float]]:
        from minimind.classifier import predict

        with self._lock:
            model, tokenizer = self.get(folder)
            return predict(model, tokenizer, texts)


def classifier_folder(ctx, model_id: str) -> Path:
    """The folder of an offered classifier id (run:<id> or shipped:<name>); refused otherwise."""
    folder = ctx.model_folder(model_id)
    if not is_classifier(folder):
        raise ClassifyError(f"{model_id!r} is not a classifier: train one with task classify on a labelled corpus")
    return folder


def classify(ctx, model_id: str, texts) -> list[dict[str, float]]:
    """{label: probability} for each text, by the classifier `model_id` offers."""
    texts = check_texts(texts)
    return ctx.classifiers.predict(classifier_folder(ctx, model_id), texts)


# ---- the confusion matrix ------------------------------------------------------------------------

def read_confusion(run_path: Path) -> dict | None:
    """A run's confusion.json (labels, matrix rows true / columns predicted, accuracy, macro_f1,
    rows), or None when it has none or it cannot be read."""
    try:
        report = json.loads((Path(run_path) / CONFUSION_FILE).read_text(encoding="utf-8"))
        labels, matrix = report["labels"], report["matrix"]
        if not (isinstance(labels, list) and len(matrix) == len(labels)
                and all(len(row) == len(labels) for row in matrix)):
            return None
        return report
    except (OSError, ValueError, KeyError, TypeError):
        return None


def confusion_frame(report: dict, corner: str = "true \\ predicted") -> pd.DataFrame:
    """The matrix as a table: one row per true class (its name in the first column), one column
    per predicted class, counts in the cells."""
    labels = [str(label) for label in report["labels"]]
    rows = [[label] + [int(n) for n in counts] for label, counts in zip(labels, report["matrix"])]
    return pd.DataFrame(rows, columns=[corner] + _unique(labels, corner))


def _unique(labels: list[str], corner: str) -> list[str]:
    """Column names: the labels, never the corner's name twice (a class named like it gets a mark)."""
    return [f"{label} " if label == corner else label for label in labels]


def confusion_styled(report: dict, corner: str = "true \\ predicted"):
    """confusion_frame with each count tinted by its share of its row: the diagonal (right answers)
    in indigo, the rest (mistakes) in red, deeper for a larger share."""
    frame = confusion_frame(report, corner)
    counts = frame.iloc[:, 1:].to_numpy(dtype=float)
    totals = counts.sum(axis=1, keepdims=True)
    shares = counts / (totals + (totals == 0))

    def tint(_frame):
        styles = pd.DataFrame("", index=frame.index, columns=frame.columns)
        for i in range(len(frame)):
            for j in range(counts.shape[1]):
                share = shares[i, j]
                if share > 0:
                    rgb = "99,102,241" if i == j else "239,68,68"
                    styles.iat[i, j + 1] = f"background-color: rgba({rgb},{0.15 + 0.75 * share:.2f})"
        return styles

    return frame.style.apply(tint, axis=None)

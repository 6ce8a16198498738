"""Labelled corpora (kind `labelled`): which fields hold the text and the class, what a label may
be, the checks a corpus of them must pass as a whole, and the stratified train/validation split.

A labelled record becomes {"text": str, "label": str}: labels are class names, any text; a
whole number (a parquet int column, a JSON 0/1) becomes its decimal text, so "1" and 1 are the
same class. The classes of a corpus are ordered by `class_order` (numbers numerically, other
names alphabetically); a class's id is its place in that order, the same in every run that reads
the same corpus, which is what `id2label` of a trained classifier records.
"""

from __future__ import annotations

import numpy as np

from ..errors import CorpusError
from .validate import describe, snippet

LABELLED_TEXT_FIELDS = ("text", "sentence", "content", "review")  # tried in order when no text field is named
LABEL_FIELDS = ("label", "labels", "class", "category", "target")  # a record with one of these + text is labelled
FORCED_LABEL_FIELDS = LABEL_FIELDS + ("author",)  # with kind labelled also "author" (not detected: the Tang
                                                  # corpus has title/author/text and stays plain text)
MAX_CLASSES = 1000       # more distinct labels than this: almost surely not a label column
IMBALANCE_RATIO = 10.0   # the largest class this many times the smallest: warn


class LabelError(ValueError):
    """One record's label or text cannot be used; the reason says what was found and expected."""


def label_field_of(names, label_field: str | None, forced: bool) -> str | None:
    """The field of a record (or table) that holds its class: the one named, else the first of
    LABEL_FIELDS present (FORCED_LABEL_FIELDS when the kind is forced), else None."""
    names = set(names)
    if label_field:
        return label_field if label_field in names else None
    return next((f for f in (FORCED_LABEL_FIELDS if forced else LABEL_FIELDS) if f in names), None)


def text_field_of(names, text_field: str | None) -> str | None:
    """The field of a labelled record that holds its text: the one named, else the first of
    LABELLED_TEXT_FIELDS present, else None."""
    names = set(names)
    if text_field:
        return text_field if text_field in names else None
    return next((f for f in LABELLED_TEXT_FIELDS if f in names), None)


def is_labelled(names, text_field: str | None, label_field: str | None) -> bool:
    """Whether records with these fields are labelled text: a text field and a label field. Naming
    `label_field` is enough (a record missing it is then reported as missing its label)."""
    if text_field_of(names, text_field) is None:
        return False
    return bool(label_field) or label_field_of(names, None, False) is not None


def expected(text_field: str | None, label_field: str | None) -> str:
    text = repr(text_field) if text_field else "'text', 'sentence', 'content' or 'review'"
    label = repr(label_field) if label_field else "'label', 'labels', 'class', 'category' or 'target'"
    return f"a text field ({text}) and a label field ({label}; name them with text_field / label_field)"


def labelled_document(record: dict, text_field: str | None, label_field: str | None) -> dict:
    """{"text", "label"} of one record; LabelError naming the missing or empty field otherwise."""
    text_name = text_field_of(record, text_field)
    if text_name is None:
        raise LabelError(f"missing text field: found {describe(record)}; expected {expected(text_field, label_field)}")
    label_name = label_field_of(record, label_field, True)
    if label_name is None:
        raise LabelError(f"missing label: found {describe(record)}; expected "
                         f"{repr(label_field) if label_field else 'a label field (label, class, category, ...)'} "
                         "holding the record's class (name another field with label_field / --label-field)")
    text = record[text_name]
    if not isinstance(text, str):
        raise LabelError(f"field {text_name!r} is {describe(text)}; expected the text to classify")
    if not text.strip():
        raise LabelError(f"empty {text_name!r}; expected the text to classify (remove the record or fill it in)")
    return {"text": text, "label": label_value(record[label_name], label_name)}


def label_value(value: object, field: str) -> str:
    """A label as its class name: text (stripped) or a whole number as decimal text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None or isinstance(value, str) and not value.strip():
        raise LabelError(f"empty label in field {field!r}; expected the record's class (a name or a whole number)")
    if isinstance(value, list):
        raise LabelError(f"field {field!r} is {describe(value)}; expected one class per record (multi-label "
                         "classification is not supported)")
    if not isinstance(value, str):
        raise LabelError(f"field {field!r} is {describe(value)}; expected the record's class (a name or a whole "
                         "number)")
    return value.strip()


def class_order(labels) -> list[str]:
    """The classes in id order: all-numeric names numerically ("2" before "10"), else alphabetically."""
    names = sorted(set(labels))
    if all(_is_int(n) for n in names):
        return sorted(names, key=int)
    return names


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def check_classes(counts: dict[str, int], first_seen: dict[str, tuple[str, str]]) -> None:
    """Refuse a corpus that cannot train a classifier: one class only, or a class seen once (it
    cannot be both trained on and validated). `first_seen[label]` is (file, position)."""
    if len(counts) == 1:
        (label, n), = counts.items()
        file, position = first_seen[label]
        raise CorpusError(f"every record ({n:,}) has the label {snippet(label, 40)}: one class only; expected "
                          "at least two classes to tell apart (is that the label field? name it with "
                          "label_field / --label-field)", file, position)
    once = [label for label, n in counts.items() if n == 1]
    if once:
        file, position = first_seen[once[0]]
        shown = ", ".join(snippet(label, 30) for label in once[:5]) + (f" and {len(once) - 5:,} more"
                                                                       if len(once) > 5 else "")
        hint = (" — most labels are unique: is that the label field? name it with label_field / --label-field"
                if len(once) > len(counts) / 2 else "")
        raise CorpusError(f"the label {snippet(once[0], 40)} appears only once ({len(once):,} such: {shown}); a "
                          "class needs at least two examples, one to train on and one to validate: add examples "
                          f"of it, or remove or relabel that record{hint}", file, position)


def too_many_classes(label: str, file: str, position: str) -> CorpusError:
    """The error for a label column with more than MAX_CLASSES names (a text or id column, most likely)."""
    return CorpusError(f"more than {MAX_CLASSES:,} distinct labels (this one {snippet(label, 40)}); expected a "
                       "field of class names — is that the label field? name it with label_field / --label-field",
                       file, position)


def imbalance_warning(counts: dict[str, int]) -> str | None:
    """A warning naming the class counts when the largest class is IMBALANCE_RATIO x the smallest."""
    if len(counts) < 2 or max(counts.values()) < IMBALANCE_RATIO * min(counts.values()):
        return None
    shown = ", ".join(f"{label} {n:,}" for label, n in sorted(counts.items(), key=lambda kv: -kv[1])[:10])
    return (f"unbalanced classes (largest {max(counts.values()):,}, smallest {min(counts.values()):,}: {shown}"
            f"{', ...' if len(counts) > 10 else ''}); accuracy alone will flatter the model — watch macro-F1, "
            "or set class weights (classify.class_weights: balanced)")


def stratified_split(labels: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) indices, each sorted: every class split on its own by a seeded shuffle,
    `fraction` of it (at least one, and never all) held out, so every class is in both splits and
    the validation set has the corpus's class proportions. Deterministic in (labels, fraction, seed)."""
    if fraction <= 0 or len(labels) < 2:
        return np.arange(len(labels)), np.zeros(0, dtype=np.int64)
    rng = np.random.default_rng(seed)
    train, val = [], []
    for label in sorted(set(labels.tolist())):
        members = np.flatnonzero(labels == label)
        if len(members) < 2:
            train.append(members)
            continue
        n_val = min(len(members) - 1, max(1, round(len(members) * fraction)))
        order = rng.permutation(members)
        val.append(order[:n_val])
        train.append(order[n_val:])
    return (np.sort(np.concatenate(train)).astype(np.int64),
            np.sort(np.concatenate(val)).astype(np.int64) if val else np.zeros(0, dtype=np.int64))

"""The text an export is scored on when none is given: the model's own held-out text.

A perplexity means something only on text like the model's training data, so the
default is looked for in this order:
1. the validation split of the training run the checkpoint belongs to (a checkpoint
   at RUN/checkpoints/step-N, with RUN/config.yaml naming its corpus): the same seeded
   split the trainer held out — its documents, or what the run taught the model to
   write there (a chat's assistant turns, a preference pair's chosen answer); a
   prompts corpus holds no answers and goes on to 2.;
2. the held-out sample a checkpoint ships with (`heldout_sample.jsonl` / `.txt`), of
   the checkpoint itself, else of the model a run or adapter started from;
3. only when nothing is known, `verify.DEFAULT_EVAL_TEXT`, labelled as generic text.

Also here: `model_name`, the name exports are given after their model or run.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

from ..data import DataConfig, iter_texts
from ..data.documents import check_files, iter_documents, read_documents
from ..data.kinds import doc_texts
from ..data.prepare import document_split
from ..data.validate import Problems
from ..errors import MiniMindError
from .verify import DEFAULT_EVAL_TEXT

EVAL_CHARS = 20000  # held-out text is cut to this many characters: enough for a stable perplexity
SAMPLE_NAMES = ("heldout_sample.jsonl", "heldout_sample.txt")
GENERIC_NAME = "generic sample text (Tang poems and English verse; not this model's own data)"


def run_folder(checkpoint: str | Path) -> Path | None:
    """RUN for a checkpoint at RUN/checkpoints/<step>, when RUN holds a config.yaml; else None."""
    checkpoint = Path(checkpoint).resolve()
    run = checkpoint.parent.parent
    if checkpoint.parent.name == "checkpoints" and (run / "config.yaml").is_file():
        return run
    return None


def model_name(model: str | Path, adapter: str | Path | None = None) -> str:
    """A file-name-safe name for exports of this model: the run's folder name for a run
    checkpoint, else the model (or adapter) folder's name."""
    folder = Path(adapter if adapter is not None else model)
    run = run_folder(folder)
    name = run.name if run is not None else folder.resolve().name
    return sanitize(name)


def sanitize(name: str, max_len: int = 80) -> str:
    base = unicodedata.normalize("NFC", str(name)).strip()
    base = re.sub(r"[^\w.\-]+", "_", base).strip("._-")[:max_len]
    return base or "model"


def _cut(texts, limit: int) -> list[str]:
    docs, total = [], 0
    for text in texts:
        if not text.strip():
            continue
        docs.append(text[:limit - total])
        total += len(docs[-1])
        if total >= limit:
            break
    return docs


def _run_config(run: Path) -> dict:
    import yaml

    try:
        return yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}


def answers(doc: dict) -> list[str]:
    """What a run trained the model to write, in one held-out record: a plain document; a chat's
    assistant turns; a preference pair's chosen answer. A prompts record has none (the model wrote
    its answers): []."""
    if "text" in doc:
        return [doc["text"]]
    if "chosen" in doc:
        return [doc["chosen"]]
    return [m["content"] for m in doc.get("messages") or [] if m.get("role") == "assistant"]


def _validation_records(run: Path):
    """The records (normal form) a run held out for validation, split as its trainer split them
    (`data.prepare.document_split`), or None when there are none or the corpus cannot be read."""
    data = dict(_run_config(run).get("data") or {})
    known = set(DataConfig.__dataclass_fields__)
    try:
        config = DataConfig(**{k: v for k, v in data.items() if k in known})
        if not config.files or config.val_fraction <= 0:
            return None
        docs = read_documents(config.files, config)
    except (MiniMindError, OSError, ValueError, TypeError, KeyError):
        return None
    _, val_idx = document_split(docs, config)
    return docs.dataset.select(val_idx) if len(val_idx) else None


def validation_text(run: Path, limit: int = EVAL_CHARS) -> list[str]:
    """The texts of the records a run held out for validation ([] when there are none): plain
    documents, or the answers of chat and preference records (`answers`)."""
    records = _validation_records(run)
    if records is None:
        return []
    return _cut((text for doc in records for text in answers(doc)), limit)


def validation_labels(run: Path, limit: int = EVAL_CHARS) -> tuple[list[str], list[str]] | None:
    """(texts, labels) of the records a labelled run held out, texts cut like `validation_text`
    (a text cut short keeps its label); None when the run's corpus is not labelled."""
    records = _validation_records(run)
    if records is None or "label" not in records.column_names:
        return None
    texts, labels, total = [], [], 0
    for text, label in zip(records["text"], records["label"]):
        if total >= limit:
            break
        if text.strip():
            texts.append(text[:limit - total])
            labels.append(label)
            total += len(texts[-1])
    return texts, labels


def default_eval_labels(model: str | Path, adapter: str | Path | None = None,
                        limit: int = EVAL_CHARS) -> tuple[list[str], list[str], str] | None:
    """(texts, labels, what they are) for a classifier from a labelled run: the run's validation
    split, on which its exports' accuracy is measured; None when it has none."""
    for folder in [adapter, model] if adapter is not None else [model]:
        run = run_folder(folder) if folder is not None else None
        found = validation_labels(run, limit) if run is not None else None
        if found and found[0]:
            texts, labels = found
            return texts, labels, f"the validation split of run {run.name} ({len(texts)} held-out texts)"
    return None


def read_held_out(path: str | Path, limit: int = EVAL_CHARS) -> tuple[list[str], list[str] | None]:
    """(texts, labels or None) of a held-out file (.txt lines, .jsonl/.json/.csv/.parquet records),
    cut to `limit` characters in all: a labelled file (text + label fields) gives a classifier's
    export its accuracy; any other file gives texts only. Raises CorpusError with the file and line
    for an unreadable file."""
    config = DataConfig()
    docs = iter_documents(check_files([str(path)], config), config, Problems(config.strict, config.max_skipped),
                          one_kind=False)
    texts, labels, total = [], [], 0
    for _, doc in docs:
        if total >= limit:
            break  # nothing more is read: a file may hold far more than the limit
        for text in doc_texts(doc):
            if total >= limit:
                break
            if text.strip():
                texts.append(text[:limit - total])
                labels.append(doc.get("label"))
                total += len(texts[-1])
    return texts, (labels if labels and all(label is not None for label in labels) else None)


def shipped_sample(folder: str | Path, limit: int = EVAL_CHARS) -> tuple[list[str], Path] | None:
    """(documents, file) of the held-out sample shipped in `folder`, or None."""
    for name in SAMPLE_NAMES:
        path = Path(folder) / name
        if path.is_file():
            try:
                docs = _cut(iter_texts([str(path)]), limit)
            except (OSError, UnicodeDecodeError, ValueError, KeyError):
                continue
            if docs:
                return docs, path
    return None


def _origins(model: Path, adapter: Path | None) -> list[Path]:
    """Folders whose shipped sample fits this model: itself, its adapter's base, its run's start."""
    folders = [adapter, model] if adapter is not None else [model]
    for folder in list(folders):
        if (folder / "adapter_config.json").is_file():
            try:
                base = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
                if base.get("base_model_name_or_path"):
                    folders.append(Path(base["base_model_name_or_path"]))
            except (OSError, ValueError):
                pass
        run = run_folder(folder)
        if run is not None:
            init = (_run_config(run).get("model") or {}).get("init_from")
            if init:
                folders.append(Path(init))
    return folders


def default_eval_text(model: str | Path, adapter: str | Path | None = None,
                      limit: int = EVAL_CHARS) -> tuple[list[str], str]:
    """(documents, what they are) to score an export of `model` (+ `adapter`) on by default."""
    model = Path(model)
    adapter = Path(adapter) if adapter is not None else None
    for folder in [adapter, model] if adapter is not None else [model]:
        run = run_folder(folder)
        if run is not None:
            docs = validation_text(run, limit)
            if docs:
                return docs, f"the validation split of run {run.name} ({len(docs)} held-out texts)"
    for folder in _origins(model, adapter):
        found = shipped_sample(folder, limit)
        if found is not None:
            docs, path = found
            return docs, f"{path.parent.name}/{path.name}, the held-out sample shipped with {path.parent.name}"
    return list(DEFAULT_EVAL_TEXT), GENERIC_NAME

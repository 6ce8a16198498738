"""Run exports: load the source once, write each format, reload and verify it, then publish it.

An export is written to a hidden `.NAME.partial` folder beside its destination
and moved into place only after verification passed, so the export folder
never holds a half-written or unverified model. A failed check deletes the
partial folder and raises `ExportError` with the numbers that failed.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import minimind.export.onnx_runner as onnx_runner

from ..checkpoint import adapter_base, is_adapter, is_classifier, load_tokenizer_for
from ..classifier import is_classifier_model
from ..lstm import is_lstm
from ..errors import ExportError
from .card import CardFacts, find_facts, write_card
from .formats import DTYPES, FORMATS, lstm_refusal, tolerance_for
from ..gguf_model import gguf_architecture
from .gguf import gguf_refusal, write_gguf
from .heldout import GENERIC_NAME, default_eval_labels, default_eval_text, model_name
from .hf import write_hf
from .license import copy_license_files
from .llama import family_name, not_llama_shaped, require_dense, write_llama
from .merged import default_merged_as, write_merged
from .onnx import onnx_refusal, write_onnx
from .quantized import write_bnb, write_int8
from .source import Source, load_source
from .verify import (Reference, as_documents, check, load_export, make_classifier_reference,
                     make_reference)


@dataclass
class ExportResult:
    format: str
    folder: Path                 # the export's folder (holds README.md)
    path: Path                   # what to load: the folder, or the .gguf file inside it
    files: list[str]             # the export's files (README.md aside)
    size_bytes: int              # their total size
    source: str                  # the source checkpoint folder
    adapter: str | None = None   # the LoRA adapter merged in, if any
    dtype: str | None = None     # float dtype of the unquantized weights
    stored_as: str | None = None  # the architecture a folder is saved as
    classifier: bool = False     # a sequence classifier (class logits), not a language model
    perplexity: float | None = None
    source_perplexity: float | None = None
    delta: float | None = None   # perplexity / source perplexity - 1
    greedy_match: int | None = None   # leading greedy tokens identical to the source
    greedy_tokens: int | None = None
    cached_greedy_match: int | None = None  # leading tokens of a free-running decode through the KV cache
    logit_max_diff: float | None = None     # max |logit - source logit| on the checked positions
    labels_agree: int | None = None         # a classifier: held-out texts given the source's label
    labels_total: int | None = None
    accuracy: float | None = None           # a classifier on labelled held-out texts: the export's accuracy
    source_accuracy: float | None = None    # and the source's, on the same texts
    seconds: float = 0.0         # writing time
    verify_seconds: float = 0.0
    error: str | None = None     # set by export_many when this format failed
    eval_name: str | None = None  # what the perplexities were measured on
    problems: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return self.error is None and (self.perplexity is not None or self.labels_total is not None)

    def as_dict(self) -> dict:
        out = asdict(self)
        out.update(folder=str(self.folder), path=str(self.path), verified=self.verified)
        return out


def applicable_formats(model_dir: str | Path, adapter: str | Path | None = None) -> list[str]:
    """Every format that can hold this model (folder, or adapter on its base), read from its files
    without loading weights: a classifier exports as ONNX only; experts, other position encodings and
    other families leave out the dense Llama formats; characters added to the vocabulary leave out
    GGUF; `merged` needs an adapter; ONNX needs its optional packages."""
    import json
    from types import SimpleNamespace

    has_adapter = adapter is not None or is_adapter(model_dir)
    classifier = is_classifier(adapter if adapter is not None else model_dir)
    config_dir = Path(adapter_base(model_dir)) if is_adapter(model_dir) else Path(model_dir)
    config_file = config_dir / "config.json"
    fields = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    config = SimpleNamespace(**fields)
    no_onnx = bool(onnx_runner.missing_packages()) or onnx_refusal(config) is not None  # not installed, or experts
    if classifier:
        return [] if no_onnx else [f for f in FORMATS if f.startswith("onnx")]
    not_llama = not_llama_shaped(config) is not None  # experts, other positions, other families
    tokenizer = load_tokenizer_for(adapter or model_dir)
    # GGUF cannot carry characters a run added, nor options llama.cpp's architectures lack
    no_gguf = not not_llama and gguf_refusal(config, tokenizer) is not None
    return [f for f, spec in FORMATS.items()
            if not (spec.dense_only and not_llama) and (f != "merged" or has_adapter)
            and not (no_gguf and f.startswith("gguf")) and not (no_onnx and f.startswith("onnx"))
            and lstm_refusal(f, config) is None]


def check_request(formats: Iterable[str], dtype: str | None, merged_as: str | None) -> list[str]:
    """The format list, or an ExportError naming what is unknown (before any work starts)."""
    formats = list(formats)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ExportError(f"unknown export format {', '.join(unknown) or '(none)'}; "
                          f"choose from {', '.join(FORMATS)}")
    if dtype is not None and dtype not in DTYPES:
        raise ExportError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    if merged_as is not None and merged_as not in ("llama", "hf"):
        raise ExportError(f"merged exports are saved as 'llama' or 'hf', not {merged_as!r}")
    return formats


def _stored_as(fmt: str, config, merged_as: str | None, classifier: bool = False) -> str:
    dense = not_llama_shaped(config) is None
    if fmt.startswith("gguf"):
        return f"{gguf_architecture(config)}-architecture GGUF"
    if classifier:  # only the ONNX formats hold one (check_applies)
        return ("ONNX graph of a sequence classifier (input_ids, attention_mask -> logits); config.json in "
                "MiniMind form with its id2label / label2id")
    if fmt.startswith("onnx"):
        return ("ONNX graph, Llama decoder-with-past inputs/outputs; config.json "
                + ("in Llama form" if dense else "in MiniMind form"))
    if is_lstm(config):  # only hf and merged hold one (lstm_refusal)
        return "MiniMind LSTM folder (model_type minimind-lstm; `import minimind` before loading)"
    if fmt == "hf" or (fmt == "merged" and (merged_as or default_merged_as(config)) == "hf"):
        return "MiniMind folder (model_type minimind; `import minimind` before loading)"
    if fmt in ("llama", "merged") or dense:
        return f"{family_name(config)} folder (stock transformers, no MiniMind code)"
    return "MiniMind folder (model_type minimind; `import minimind` before loading)"


def check_applies(fmt: str, src: Source) -> None:
    """ExportError if `fmt` cannot hold this model (MoE in a Llama format, a merge without adapter)."""
    reason = lstm_refusal(fmt, src.config)
    if reason:
        raise ExportError(reason)
    if is_classifier_model(src.model) and not fmt.startswith("onnx"):
        raise ExportError(f"format {fmt!r} holds a language model; a sequence classifier exports as onnx or "
                          "onnx-int8 (its checkpoint folder is already its Hugging Face form)")
    if FORMATS[fmt].dense_only:
        require_dense(src.config, fmt)
    if fmt.startswith("gguf"):
        reason = gguf_refusal(src.config, src.tokenizer)
        if reason:
            raise ExportError(f"{reason}; export hf or llama instead")
    if fmt.startswith("onnx"):
        reason = onnx_refusal(src.config)
        if reason:
            raise ExportError(reason)
        onnx_runner.require_onnx()
    if fmt == "merged" and src.adapter is None:
        raise ExportError("format 'merged' needs a LoRA adapter: pass --adapter DIR "
                          "(or give the adapter folder as --model)")


def _write(fmt: str, src: Source, folder: Path, dtype: str | None, merged_as: str | None,
           stem: str = "model") -> Path:
    model, tok = src.model, src.tokenizer
    check_applies(fmt, src)
    if fmt == "hf":
        return write_hf(model, tok, folder, dtype)
    if fmt == "llama":
        return write_llama(model, tok, folder, dtype)
    if fmt == "merged":
        return write_merged(model, tok, folder, src.adapter, merged_as, dtype)
    if fmt == "int8":
        return write_int8(model, tok, folder, dtype)
    if fmt.startswith("bnb-"):
        return write_bnb(model, tok, folder, fmt, dtype)
    if fmt.startswith("onnx"):
        return write_onnx(model, tok, folder, quantize=fmt == "onnx-int8")
    return write_gguf(model, tok, folder, fmt.split("-", 1)[1], stem=stem)


def _card_facts(fmt: str, src: Source, reference, eval_name: str, folder: Path) -> CardFacts:
    """The card's license, languages and stored architecture: languages from the held-out text
    when it is the model's own (not the generic sample), the architecture as the export holds it."""
    documents = reference.documents if reference is not None and eval_name != GENERIC_NAME else None
    if fmt.startswith("gguf"):
        architecture = gguf_architecture(src.config)
    else:
        config = folder / "config.json"
        architecture = json.loads(config.read_text(encoding="utf-8")).get("model_type") if config.is_file() else None
    return find_facts(src.folder, src.adapter, documents, architecture)


def _publish(partial: Path, out_dir: Path, overwrite: bool) -> None:
    if out_dir.exists():
        if not overwrite:
            raise ExportError(f"{out_dir} already exists (pass overwrite=True / --overwrite to replace it)")
        old = out_dir.with_name(f".{out_dir.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        out_dir.rename(old)
        partial.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        partial.rename(out_dir)


def export_one(src: Source, reference: Reference | None, fmt: str, out_dir: str | Path, *,
               dtype: str | None = None, merged_as: str | None = None, overwrite: bool = False,
               eval_name: str = "the held-out text", name: str | None = None) -> ExportResult:
    """Write one format of an already loaded source to `out_dir`, verify it against `reference`.

    `name` (default: the model's or run's name, see `heldout.model_name`) names a GGUF file
    `<name>-<quant>.gguf`."""
    check_request([fmt], dtype, merged_as)
    out_dir = Path(out_dir)
    if out_dir.exists() and not overwrite:
        raise ExportError(f"{out_dir} already exists (pass overwrite=True / --overwrite to replace it)")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = out_dir.with_name(f".{out_dir.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        start = time.perf_counter()
        stem = name or model_name(src.folder, src.adapter)
        artifact = _write(fmt, src, partial, dtype, merged_as, stem)
        seconds = time.perf_counter() - start
        files = sorted(p.relative_to(partial).as_posix() for p in partial.rglob("*")  # ONNX: onnx/model.onnx
                       if p.is_file() and p.name != "README.md")
        result = ExportResult(
            format=fmt, folder=out_dir, path=out_dir / artifact.relative_to(partial) if artifact != partial
            else out_dir, files=files, size_bytes=sum((partial / f).stat().st_size for f in files),
            source=str(src.folder), adapter=str(src.adapter) if src.adapter else None,
            dtype=None if fmt.startswith("gguf") else "float32" if fmt.startswith("onnx") else dtype or "float32",
            stored_as=_stored_as(fmt, src.config, merged_as, is_classifier_model(src.model)),
            classifier=is_classifier_model(src.model), seconds=seconds)
        tolerance = tolerance_for(fmt, dtype)
        if reference is not None:
            start = time.perf_counter()
            try:
                model, tokenizer = load_export(fmt, artifact)
                verdict = check(model, tokenizer, reference, tolerance)
            except (RuntimeError, ValueError, AssertionError, OSError, KeyError) as err:
                raise ExportError(f"{fmt} export failed verification: reloading and running it raised "
                                  f"{type(err).__name__}: {err}") from err
            result.verify_seconds = time.perf_counter() - start
            result.perplexity, result.source_perplexity = verdict.perplexity, verdict.source_perplexity
            result.delta, result.greedy_match = verdict.delta, verdict.greedy_match
            result.greedy_tokens, result.problems = verdict.greedy_total, verdict.problems
            result.cached_greedy_match, result.logit_max_diff = verdict.cached_greedy_match, verdict.logit_max_diff
            result.labels_agree, result.labels_total = verdict.labels_agree, verdict.labels_total
            result.accuracy, result.source_accuracy = verdict.accuracy, verdict.source_accuracy
            if not verdict.passed:
                raise ExportError(f"{fmt} export failed verification: {'; '.join(verdict.problems)}")
        facts = _card_facts(fmt, src, reference, eval_name, partial)
        copy_license_files(facts.terms, partial)  # beside the weights, not counted among the export's files
        _publish(partial, out_dir, overwrite)
        result.eval_name = eval_name if reference is not None else None
        write_card(out_dir, result, tolerance, eval_name, facts)
        return result
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def export_many(source: str | Path, formats: Iterable[str], out_root: str | Path, *,
                adapter: str | Path | None = None, dtype: str | None = None, merged_as: str | None = None,
                eval_text: str | list[str] | None = None, eval_name: str | None = None,
                eval_labels: list[str] | None = None, verify: bool = True,
                overwrite: bool = False, name: str | None = None,
                on_result: Callable[[ExportResult], None] | None = None) -> list[ExportResult]:
    """Export `source` to each format in `out_root/<format>/`, loading and scoring the source once.

    A format that fails (not applicable, or failed verification) gets a result with
    `error` set and the others still run; any other exception propagates. Without
    `eval_text` the exports are scored on the model's own held-out text (see
    `heldout.default_eval_text`); each result's `eval_name` says which text it was. A classifier
    is also scored for accuracy on labelled held-out texts: `eval_labels` (one class name per
    text of `eval_text`), else its run's labelled validation split.
    """
    formats = check_request(formats, dtype, merged_as)
    src = load_source(source, adapter)
    reference = None
    eval_text, label, eval_labels = resolve_eval_text(src, eval_text, eval_name, eval_labels)
    if verify:
        reference = _reference(src, eval_text, eval_labels)
    results = []
    for fmt in formats:
        try:
            result = export_one(src, reference, fmt, Path(out_root) / fmt, dtype=dtype, merged_as=merged_as,
                                overwrite=overwrite, eval_name=label, name=name)
        except ExportError as err:
            result = ExportResult(format=fmt, folder=Path(out_root) / fmt, path=Path(out_root) / fmt, files=[],
                                  size_bytes=0, source=str(src.folder), error=str(err), eval_name=label)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def export(source: str | Path, fmt: str, out_dir: str | Path, *, adapter: str | Path | None = None,
           dtype: str | None = None, merged_as: str | None = None, eval_text: str | list[str] | None = None,
           eval_name: str | None = None, eval_labels: list[str] | None = None, verify: bool = True,
           overwrite: bool = False, name: str | None = None) -> ExportResult:
    """Export `source` (a MiniMind folder, or a LoRA adapter folder) as `fmt` into `out_dir`.

    Raises ExportError if the format does not apply or the reloaded export fails verification.
    """
    check_request([fmt], dtype, merged_as)
    src = load_source(source, adapter)
    check_applies(fmt, src)
    eval_text, label, eval_labels = resolve_eval_text(src, eval_text, eval_name, eval_labels)
    reference = _reference(src, eval_text, eval_labels) if verify else None
    return export_one(src, reference, fmt, out_dir, dtype=dtype, merged_as=merged_as, overwrite=overwrite,
                      eval_name=label, name=name)


def _reference(src: Source, eval_text, eval_labels: list[str] | None = None):
    """The source scored once: a language model's perplexity and greedy answer, or a classifier's
    logits on each held-out text (and its accuracy when their labels are known)."""
    if is_classifier_model(src.model):
        return make_classifier_reference(src.reference_model(), src.tokenizer, eval_text, eval_labels)
    return make_reference(src.reference_model(), src.tokenizer, as_documents(eval_text))


def resolve_eval_text(src: Source, eval_text, eval_name: str | None, eval_labels: list[str] | None = None
                      ) -> tuple[str | list[str], str, list[str] | None]:
    """(held-out text, what it is, its labels or None): the given text, else the model's own held-out
    text; for a classifier without given labels, its run's labelled validation split when it has one."""
    if eval_text is not None:
        return eval_text, eval_name or "the held-out text", eval_labels
    if eval_labels is not None:
        raise ExportError("eval_labels label the texts of eval_text; give both")
    if is_classifier_model(src.model):
        found = default_eval_labels(src.folder, src.adapter)
        if found is not None:
            texts, labels, name = found
            return texts, name, labels
    return (*default_eval_text(src.folder, src.adapter), None)

"""The README.md written beside every export: where it came from, what it is, what it keeps.

A downloaded folder or GGUF file travels without our app, so the card carries
the facts a person needs to trust it: source checkpoint, format, size, the
held-out perplexity it keeps against the source's, and how to load it.
"""

from __future__ import annotations

from pathlib import Path

from .formats import FORMATS, Tolerance
from .onnx import CLASSIFIER_LAYOUT, LAYOUT


def human_size(n_bytes: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n_bytes < 1024 or unit == "GB":
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024
    return f"{n_bytes:.1f} GB"


def render_card(result, tolerance: Tolerance, eval_name: str) -> str:
    """Markdown for one ExportResult (see exporter.ExportResult)."""
    spec = FORMATS[result.format]
    folder = Path(result.folder).name
    target = Path(result.path).name if result.path != result.folder else folder
    rows = [("Source checkpoint", f"`{result.source}`"), ("Format", f"`{result.format}`: {spec.summary}")]
    if result.adapter:
        rows.append(("LoRA adapter", f"`{result.adapter}`, merged into the weights"))
    if result.stored_as:
        rows.append(("Stored as", result.stored_as))
    if result.dtype and not result.format.startswith("gguf"):
        rows.append(("Float dtype", result.dtype))
    rows.append(("Files", ", ".join(f"`{f}`" for f in result.files)))
    rows.append(("Size", human_size(result.size_bytes)))
    if result.perplexity is not None:
        rows.append(("Held-out perplexity", f"{result.perplexity:.4g} (source {result.source_perplexity:.4g}, "
                                            f"{result.delta:+.2%}) on {eval_name}"))
        rows.append(("Greedy decoding", f"first {result.greedy_match} of {result.greedy_tokens} tokens identical "
                                        "to the source on a fixed prompt"))
        if getattr(result, "cached_greedy_match", None) is not None:
            rows.append(("Greedy through the KV cache", f"first {result.cached_greedy_match} of "
                         f"{result.greedy_tokens} tokens identical, one token per call"))
        if getattr(result, "logit_max_diff", None) is not None:
            rows.append(("Logits", f"within {result.logit_max_diff:.2g} of the source's (allowed "
                                   f"{tolerance.logit_atol:g})"))
        rows.append(("Tolerance", f"{tolerance.why}; perplexity within ±{tolerance.ppl_rel:.2%}, greedy "
                                  f"tokens may differ only at near-ties under {tolerance.logit_margin:g} logits"))
    elif getattr(result, "labels_total", None) is not None:
        rows.append(("Predicted labels", f"{result.labels_agree} of {result.labels_total} held-out texts get "
                                         f"the source's label ({eval_name})"))
        if getattr(result, "accuracy", None) is not None:
            rows.append(("Held-out accuracy", f"{result.accuracy:.2%} (source {result.source_accuracy:.2%}) "
                                              f"on {eval_name}"))
        if result.logit_max_diff is not None:
            rows.append(("Class logits", f"within {result.logit_max_diff:.2g} of the source's"))
        rows.append(("Tolerance", f"{tolerance.why}; a label may differ only at near-ties under "
                                  f"{tolerance.logit_margin:g} logits"))
    else:
        rows.append(("Verification", "skipped"))
    hint = spec.load_hint.replace("FOLDER", repr(folder)).replace("FILE", target)
    lines = [f"# MiniMind export: {result.format}", "", spec.summary + ".", "",
             "| | |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows], "",
             "## Load it", "", "```python" if not result.format.startswith("gguf") else "```", hint, "```", "",
             *(_onnx_layout(result) if result.format.startswith("onnx") else []),
             "Written and verified by MiniMind Studio (`python -m minimind export`).", ""]
    return "\n".join(lines)


def _onnx_layout(result) -> list[str]:
    """The graph's inputs and outputs, which a runtime needs to feed the KV cache."""
    layout = CLASSIFIER_LAYOUT if getattr(result, "classifier", False) else LAYOUT
    return ["## Graph inputs and outputs", "", "```", layout, "```", ""]


def write_card(folder: Path, result, tolerance: Tolerance, eval_name: str) -> Path:
    path = Path(folder) / "README.md"
    path.write_text(render_card(result, tolerance, eval_name), encoding="utf-8")
    return path

"""The README.md written beside every export: where it came from, what it is, what it keeps.

A downloaded folder or GGUF file travels without our app, so the card carries
the facts a person needs to trust it: source checkpoint, format, size, the
held-out perplexity it keeps against the source's, and how to load it. Its YAML
front matter is what the Hub reads (license, library, task, base model, tags,
languages); it is built with huggingface_hub's own ModelCardData and parsed back
by ModelCard, so a card that would not load on the Hub is never written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData

from ..language import text_languages
from .formats import FORMATS, Tolerance
from .license import Terms, resolve_terms
from .onnx import CLASSIFIER_LAYOUT, LAYOUT

# extra Hub tags per format ("minimind" and the stored architecture are added to all)
FORMAT_TAGS = {"int8": ["torchao", "int8"], "bnb-8bit": ["bitsandbytes", "8-bit"], "bnb-nf4": ["bitsandbytes", "4-bit"],
               "gguf-f16": ["gguf"], "gguf-q8_0": ["gguf"], "onnx": ["onnx"], "onnx-int8": ["onnx", "int8"]}
# model types Transformers.js runs as text generation from an onnx/ folder (its Llama-family decoders)
TRANSFORMERS_JS_TYPES = ("llama", "mistral", "qwen2", "qwen3")


@dataclass(frozen=True)
class CardFacts:
    """What the front matter says beyond the export itself, found by the exporter."""

    terms: Terms = field(default_factory=lambda: Terms(None))   # license and base model (license.resolve_terms)
    languages: tuple[str, ...] = ()      # ISO 639-1 codes of what the model writes (minimind.language)
    architecture: str | None = None      # the stored model type (llama, qwen2, ...; minimind for hf)


PLACES = ("runs", "checkpoints", "imports", "models")  # workspace and repository folders a source lives in


def where_from(source: str | Path) -> str:
    """A source folder as the card names it: from its workspace folder on (`runs/<run>/checkpoints/step-400`,
    `checkpoints/minimind-tang`), else its own name. A card travels (downloads, the Hub): the path on this
    machine would give away its user and layout and means nothing elsewhere."""
    parts = Path(source).parts
    for place in PLACES:  # (a run's checkpoint is named from `runs`, not from its own `checkpoints`)
        found = [i for i, part in enumerate(parts[:-1]) if part == place]
        if found:
            return "/".join(parts[found[-1]:])
    return Path(source).name


def human_size(n_bytes: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n_bytes < 1024 or unit == "GB":
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024
    return f"{n_bytes:.1f} GB"


def stated_languages(folder: Path) -> list[str]:
    """The `language` a model folder's own card states (the shipped models' do), else []."""
    card = Path(folder) / "README.md"
    if not card.is_file():
        return []
    try:
        stated = ModelCard.load(card).data.language
    except (OSError, ValueError):  # front matter that is not YAML states nothing
        return []
    return [stated] if isinstance(stated, str) else list(stated or [])


def find_facts(model: Path, adapter: Path | None, documents: list[str] | None,
               architecture: str | None = None) -> CardFacts:
    """The facts of an export of `model` (+ `adapter`): license terms from where it came from; the
    languages of `documents`, the model's own text it was scored on, else those its card states."""
    languages = text_languages(documents) if documents else []
    if not languages:
        languages = stated_languages(adapter if adapter is not None else model) or stated_languages(model)
    return CardFacts(resolve_terms(model, adapter), tuple(languages), architecture)


def library_name(result) -> str | None:
    """The Hub library that loads this export, which picks its "Use this model" snippet: transformers
    for the safetensors folders; Transformers.js for an ONNX decoder it can run (a Llama-family
    config beside onnx/model.onnx); none for GGUF, a file format the Hub recognises by the file
    itself (not a library of its list), nor for an ONNX graph only ONNX Runtime runs."""
    if result.format.startswith("gguf"):
        return None
    if result.format.startswith("onnx"):
        folder = Path(result.folder)
        graphs = list((folder / "onnx").glob("model*.onnx")) if (folder / "onnx").is_dir() else []
        try:
            model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
        except (OSError, ValueError):
            model_type = None
        usable = graphs and not result.classifier and model_type in TRANSFORMERS_JS_TYPES
        return "transformers.js" if usable else None
    return "transformers"


def card_data(result, facts: CardFacts) -> ModelCardData:
    """The front matter of one export's card."""
    terms = facts.terms
    tags = ["minimind"]
    if facts.architecture and not facts.architecture.startswith("minimind"):
        tags.append(facts.architecture)
    tags += FORMAT_TAGS.get(result.format, [])
    if result.adapter:
        tags.append("lora")
    bases = list(terms.base_models)
    return ModelCardData(
        license=terms.license, license_name=terms.license_name, license_link=terms.license_link,
        library_name=library_name(result),
        pipeline_tag="text-classification" if result.classifier else "text-generation",
        base_model=(bases[0] if len(bases) == 1 else bases) or None,
        language=list(facts.languages) or None, tags=tags)


def license_lines(terms: Terms) -> list[str]:
    """The card's License section: what the front matter claims and why, or why it claims none."""
    files = ", ".join(f"`{name}`" for name in terms.files)
    kept = f" Its license files are beside the weights: {files}." if files else ""
    parts = "; ".join(f"{p.what}: {p.license if p.license != 'other' else p.name or 'other'}"
                      if p.license else f"{p.what}: not known" for p in terms.pieces)
    if terms.license is None:
        missing = ", ".join(terms.unknown) or "the source model"
        text = (f"Not known: nothing says under which terms {missing} may be shared, so this card claims no "
                "license. Add `license:` (a Hub license id) to the front matter before publishing it.")
        return ["## License", "", text + (f" Known parts: {parts}." if len(terms.unknown) < len(terms.pieces) else "")
                + kept, ""]
    if terms.license == "other":
        return ["## License", "", f"Several licenses apply ({parts}); the front matter names them "
                f"`{terms.license_name}` and links `{terms.license_link}`.{kept}", ""]
    return ["## License", "", f"`{terms.license}`, the license of what it was made from ({parts}).{kept}", ""]


def render_card(result, tolerance: Tolerance, eval_name: str, facts: CardFacts | None = None) -> str:
    """Markdown for one ExportResult (see exporter.ExportResult), front matter first."""
    facts = facts or CardFacts()
    spec = FORMATS[result.format]
    folder = Path(result.folder).name
    target = Path(result.path).name if result.path != result.folder else folder
    rows = [("Source checkpoint", f"`{where_from(result.source)}`"), ("Format", f"`{result.format}`: {spec.summary}")]
    if result.adapter:
        rows.append(("LoRA adapter", f"`{where_from(result.adapter)}`, merged into the weights"))
    if facts.terms.base_models:
        rows.append(("Base model", ", ".join(f"`{b}`" for b in facts.terms.base_models)))
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
             *license_lines(facts.terms),
             "Written and verified by MiniMind Studio (`python -m minimind export`).", ""]
    card = ModelCard(f"---\n{card_data(result, facts).to_yaml()}\n---\n\n" + "\n".join(lines))
    return str(card)


def _onnx_layout(result) -> list[str]:
    """The graph's inputs and outputs, which a runtime needs to feed the KV cache."""
    layout = CLASSIFIER_LAYOUT if getattr(result, "classifier", False) else LAYOUT
    return ["## Graph inputs and outputs", "", "```", layout, "```", ""]


def write_card(folder: Path, result, tolerance: Tolerance, eval_name: str, facts: CardFacts | None = None) -> Path:
    path = Path(folder) / "README.md"
    path.write_text(render_card(result, tolerance, eval_name, facts), encoding="utf-8")
    return path

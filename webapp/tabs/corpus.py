"""Corpus tab: upload files (or pick a sample), see what they hold and every problem,
optionally train a tokenizer, and save them as a named corpus for the Train tab."""

from __future__ import annotations

import shutil
from pathlib import Path

import gradio as gr
import pandas as pd

from minimind.data import DataConfig, inspect_corpus
from minimind.data.config import KINDS
from minimind.data.kinds import PARAM_FIELDS
from minimind.data.stats import pair_sample, unit
from minimind.errors import CorpusError

from ..context import SAMPLES, SAMPLES_DIR, AppContext, user_errors
from ..i18n import headed, language, t, tr
from ..workspace import ALLOWED_TYPES, WorkspaceError


def _data_config(ctx: AppContext, kind, text_field, split, strict, label_field=None) -> DataConfig:
    if label_field is not None and not isinstance(label_field, str):
        raise WorkspaceError("the label field must be a field name")
    return DataConfig(kind=kind, text_field=(text_field or "").strip() or None, split=split, strict=bool(strict),
                      label_field=(label_field or "").strip() or None,
                      cache_dir=str(ctx.workspace.cache), root=str(ctx.workspace.root))


CLASSES_SHOWN = 30  # classes listed by name on the page (the rest counted)


def class_rows(classes: dict[str, int]) -> list[str]:
    """A labelled corpus's classes with their documents, largest first (the page's summary)."""
    if not classes:
        return []
    ordered = sorted(classes.items(), key=lambda kv: -kv[1])
    lines = [f"- {label}: {n:,}" for label, n in ordered[:CLASSES_SHOWN]]
    if len(ordered) > CLASSES_SHOWN:
        lines.append(tr("c_classes_more", n=f"{len(ordered) - CLASSES_SHOWN:,}"))
    return [tr("c_classes", n=f"{len(classes):,}"), "\n".join(lines)]


def stored_files(ctx: AppContext, uploads, sample: str | None) -> list[str]:
    """Copy uploads (or the chosen sample, with its license) into the workspace; return their paths.

    Every upload is checked before any is read or copied: only files this server received."""
    received = [ctx.uploads.accept(item) for item in uploads or []]
    paths = [str(ctx.workspace.store_upload(path, path.name)) for path in received]
    if not paths and sample:
        if sample not in SAMPLES:
            raise WorkspaceError(f"unknown sample {sample!r}")
        stored = ctx.workspace.store_upload(SAMPLES_DIR / SAMPLES[sample])
        for license_file in SAMPLES_DIR.glob("LICENSE*"):
            shutil.copyfile(license_file, stored.parent / license_file.name)
        paths.append(str(stored))
    if not paths:
        raise WorkspaceError("upload at least one file or pick a sample")
    return paths


def _tokenizer(ctx: AppContext):
    from minimind.tokenizer import load_tokenizer

    for path in ctx.shipped().values():
        if (path / "tokenizer.json").is_file():
            return load_tokenizer(path)
    return None


def inspect(ctx: AppContext, uploads, sample, kind, text_field, split, strict, label_field=None):
    """(summary, histogram, samples, problems, stored files) for the page. A labelled corpus (text
    and label fields, for a classifier) lists its classes with their documents."""
    files = stored_files(ctx, uploads, sample)
    try:
        stats = inspect_corpus(files, _data_config(ctx, kind, text_field, split, strict, label_field), _tokenizer(ctx))
    except CorpusError as err:
        return (tr("corpus_unusable"), _histogram_plot(None), _samples([]),
                f"❌ {err}", files)
    units = unit(stats.kind)
    count_key = f"c_{units}" if f"c_{units}" in UNIT_WORDS else "c_documents"
    rows = [tr("c_kind", kind=stats.kind), tr(count_key, n=f"{stats.documents:,}"),
            tr("c_characters", n=f"{stats.characters:,}")]
    if stats.tokens is not None:
        rows += [tr("c_tokens", n=f"{stats.tokens:,}"), tr("c_chars_per_token", v=f"{stats.chars_per_token:.2f}")]
    for name, part in stats.parts.items():
        tokens = stats.part_tokens.get(name)
        rows.append(f"**{name.capitalize()}:** {part}" + (f"; {tokens}" if tokens else ""))
    if stats.kind == "prompts":  # for GRPO: what the rewards can check beyond the text
        asks = ", ".join(f"{name} {n:,}" for name, n in stats.params.items()) or tr("none")
        rows.append(tr("c_reward_fields", asks=asks))
    rows += class_rows(stats.classes or {})
    rows += [f"- {Path(f.name).name}: {f.format}, {f.encoding or tr('binary')}, {f.documents:,} {unit_word(units)}"
             for f in stats.files]
    rows += coverage_rows(ctx, files, _data_config(ctx, kind, text_field, split, strict, label_field))
    problems = []
    if stats.skipped_count:
        problems.append(tr("c_skipped", n=f"{stats.skipped_count:,}"))
        problems += [f"- {s}" for s in stats.skipped]
    problems += [f"- ⚠️ {w}" for w in stats.warnings]
    if stats.empty:
        problems.append(tr("c_empty", n=f"{stats.empty:,}"))
    return ("\n\n".join(rows), _histogram_plot(stats.length_histogram), _samples(stats.samples, stats.kind),
            "\n".join(problems) or tr("c_no_problems"), files)


def coverage_rows(ctx: AppContext, files: list[str], config: DataConfig) -> list[str]:
    """For each shipped model: the share of the corpus's characters its tokenizer writes in byte
    pieces, characters per token, and (when it matters) how many frequent characters a vocabulary
    extension would add (minimind.vocabulary)."""
    from minimind.data import iter_texts
    from minimind.tokenizer import load_tokenizer
    from minimind.vocabulary import COVERAGE_CHARS, MIN_COUNT, coverage, worth_extending

    rows = []
    for name, path in ctx.shipped().items():
        if not (path / "tokenizer.json").is_file():
            continue
        try:
            found = coverage(load_tokenizer(path), iter_texts(files, config.text_field, config.kind, config),
                             max_chars=COVERAGE_CHARS)
        except CorpusError:
            return []  # the problems list says why
        line = tr("c_coverage", model=name, share=f"{100 * found.byte_fallback_share:.1f}",
                  cpt=f"{found.chars_per_token:.2f}")
        added = worth_extending(found)
        if added:
            line += tr("c_coverage_missing", n=f"{added:,}", k=MIN_COUNT)
        rows.append(line)
    return [tr("c_coverage_head"), "\n".join(rows)] if rows else []


UNIT_WORDS = {"c_documents": ("documents", "篇文档"), "c_pairs": ("pairs", "个偏好对"), "c_prompts": ("prompts", "个提示")}


def unit_word(units: str) -> str:
    """What the library calls a corpus's documents ("documents", "pairs", "prompts"), in the page's language."""
    en, zh = UNIT_WORDS.get(f"c_{units}", (units, units))
    return zh if language() == "zh" else en


HISTOGRAM_BARS = 10  # at most this many bars: their labels stay readable side by side
CORPORA_COLUMNS = ["corpus", "kind", "documents", "tokenizer"]


def _short(n: float) -> str:
    """A compact length label: 840, 1.2k, 15k."""
    if n < 1000:
        return f"{n:.0f}"
    if n < 10_000:
        return f"{n / 1000:.1f}".rstrip("0").rstrip(".") + "k"
    return f"{n / 1000:.0f}k"


def _histogram(hist) -> pd.DataFrame:
    """Bars of document lengths: at most HISTOGRAM_BARS, adjacent bins merged, labelled by their
    compact range ("120-240"); the last bar also holds the longest outliers ("≥ 1.2k")."""
    if not hist or not hist.counts:
        return pd.DataFrame({"length": [], "documents": []})
    step = -(-len(hist.counts) // HISTOGRAM_BARS)  # ceil: bins merged per bar
    labels, counts = [], []
    for i in range(0, len(hist.counts), step):
        j = min(i + step, len(hist.counts))
        last = j == len(hist.counts)
        labels.append(f"≥ {_short(hist.edges[i])}" if last and i else
                      f"{_short(hist.edges[i])}-{_short(hist.edges[j])}")
        counts.append(sum(hist.counts[i:j]))
    return pd.DataFrame({"length": labels, "documents": counts})


def _histogram_plot(hist):
    """The bar plot's new value, its bars kept in length order (the plot would sort the labels as text)."""
    frame = _histogram(hist)
    return gr.BarPlot(value=frame, sort=list(frame["length"]) or None)


def _samples(samples: list[str], kind: str | None = None) -> pd.DataFrame:
    """One column of samples; a preference corpus gets prompt / chosen / rejected columns, prompts get
    a prompt column and one per reward field the samples carry (form, must_contain, must_avoid)."""
    if kind == "preference":
        return pd.DataFrame([pair_sample(s) for s in samples], columns=["prompt", "chosen", "rejected"])
    if kind == "prompts":
        parts = [pair_sample(s) for s in samples]
        return pd.DataFrame(parts, columns=["prompt"] + [f for f in PARAM_FIELDS if any(f in p for p in parts)])
    return pd.DataFrame({"sample": list(samples)}, columns=["sample"])


def save(ctx: AppContext, name, files, kind, text_field, split, strict, train_tok, vocab, label_field=None):
    """Save the inspected files as a named corpus (and train its tokenizer when asked). A labelled
    corpus keeps its label field and classes (the Train tab offers it the classification task)."""
    from minimind.tokenizer import train_tokenizer

    if not files:
        raise WorkspaceError("inspect a corpus first, then save it")
    config = _data_config(ctx, kind, text_field, split, strict, label_field)
    stats = inspect_corpus(files, config)
    settings = {"kind": kind, "text_field": config.text_field, "split": split, "strict": bool(strict)}
    if config.label_field:
        settings["label_field"] = config.label_field
    summary = {"kind": stats.kind, "documents": stats.documents, "characters": stats.characters}
    if stats.classes:
        summary["classes"] = dict(stats.classes)
    folder = ctx.workspace.save_corpus(name or Path(files[0]).stem, [Path(f) for f in files], settings, summary)
    message = tr("c_saved", name=folder.name, n=f"{stats.documents:,}", units=unit_word(unit(stats.kind)))
    if train_tok:
        stored = [str(folder / Path(f).name) for f in files]
        _, report = train_tokenizer(stored, int(vocab), out_dir=folder / "tokenizer", text_field=config.text_field)
        message += tr("c_tokenizer", vocab=f"{report.vocab_size:,}", cpt=f"{report.chars_per_token:.2f}",
                      seconds=f"{report.seconds:.1f}")
    return message, headed(corpora_table(ctx))


def corpora_table(ctx: AppContext) -> pd.DataFrame:
    rows = [{"corpus": c["name"], "kind": c.get("summary", {}).get("kind", ""),
             "documents": c.get("summary", {}).get("documents", 0),
             "tokenizer": "yes" if (ctx.workspace.corpora / c["name"] / "tokenizer" / "tokenizer.json").is_file() else ""}
            for c in ctx.workspace.list_corpora()]
    return pd.DataFrame(rows, columns=CORPORA_COLUMNS)  # none saved yet: the headers, no blank row


def build(ctx: AppContext) -> None:
    files_state = gr.State([])
    with gr.Row():
        with gr.Column(scale=2):
            uploads = gr.File(label=t("upload"), file_count="multiple",
                              file_types=list(ALLOWED_TYPES))
        with gr.Column(scale=1):
            sample = gr.Dropdown(list(SAMPLES), value=None, label=t("sample"))
            kind = gr.Dropdown(list(KINDS), value="auto", label=t("kind"))
            text_field = gr.Textbox(label=t("text_field"), placeholder="text")
            label_field = gr.Textbox("", label=t("label_field"), placeholder="label", info=t("label_field_info"),
                                     elem_id="corpus-label-field")
            split = gr.Radio([(t("split_paragraph"), "paragraph"), (t("split_line"), "line")], value="paragraph", label=t("split"))
            strict = gr.Checkbox(value=False, label=t("strict"))
    inspect_btn = gr.Button(t("inspect"), variant="primary", elem_id="inspect-btn")
    with gr.Row():
        summary = gr.Markdown(elem_id="corpus-summary")
        histogram = gr.BarPlot(x="length", y="documents", label=t("histogram"), sort=None, height=240,
                               x_title=t("chars_per_doc"), y_title=t("docs_per_bar"), x_label_angle=-35,
                               elem_id="corpus-histogram")
    samples = gr.Dataframe(_samples([]), label=t("samples"), wrap=True, max_height=240, elem_id="corpus-samples")
    problems = gr.Markdown(elem_id="corpus-problems")
    with gr.Row():
        name = gr.Textbox(label=t("corpus_name"), placeholder="my-corpus")
        train_tok = gr.Checkbox(value=False, label=t("train_tokenizer"))
        vocab = gr.Number(value=6400, precision=0, label=t("vocab"))
        save_btn = gr.Button(t("save_corpus"), elem_id="save-corpus-btn")
    saved_msg = gr.Markdown(elem_id="corpus-saved")
    saved = gr.Dataframe(value=lambda: headed(corpora_table(ctx)), label=t("saved_corpora"), interactive=False,
                         elem_id="saved-corpora")

    # the label field comes last, with a default: a client that sends the first six still works
    def inspect_handler(uploads, sample, kind, text_field, split, strict, label_field=""):
        return inspect(ctx, uploads, sample, kind, text_field, split, strict, label_field)

    def save_handler(name, files, kind, text_field, split, strict, train_tok, vocab, label_field=""):
        return save(ctx, name, files, kind, text_field, split, strict, train_tok, vocab, label_field)

    inspect_btn.click(user_errors(inspect_handler),
                      [uploads, sample, kind, text_field, split, strict, label_field],
                      [summary, histogram, samples, problems, files_state], api_name="inspect_corpus")
    save_btn.click(user_errors(save_handler),
                   [name, files_state, kind, text_field, split, strict, train_tok, vocab, label_field],
                   [saved_msg, saved], api_name="save_corpus")

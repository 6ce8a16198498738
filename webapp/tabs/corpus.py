"""Corpus tab: upload files (or pick a sample), see what they hold and every problem,
optionally train a tokenizer, and save them as a named corpus for the Train tab."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import gradio as gr
import pandas as pd

from minimind.data import DataConfig, inspect_corpus
from minimind.data.config import KINDS, SPLITS
from minimind.data.kinds import PARAM_FIELDS
from minimind.data.stats import pair_sample, unit
from minimind.errors import CorpusError

from .. import work
from ..bounded import WorkLimitError
from ..context import SAMPLES, SAMPLES_DIR, AppContext, error_shown, form_number, shown, user_errors, without_paths
from ..errors_zh import KINDS as KIND_WORDS
from ..errors_zh import NOTE, error_zh
from ..i18n import EN, headed, language, t, tr
from ..workspace import ALLOWED_TYPES, WorkspaceError


def _data_config(ctx: AppContext, folder: str, kind, text_field, split, strict, label_field=None) -> DataConfig:
    """How the page reads the files of one upload `folder` (named relative to it, so every message
    names a file as the visitor named it), within the page's decoded-size limit."""
    for name, value in (("text field", text_field), ("label field", label_field)):
        if value is not None and not isinstance(value, str):
            raise WorkspaceError(f"the {name} must be a field name (got {shown(value)})")
    if kind not in KINDS:
        raise WorkspaceError(f"the kind must be one of {', '.join(KINDS)} (got {shown(kind)})")
    if split not in SPLITS:
        raise WorkspaceError(f"split must be one of {', '.join(SPLITS)} (got {shown(split)})")
    return DataConfig(kind=kind, text_field=(text_field or "").strip() or None, split=split, strict=bool(strict),
                      label_field=(label_field or "").strip() or None, max_chars=ctx.bounded.limits.corpus_chars,
                      cache_dir=str(ctx.workspace.cache), root=folder)


def _in_one_folder(ctx: AppContext, files: list[str]) -> tuple[str, list[str]]:
    """(upload folder, file names in it) of the files one inspection stored (stored_files)."""
    folders = {Path(f).parent for f in files}
    if len(folders) != 1 or ctx.workspace.uploads not in next(iter(folders)).parents:
        raise WorkspaceError("inspect the corpus again, then save it")
    return str(folders.pop()), [Path(f).name for f in files]


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


def sample_license(file: str) -> str:
    """The license file of a bundled sample (samples/README.md): only its own goes beside it, so an
    export's card states that one license, not every sample's together."""
    return "LICENSE.shakespeare" if file.startswith("shakespeare") else "LICENSE.chinese-poetry"


def stored_files(ctx: AppContext, uploads, sample: str | None) -> list[str]:
    """Copy uploads (or the chosen sample, with its license) into the workspace; return their paths.

    Every upload is checked before any is read or copied: only files this server received."""
    received = [ctx.uploads.accept(item) for item in uploads or []]
    paths = [str(p) for p in ctx.workspace.store_uploads([(path, path.name) for path in received])] if received else []
    if not paths and sample:
        if not isinstance(sample, str) or sample not in SAMPLES:
            raise WorkspaceError(f"unknown sample {shown(sample)}")
        stored = ctx.workspace.store_upload(SAMPLES_DIR / SAMPLES[sample])
        license_file = SAMPLES_DIR / sample_license(SAMPLES[sample])
        shutil.copyfile(license_file, stored.parent / license_file.name)
        paths.append(str(stored))
    if not paths:
        raise WorkspaceError("upload at least one file or pick a sample (an upload counts once the file shows its size)")
    return paths


def _tokenizer_folders(ctx: AppContext) -> dict[str, str]:
    """Shipped model name -> its folder, for those with a tokenizer."""
    return {name: str(path) for name, path in ctx.shipped().items() if (path / "tokenizer.json").is_file()}


def inspect(ctx: AppContext, uploads, sample, kind, text_field, split, strict, label_field=None):
    """(summary, histogram, samples, problems, stored files) for the page. A labelled corpus (text
    and label fields, for a classifier) lists its classes with their documents. The files are read
    in a bounded child (webapp.bounded); what they hold that cannot be used is a problem listed."""
    files = stored_files(ctx, uploads, sample)
    folder, names = _in_one_folder(ctx, files)
    config = _data_config(ctx, folder, kind, text_field, split, strict, label_field)
    tokenizers = _tokenizer_folders(ctx)
    try:
        stats, spelled, counting = ctx.bounded.run(work.inspect_files, names, config, tokenizers,
                                                   what="reading the corpus")
    except (CorpusError, WorkLimitError) as err:
        return (tr("corpus_unusable"), _histogram_plot(None), headed(_samples([])), f"❌ {error_shown(str(err))}",
                files)
    units = unit(stats.kind)
    count_key = f"c_{units}" if f"c_{units}" in UNIT_WORDS else "c_documents"
    rows = [tr("c_kind", kind=stats.kind), tr(count_key, n=f"{stats.documents:,}"),
            tr("c_characters", n=f"{stats.characters:,}")]
    if stats.tokens is not None:
        rows += [tr("c_tokens", n=f"{stats.tokens:,}", model=counting),
                 tr("c_chars_per_token", v=f"{stats.chars_per_token:.2f}")]
    for name, part in stats.parts.items():
        rows.append(part_row(name, part, stats.part_tokens.get(name)))
    if stats.kind == "prompts":  # for GRPO: what the rewards can check beyond the text
        asks = ", ".join(f"{name} {n:,}" for name, n in stats.params.items()) or tr("none")
        rows.append(tr("c_reward_fields", asks=asks))
    rows += class_rows(stats.classes or {})
    rows += [f"- {Path(f.name).name}: {f.format}, {f.encoding or tr('binary')}, {f.documents:,} {unit_word(units)}"
             for f in stats.files]
    rows += coverage_rows(spelled)
    problems = []
    zh = language() == "zh"  # the library's words about the files: in Chinese where errors_zh knows them
    if stats.skipped_count:
        problems.append(tr("c_skipped", n=f"{stats.skipped_count:,}"))
        problems += [f"- {error_zh(without_paths(str(s)), lead=None) if zh else without_paths(str(s))}"
                     for s in stats.skipped]
    problems += [f"- ⚠️ {error_zh(without_paths(w), lead=NOTE) if zh else without_paths(w)}" for w in stats.warnings]
    if stats.empty:
        problems.append(tr("c_empty", n=f"{stats.empty:,}"))
    return ("\n\n".join(rows), _histogram_plot(stats.length_histogram),
            headed(_samples(stats.samples, stats.kind)), "\n".join(problems) or tr("c_no_problems"), files)


def part_row(name: str, part, tokens=None) -> str:
    """A preference pair's (or prompt's) part: its mean and longest length, in characters (and tokens)."""
    if language() != "zh":
        return f"**{name.capitalize()}:** {part}" + (f"; {tokens}" if tokens else "")
    said = [tr("c_part", name=tr(f"col_{name}") if f"col_{name}" in EN else name, mean=f"{part.mean:,.1f}",
               unit=tr(f"unit_{part.unit}") if f"unit_{part.unit}" in EN else part.unit, longest=f"{part.max:,}")]
    if tokens:
        said.append(f"{tokens.mean:,.1f} / {tokens.max:,} "
                    + (tr(f"unit_{tokens.unit}") if f"unit_{tokens.unit}" in EN else tokens.unit))
    return "；".join(said)


def coverage_rows(spelled: dict[str, work.CoverageFacts]) -> list[str]:
    """For each shipped model: the share of the corpus's characters its tokenizer writes in byte
    pieces, characters per token, and (when it matters) how many frequent characters a vocabulary
    extension would add (minimind.vocabulary)."""
    from minimind.vocabulary import MIN_COUNT

    rows = []
    for name, facts in spelled.items():
        line = tr("c_coverage", model=name, share=f"{100 * facts.share:.1f}", cpt=f"{facts.chars_per_token:.2f}")
        if facts.worth_adding:
            line += tr("c_coverage_missing", n=f"{facts.worth_adding:,}", k=MIN_COUNT)
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


MIN_VOCAB, MAX_VOCAB = 262, 65_536  # 256 bytes + special tokens + one merge; a small model's largest


def save(ctx: AppContext, name, files, kind, text_field, split, strict, train_tok, vocab, label_field=None):
    """Save the inspected files as a named corpus (and train its tokenizer when asked). A labelled
    corpus keeps its label field and classes (the Train tab offers it the classification task).
    Reading and tokenizer training run in bounded children; a corpus whose tokenizer fails is not
    saved (nor is an earlier corpus of that name touched)."""
    if not files:
        raise WorkspaceError("inspect a corpus first, then save it")
    if name is not None and not isinstance(name, str):
        raise WorkspaceError(f"the corpus name must be text (got {shown(name)})")
    vocab_size = form_number(vocab, "the tokenizer's vocabulary", MIN_VOCAB, MAX_VOCAB, whole=True) if train_tok else 0
    folder, names = _in_one_folder(ctx, files)
    config = _data_config(ctx, folder, kind, text_field, split, strict, label_field)
    stats = ctx.bounded.run(inspect_corpus, names, config, what="reading the corpus")  # the inspection's cache
    settings = {"kind": kind, "text_field": config.text_field, "split": split, "strict": bool(strict)}
    if config.label_field:
        settings["label_field"] = config.label_field
    summary = {"kind": stats.kind, "documents": stats.documents, "characters": stats.characters}
    if stats.classes:
        summary["classes"] = dict(stats.classes)
    trained = report = None
    if train_tok:
        trained = Path(tempfile.mkdtemp(prefix="tokenizer-", dir=ctx.workspace.cache))
        try:
            report = ctx.bounded.run(work.train_corpus_tokenizer, files, vocab_size, str(trained), config.text_field,
                                     what="training the tokenizer")
        except BaseException:
            shutil.rmtree(trained, ignore_errors=True)
            raise
    saved = ctx.workspace.save_corpus(name or Path(files[0]).stem, [Path(f) for f in files], settings, summary)
    message = tr("c_saved", name=saved.name, n=f"{stats.documents:,}", units=unit_word(unit(stats.kind)))
    if trained is not None:
        shutil.move(str(trained), saved / "tokenizer")
        message += tr("c_tokenizer", vocab=f"{report.vocab_size:,}", cpt=f"{report.chars_per_token:.2f}",
                      seconds=f"{report.seconds:.1f}")
    return message, headed(corpora_table(ctx))


def corpora_table(ctx: AppContext) -> pd.DataFrame:
    zh = language() == "zh"
    rows = [{"corpus": c["name"], "kind": kind_word(c.get("summary", {}).get("kind", ""), zh),
             "documents": c.get("summary", {}).get("documents", 0),
             "tokenizer": tr("yes") if (ctx.workspace.corpora / c["name"] / "tokenizer" / "tokenizer.json").is_file()
             else ""}
            for c in ctx.workspace.list_corpora()]
    return pd.DataFrame(rows, columns=CORPORA_COLUMNS)  # none saved yet: the headers, no blank row


def kind_word(kind: str, zh: bool) -> str:
    """A corpus kind (text, chat, ...) in the page's words."""
    return KIND_WORDS.get(kind, kind) if zh else kind


def sample_choices() -> list[tuple]:
    """The bundled samples: (label translated in the browser, the sample's name the handlers take)."""
    return [(t(f"sample_{Path(file).stem}") if f"sample_{Path(file).stem}" in EN else name, name)
            for name, file in SAMPLES.items()]


def build(ctx: AppContext) -> None:
    files_state = gr.State([])
    with gr.Row():
        with gr.Column(scale=2):
            uploads = gr.File(label=t("upload"), file_count="multiple",
                              file_types=list(ALLOWED_TYPES), elem_id="corpus-upload")
        with gr.Column(scale=1):
            sample = gr.Dropdown(sample_choices(), value=None, label=t("sample"))
            kind = gr.Dropdown([(t(f"kind_{k}"), k) for k in KINDS], value="auto", label=t("kind"))
            text_field = gr.Textbox(label=t("text_field"), placeholder="text")
            label_field = gr.Textbox("", label=t("label_field"), placeholder="label", info=t("label_field_info"),
                                     elem_id="corpus-label-field")
            split = gr.Radio([(t(f"split_{s}"), s) for s in SPLITS], value="section", label=t("split"),
                             info=t("split_info"))
            strict = gr.Checkbox(value=False, label=t("strict"))
    inspect_btn = gr.Button(t("inspect"), variant="primary", elem_id="inspect-btn")
    with gr.Row():
        summary = gr.Markdown(elem_id="corpus-summary")
        histogram = gr.BarPlot(x="length", y="documents", label=t("histogram"), sort=None, height=240,
                               x_title=t("chars_per_doc"), y_title=t("docs_per_bar"), x_label_angle=-35,
                               elem_id="corpus-histogram")
    samples = gr.Dataframe(lambda: headed(_samples([])), label=t("samples"), wrap=True, max_height=240,
                           elem_id="corpus-samples")
    problems = gr.Markdown(elem_id="corpus-problems")
    with gr.Row():
        name = gr.Textbox(label=t("corpus_name"), placeholder="my-corpus")
        train_tok = gr.Checkbox(value=False, label=t("train_tokenizer"))
        vocab = gr.Number(value=6400, label=t("vocab"))  # no precision: odd values reach form_number, which names them
        save_btn = gr.Button(t("save_corpus"), elem_id="save-corpus-btn")
    saved_msg = gr.Markdown(elem_id="corpus-saved")
    saved = gr.Dataframe(value=lambda: headed(corpora_table(ctx)), label=t("saved_corpora"), interactive=False,
                         elem_id="saved-corpora")

    # the API's parameters are these handlers' own; the label field comes last, with a default: a
    # client that sends the first six still works. Files or a sample, and the text field, are optional
    def inspect_handler(uploads=None, sample=None, kind="auto", text_field=None, split="section", strict=False,
                        label_field=""):
        """Read uploaded corpus files (or a bundled sample): their kind, statistics, samples and errors."""
        return inspect(ctx, uploads, sample, kind, text_field, split, strict, label_field)

    def save_handler(name=None, files=None, kind="auto", text_field=None, split="section", strict=False,
                     train_tok=False, vocab=6400, label_field=""):
        """Save the corpus inspected last (in this session) under a name."""
        return save(ctx, name, files, kind, text_field, split, strict, train_tok, vocab, label_field)

    inspect_btn.click(user_errors(inspect_handler),
                      [uploads, sample, kind, text_field, split, strict, label_field],
                      [summary, histogram, samples, problems, files_state], api_name="inspect_corpus",
                      api_description="Read corpus files (`uploads`, or the bundled `sample` by name) as `kind`: "
                                      "a summary, the length histogram, samples and the problems found. "
                                      "/save_corpus then saves them.")
    save_btn.click(user_errors(save_handler),
                   [name, files_state, kind, text_field, split, strict, train_tok, vocab, label_field],
                   [saved_msg, saved], api_name="save_corpus",
                   api_description="Save the files /inspect_corpus read last in this session as corpus `name` "
                                   "(with a tokenizer of `vocab` tokens when `train_tok`): a message and the "
                                   "saved corpora.")

"""Export tab: pick a model and formats; every export is reloaded and scored, shown as a
table (size, held-out perplexity beside the source model's on the same text, change against
the source; for a classifier, held-out accuracy beside the source's and how many texts get
the source's label) and offered for download under the model's or run's name.

The held-out text is the uploaded file (a labelled file also scores a classifier's accuracy),
else the model's own held-out text (its run's validation split, else the sample a shipped
checkpoint carries; see `minimind.export.heldout`). A classifier exports as ONNX only: picking
one checks the ONNX formats."""

from __future__ import annotations

import shutil
from pathlib import Path

import gradio as gr
import pandas as pd

from minimind.checkpoint import is_classifier
from minimind.export import FORMATS, export_many
from minimind.export.heldout import read_held_out, sanitize

from minimind.errors import MiniMindError

from ..context import AppContext, user_errors, without_paths
from ..downloads import download_list
from ..errors_zh import HELD_OUT, error_zh
from ..i18n import headed, language, t, tr
from . import publish

DEFAULT_FORMATS = ["hf", "gguf-q8_0"]
COLUMNS = ["format", "file", "size MB", "perplexity", "source perplexity", "delta %", "greedy match", "status"]
CLASSIFIER_COLUMNS = ["format", "file", "size MB", "accuracy %", "source accuracy %", "delta pt",
                      "labels as source", "status"]


def empty_table() -> pd.DataFrame:
    return pd.DataFrame(columns=COLUMNS)


def export_name(model_id: str) -> str:
    """The name downloads carry: the shipped model's name or the run's id, file-name safe."""
    return sanitize(str(model_id).partition(":")[2] or str(model_id))


def _eval_text(ctx: AppContext, eval_file) -> tuple[list[str] | None, str | None, list[str] | None]:
    """(held-out texts, file name, labels or None): the uploaded file's, else Nones (the model's own
    held-out text)."""
    if eval_file:
        path = ctx.workspace.store_upload(ctx.uploads.accept(eval_file))
        docs, labels = ctx.bounded.run(read_held_out, str(path), what="reading the held-out file")
        return docs, path.name, labels
    return None, None, None


def _said(error: str) -> str:
    """An export's error in the request's language (errors_zh knows the common ones)."""
    return error_zh(error, lead=None) if error and language() == "zh" else error


def _row(r, download: Path | None, classifier: bool) -> dict:
    row = {"format": r.format, "file": download.name if download else "",
           "size MB": round(r.size_bytes / 2**20, 2) if r.size_bytes else None,
           "status": tr("x_verified") if r.verified else tr("x_failed", error=_said(without_paths(r.error or "")))}
    if classifier:
        known = r.accuracy is not None
        return {**row, "accuracy %": round(100 * r.accuracy, 2) if known else None,
                "source accuracy %": round(100 * r.source_accuracy, 2) if known else None,
                "delta pt": round(100 * (r.accuracy - r.source_accuracy), 2) if known else None,
                "labels as source": f"{r.labels_agree}/{r.labels_total}" if r.labels_total else ""}
    return {**row, "perplexity": round(r.perplexity, 3) if r.perplexity else None,
            "source perplexity": round(r.source_perplexity, 3) if r.source_perplexity else None,
            "delta %": round(100 * r.delta, 2) if r.delta is not None else None,
            "greedy match": f"{r.greedy_match}/{r.greedy_tokens}" if r.greedy_tokens else ""}


def run_export(ctx: AppContext, model_id, formats, eval_file):
    docs, eval_name, labels = _eval_text(ctx, eval_file)  # a file that was not uploaded here is refused first
    folder = ctx.model_folder(model_id)
    if not formats:
        raise gr.Error("choose at least one format", print_exception=False)
    classifier = is_classifier(folder)
    name = export_name(model_id)
    out_root = ctx.workspace.new_export_dir(name)
    results = export_many(str(folder), formats, out_root, eval_text=docs, eval_name=eval_name,
                          eval_labels=labels, name=name)
    rows, downloads = [], []
    for r in results:
        download = _downloadable(r, name) if r.verified else None
        rows.append(_row(r, download, classifier))
        if download:
            downloads.append(download)
    text = next((r.eval_name for r in results if r.eval_name), None)
    if text and language() == "zh":
        text = HELD_OUT.say(text) or text
    message = tr("x_written", folder=out_root.relative_to(ctx.workspace.root))
    if text and classifier:
        accuracy = next((r.source_accuracy for r in results if r.source_accuracy is not None), None)
        message += (tr("x_accuracy_source", text=text, source=f"{accuracy:.2%}") if accuracy is not None
                    else tr("x_labels_only", text=text))
    elif text:
        source = next((r.source_perplexity for r in results if r.source_perplexity), None)
        message += (tr("x_measured_source", text=text, source=f"{source:.4g}") if source
                    else tr("x_measured", text=text))
    columns = CLASSIFIER_COLUMNS if classifier else COLUMNS
    return headed(pd.DataFrame(rows, columns=columns)), download_list(ctx.workspace, downloads, tr("downloads")), message


def formats_for(ctx: AppContext, model_id):
    """The formats' field for a newly picked model: a classifier checks the ONNX formats (the only
    ones that hold it) and says so; a language model keeps what the user checked."""
    try:
        classifier = is_classifier(ctx.model_folder(model_id))
    except MiniMindError:
        classifier = False
    if classifier:
        return gr.update(value=[f for f in FORMATS if f.startswith("onnx")][:1], info=tr("formats_classifier"))
    return gr.update(info=tr("formats_info"))


def _downloadable(result, name: str) -> Path:
    """A GGUF file as is (already named after the model); a folder format as one zip archive
    beside it, `<name>-<format>.zip`."""
    if Path(result.path).is_file():
        return Path(result.path)
    base = Path(result.folder).parent / f"{name}-{result.format}"
    return Path(shutil.make_archive(str(base), "zip", root_dir=result.folder))


def build(ctx: AppContext) -> None:
    choices = ctx.model_choices()
    with gr.Row():
        model = gr.Dropdown(choices, value=choices[0][1] if choices else None, label=t("model"),
                            elem_id="export-model", scale=2, allow_custom_value=True)
        formats = gr.CheckboxGroup(list(FORMATS), value=DEFAULT_FORMATS, label=t("formats"),
                                   info=t("formats_info"), elem_id="export-formats", scale=3)
    eval_file = gr.File(label=t("eval_file_info"), file_count="single",
                        file_types=[".txt", ".md", ".jsonl", ".json", ".csv", ".tsv", ".parquet"])
    go = gr.Button(t("export"), variant="primary", elem_id="export-btn")
    message = gr.Markdown(elem_id="export-message")
    table = gr.Dataframe(lambda: headed(empty_table()), label=t("results"), interactive=False, elem_id="export-table")
    files = gr.HTML(label=t("downloads"), elem_id="export-files")  # links to /downloads (downloads.py)

    def export(model, formats=DEFAULT_FORMATS, eval_file=None):
        """Export a model in the chosen formats, each reloaded and scored."""
        return run_export(ctx, model, formats, eval_file)

    go.click(user_errors(export), [model, formats, eval_file], [table, files, message], api_name="export",
             api_description="Export `model` in `formats` (each reloaded and scored on held-out text: `eval_file`, "
                             "else the model's own): the results table, the download links and a message.")
    model.focus(lambda: gr.update(choices=ctx.model_choices()), None, [model], api_name=False)
    model.change(user_errors(lambda m: formats_for(ctx, m)), [model], [formats], api_name=False)
    publish.build(ctx, after=message)  # Publish to the Hugging Face Hub (tabs/publish.py)

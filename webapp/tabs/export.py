"""Export tab: pick a model and formats; every export is reloaded and scored, shown as a
table (size, held-out perplexity beside the source model's on the same text, change against
the source) and offered for download under the model's or run's name.

The held-out text is the uploaded file, else the model's own held-out text (its run's
validation split, else the sample a shipped checkpoint carries; see
`minimind.export.heldout`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import gradio as gr
import pandas as pd

from minimind.export import FORMATS, export_many
from minimind.export.heldout import sanitize

from ..context import AppContext, user_errors
from ..i18n import headed, t, tr

DEFAULT_FORMATS = ["hf", "gguf-q8_0"]
COLUMNS = ["format", "file", "size MB", "perplexity", "source perplexity", "delta %", "greedy match", "status"]


def empty_table() -> pd.DataFrame:
    return pd.DataFrame(columns=COLUMNS)


def export_name(model_id: str) -> str:
    """The name downloads carry: the shipped model's name or the run's id, file-name safe."""
    return sanitize(str(model_id).partition(":")[2] or str(model_id))


def _eval_text(ctx: AppContext, eval_file) -> tuple[list[str] | None, str]:
    """Held-out documents: the uploaded file's, else None (the model's own held-out text)."""
    from minimind.data import iter_texts

    if eval_file:
        path = ctx.workspace.store_upload(ctx.uploads.accept(eval_file))
        docs = []
        for text in iter_texts([str(path)]):
            docs.append(text)
            if sum(map(len, docs)) > 20_000:
                break
        return docs, path.name
    return None, None


def run_export(ctx: AppContext, model_id, formats, eval_file):
    docs, eval_name = _eval_text(ctx, eval_file)  # a file that was not uploaded here is refused first
    folder = ctx.model_folder(model_id)
    if not formats:
        raise gr.Error("choose at least one format", print_exception=False)
    name = export_name(model_id)
    out_root = ctx.workspace.new_export_dir(name)
    results = export_many(str(folder), formats, out_root, eval_text=docs, eval_name=eval_name, name=name)
    rows, downloads = [], []
    for r in results:
        download = _downloadable(r, name) if r.verified else None
        rows.append({"format": r.format, "file": download.name if download else "",
                     "size MB": round(r.size_bytes / 2**20, 2) if r.size_bytes else None,
                     "perplexity": round(r.perplexity, 3) if r.perplexity else None,
                     "source perplexity": round(r.source_perplexity, 3) if r.source_perplexity else None,
                     "delta %": round(100 * r.delta, 2) if r.delta is not None else None,
                     "greedy match": f"{r.greedy_match}/{r.greedy_tokens}" if r.greedy_tokens else "",
                     "status": tr("x_verified") if r.verified else tr("x_failed", error=r.error)})
        if download:
            downloads.append(str(download))
    text = next((r.eval_name for r in results if r.eval_name), None)
    source = next((r.source_perplexity for r in results if r.source_perplexity), None)
    message = tr("x_written", folder=out_root.relative_to(ctx.workspace.root))
    if text:
        message += (tr("x_measured_source", text=text, source=f"{source:.4g}") if source
                    else tr("x_measured", text=text))
    return headed(pd.DataFrame(rows, columns=COLUMNS)), downloads, message


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
                                   elem_id="export-formats", scale=3)
    eval_file = gr.File(label=t("eval_file_info"), file_count="single",
                        file_types=[".txt", ".md", ".jsonl", ".json", ".csv", ".parquet"])
    go = gr.Button(t("export"), variant="primary", elem_id="export-btn")
    message = gr.Markdown(elem_id="export-message")
    table = gr.Dataframe(lambda: headed(empty_table()), label=t("results"), interactive=False, elem_id="export-table")
    files = gr.File(label=t("downloads"), file_count="multiple", interactive=False, elem_id="export-files")
    go.click(user_errors(lambda *a: run_export(ctx, *a)), [model, formats, eval_file], [table, files, message],
             api_name="export")
    model.focus(lambda: gr.update(choices=ctx.model_choices()), None, [model], api_name=False)

"""The Export tab's "Publish to the Hugging Face Hub" section: one format's folder of an export in
this workspace goes up as a model repo (minimind.hub.publish), private unless the box is unchecked.

The token: the one typed in the section's password field, else the server's own (HF_TOKEN, or the
login huggingface_hub saved) — but never the server's on a public page anyone can use (a Space
without a login): there any visitor could publish into the owner's account, so only a token the
visitor types is used. A typed token lives only in the request that publishes: it is no gr.State,
is written nowhere (workspace, log) and no message repeats it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import gradio as gr

from minimind.hub.publish import is_export, publish

from ..context import AppContext, shown, user_errors
from ..i18n import t, tr
from ..workspace import Workspace, WorkspaceError, safe_name

MAX_LISTED = 50  # the newest exports offered; older ones stay on disk


def export_folders(ws: Workspace) -> list[str]:
    """Every format folder of an export in the workspace ("<export>/<format>"), newest first."""
    found = []
    for export in (p for p in ws.exports.iterdir() if _listed(p)):
        for folder in (p for p in export.iterdir() if _listed(p)):
            if is_export(folder):
                found.append((folder.stat().st_mtime, f"{export.name}/{folder.name}"))
    return [name for _, name in sorted(found, reverse=True)[:MAX_LISTED]]


def _listed(path: Path) -> bool:
    """A folder the list may offer: no link (it may lead out of the workspace), no half-written one."""
    return path.is_dir() and not path.is_symlink() and not path.name.startswith(".")


def export_folder(ws: Workspace, name) -> Path:
    """The folder of an export named as export_folders names it; WorkspaceError for anything else
    (a caller names exports by name, never by path)."""
    if not name or not isinstance(name, str):
        raise WorkspaceError("choose an export to publish (export a model above first)")
    refusal = WorkspaceError(f"no export named {shown(name)}: choose one from the list")
    parts = name.split("/")
    try:
        if len(parts) != 2 or any(part != safe_name(part) for part in parts):
            raise refusal
    except WorkspaceError:
        raise refusal from None
    expected = ws.exports.resolve().joinpath(*parts)
    try:
        real = expected.resolve(strict=True)
    except (OSError, RuntimeError):
        raise refusal from None
    if real != expected or not is_export(real):  # a link leads elsewhere; a folder that is no export
        raise refusal
    return real


def open_to_all(ctx: AppContext) -> bool:
    """Whether anyone on the internet may use this page: a public Space without a login (the
    page's warning says so, gate.Access.open_to_all), or SPACE_ID set and no MINIMIND_AUTH."""
    return bool(ctx.public_warning) or (bool(os.environ.get("SPACE_ID")) and not os.environ.get("MINIMIND_AUTH"))


def token_info(ctx: AppContext):
    """The token field's note: which token is used on this server."""
    if open_to_all(ctx):
        return t("pub_token_info_public")
    return t("pub_token_info_env") if os.environ.get("HF_TOKEN") else t("pub_token_info_none")


def run_publish(ctx: AppContext, name, repo_id, private, token) -> str:
    """Publish the chosen export; the message names it by its workspace name and links the repo."""
    folder = export_folder(ctx.workspace, name)
    private = private is not False  # private unless the box is unchecked (an API caller may send nothing)
    url = publish(folder, repo_id if isinstance(repo_id, str) else "", token=token if isinstance(token, str) else None,
                  private=private, server_token=not open_to_all(ctx), label=name)
    return tr("pub_done_private" if private else "pub_done_public", folder=name, url=url)


_WRITTEN = re.compile(r"`exports/([^`/]+)`")  # the export message names its folder (i18n x_written)


def refreshed(ctx: AppContext, current=None):
    """The folder field's list brought up to date, the chosen export kept (else the newest)."""
    names = export_folders(ctx.workspace)
    return gr.update(choices=names, value=current if current in names else (names[0] if names else None))


def just_written(ctx: AppContext, message: str | None):
    """The folder field after an export: the one this session just wrote (its folder is named in
    the Export button's message) chosen when it can be published, else the newest."""
    names = export_folders(ctx.workspace)
    written = _WRITTEN.search(message or "")
    chosen = next((n for n in names if written and n.startswith(written.group(1) + "/")), None)
    return gr.update(choices=names, value=chosen or (names[0] if names else None))


def build(ctx: AppContext, after: gr.components.Component | None = None) -> None:
    """The section, under the Export tab's results; `after` (the export's message) refreshes the
    folder list when an export is written."""
    names = export_folders(ctx.workspace)
    with gr.Accordion(t("pub_title"), open=True, elem_id="publish-section"):
        with gr.Row():
            folder = gr.Dropdown(names, value=names[0] if names else None, label=t("pub_folder"),
                                 info=t("pub_folder_info"), allow_custom_value=True, elem_id="publish-folder", scale=2)
            repo = gr.Textbox(label=t("pub_repo"), placeholder="your-name/minimind-tang", elem_id="publish-repo",
                              scale=2)
        with gr.Row():
            private = gr.Checkbox(True, label=t("pub_private"), info=t("pub_private_info"), elem_id="publish-private")
            token = gr.Textbox(label=t("pub_token"), type="password", info=token_info(ctx), elem_id="publish-token",
                               html_attributes=gr.InputHTMLAttributes(autocomplete="off"), scale=2)
        go = gr.Button(t("pub_button"), elem_id="publish-btn")
        said = gr.Markdown(elem_id="publish-message")

    def publish_export(export: str, repo_id: str, private: bool = True, token: str | None = None) -> str:
        """Publish one format's folder of an export to a Hugging Face Hub model repo (private unless
        `private` is false); `token`: a write token, else the server's own where the page allows it."""
        return run_publish(ctx, export, repo_id, private, token)

    go.click(user_errors(publish_export), [folder, repo, private, token], [said], api_name="publish",
             api_description="Publish an export (`export`: a name from the folder list, \"<export>/<format>\") to "
                             "the Hub repo `repo_id`, private unless `private` is false; the repo's link.")
    folder.focus(lambda current: refreshed(ctx, current), [folder], [folder], api_name=False)
    if after is not None:
        after.change(lambda message: just_written(ctx, message), [after], [folder], api_name=False)

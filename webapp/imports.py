"""Bring your own model on the page: a Hugging Face model id (or, off a public Space, a folder on this
machine) imported into the workspace's `models/` (minimind.hub), where every tab offers it as
`imported:<name>`.

An import writes into a hidden folder and renames it when complete, so a half-fetched model is never
offered and two visitors importing the same model cannot mix their files. A Hub download is capped
by MINIMIND_MAX_MODEL_GB (4 by default on the page) and reports its progress as it goes.
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from minimind.hub import import_model, is_model_id, max_model_gb

from .workspace import Workspace, WorkspaceError, safe_name


def import_name(source: str) -> str:
    """The workspace name of an import: owner--name for a Hub id, the folder's name otherwise."""
    return safe_name(source.replace("/", "--") if is_model_id(source) else Path(source).name)


def check_source(source, local_folders: bool) -> str:
    """The source as typed, trimmed; WorkspaceError for nothing, or a folder where only Hub ids are allowed."""
    source = source.strip() if isinstance(source, str) else ""
    if not source:
        raise WorkspaceError("type a Hugging Face model id (owner/name, e.g. HuggingFaceTB/SmolLM2-135M-Instruct)"
                             + (" or a model folder on this machine" if local_folders else ""))
    if not is_model_id(source) and not local_folders:
        raise WorkspaceError(f"{source!r} is not a Hugging Face model id (owner/name); this public page imports "
                             "from the Hub only")
    return source


def import_into(workspace: Workspace, source: str, local_folders: bool, progress=None) -> tuple[str, bool]:
    """(model id, imported now) for `source`: an existing import of the same name is reused."""
    source = check_source(source, local_folders)
    name = import_name(source)
    if name in workspace.imported_models():
        return f"imported:{name}", False
    scratch = Path(tempfile.mkdtemp(prefix=".import-", dir=workspace.models))
    try:
        # a folder is named by its own name: the page never shows a server path
        import_model(source, scratch / name, max_gb=max_model_gb(), progress=progress, label=name)
        try:
            os.replace(scratch / name, workspace.models / name)
        except OSError:  # someone else's import of the same model finished first: theirs stays
            if name not in workspace.imported_models():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return f"imported:{name}", True


def import_steps(workspace: Workspace, source: str, local_folders: bool) -> Iterator[tuple[str, str | None]]:
    """(progress line, None) while an import runs, then (what was imported, model id). Errors are raised
    as they are (the page shows a MiniMindError's message)."""
    updates: queue.SimpleQueue = queue.SimpleQueue()
    outcome: dict = {}

    def work() -> None:
        try:
            outcome["result"] = import_into(workspace, source, local_folders,
                                            lambda done, total, name: updates.put((done, total, name)))
        except BaseException as err:  # handed to the page's thread, raised there
            outcome["error"] = err
        finally:
            updates.put(None)

    threading.Thread(target=work, name="model-import", daemon=True).start()
    while (update := updates.get()) is not None:
        done, total, name = update
        if name:
            yield f"fetching `{name}` · {done / 1e6:,.1f} of {total / 1e6:,.1f} MB", None
    if "error" in outcome:
        raise outcome["error"]
    model_id, fresh = outcome["result"]
    yield (f"imported `{model_id}`" if fresh else f"`{model_id}` was already imported"), model_id

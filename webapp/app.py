"""The MiniMind Studio server: a Gradio page (Corpus, Train, Chat, Export) and the
OpenAI-compatible API under /v1, in one FastAPI app."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from pathlib import Path

import gradio as gr
from fastapi import FastAPI

from minimind.registry import ModelRegistry
from minimind.serving import create_app
from minimind.serving.guards import BodyLimit, StreamLimit, max_request_bytes, too_large
from minimind.serving.throttle import LoginThrottle

from .api import add_classify_routes
from .bounded import BoundedWork, WorkLimits, start_server
from .context import AppContext
from .downloads import add_download_route
from .gate import Access, Gate, gradio_session_user
from .i18n import EN, I18N, english, t
from .jobs import JobManager
from .tabs import chat, corpus, export, train
from .uploads import OnlyReceivedFiles, form_fields_within_limit
from .workspace import Workspace

log = logging.getLogger(__name__)
UPLOAD_ROUTE = "/gradio_api/upload"  # Gradio's upload: bounded by the upload limit instead, streamed to disk

CSS = """
.mm-progress { width: 100%; height: 14px; background: #e5e7eb; border-radius: 7px; overflow: hidden; }
.mm-progress > div { height: 100%; background: #6366f1; transition: width .5s; }
/* an error pop-up's title: Gradio writes "Error" whatever the page's language; a Chinese page says 出错了 */
html:lang(zh) .toast-title.error { font-size: 0; gap: var(--size-1); }
html:lang(zh) .toast-title.error::before { content: "出错了"; font-size: var(--text-lg); }
html:lang(zh) .toast-title.error > * { font-size: var(--text-lg); }
/* a box kept in the page but not shown (a plot Gradio must not unmount: its resize watchers outlive it) */
.mm-hidden { display: none !important; }
"""


# what the API calls the inputs and outputs that have no fixed label on the page (a Markdown line, a
# chat pane headed by the model that answers in it), by elem_id; every other one goes by its English label
API_LABELS = {
    "corpus-summary": "summary", "corpus-problems": "problems", "corpus-saved": "message",
    "estimate": "estimate", "train-message": "message", "train-progress": "progress", "train-facts": "facts",
    "train-queue": "queue", "confusion-line": "confusion_summary", "import-status": "status",
    "chatbot": "conversation", "chatbot-b": "conversation_b", "try-label": "probabilities",
    "try-label-b": "probabilities_b", "export-message": "message", "publish-message": "message",
}


class StudioBlocks(gr.Blocks):
    """The page's Blocks, whose API docs (Gradio's "Use via API" page, gradio_client's view_api) name
    every parameter and output in plain English: a label the browser translates is given as its
    English text (the page keeps the key and speaks Chinese), a component with no fixed label by
    API_LABELS, else by its elem_id (never Gradio's value_<n>)."""

    def get_api_info(self, all_endpoints: bool = False, page: str | None = None):
        info = super().get_api_info(all_endpoints=all_endpoints, page=page)
        events = {f"/{fn.api_name}": fn for fn in self.fns.values()}
        for name, endpoint in info["named_endpoints"].items():
            fn = events[name]
            for entries, blocks in ((endpoint["parameters"], fn.inputs), (endpoint["returns"], fn.outputs)):
                shown = [block for block in blocks if not block.skip_api]  # the ones Gradio lists, in order
                for entry, block in zip(entries, shown, strict=True):
                    entry["label"] = api_label(block, entry["label"])
        return info


def api_label(block, label) -> str:
    """What the API docs call one input or output of an event (see StudioBlocks)."""
    if block.elem_id in API_LABELS:
        return API_LABELS[block.elem_id]
    if getattr(block, "label", None) is None and block.elem_id:  # Gradio would say value_<id>
        return block.elem_id.replace("-", "_")
    return english(label)


def hide_load_events(blocks: gr.Blocks) -> None:
    """A component whose value is a function (a table filled when the page opens) gets a load event
    that Gradio would list in the API as /lambda, /lambda_1...: the page's own wiring, not an
    endpoint, so it is kept out of the API docs as every other internal event is (api_name=False)."""
    for block in blocks.blocks.values():
        event = getattr(block, "load_event", None)
        if event:
            blocks.fns[event["id"]].api_visibility = "private"


def build_blocks(ctx: AppContext) -> gr.Blocks:
    with StudioBlocks(title="MiniMind Studio") as blocks:
        gr.Markdown(f"# {EN_TITLE}", elem_id="title")
        if ctx.public_warning:
            gr.Markdown(f"⚠️ **{ctx.public_warning}**", elem_id="public-warning")
        gr.Markdown(t("subtitle"))
        with gr.Tabs():
            with gr.Tab(t("tab_corpus"), id="corpus", elem_id="tab-corpus"):
                corpus.build(ctx)
            with gr.Tab(t("tab_train"), id="train", elem_id="tab-train"):
                train.build(ctx)
            with gr.Tab(t("tab_chat"), id="chat", elem_id="tab-chat"):
                chat.build(ctx)
            with gr.Tab(t("tab_export"), id="export", elem_id="tab-export"):
                export.build(ctx)
        with gr.Accordion(t("api"), open=False, elem_id="api-panel"):
            gr.Markdown(t("api_help"), elem_id="api-help")
    hide_load_events(blocks)
    return blocks


EN_TITLE = "MiniMind Studio · MiniMind 工作室"
API_HELP = EN["api_help"]  # the API panel (its Chinese: ZH["api_help"], shown by the browser's locale)


def sync_registry(ctx: AppContext, registry: ModelRegistry) -> None:
    """Serve every shipped model, imported model (as imported-<name>) and finished run under a stable name
    (runs as run-<id>). A classifier writes no text: /api/classify serves it, /v1 does not."""
    from minimind.checkpoint import is_classifier

    wanted = {name: path for name, path in ctx.shipped().items() if not is_classifier(path)}
    wanted.update({f"imported-{name}": path for name, path in ctx.workspace.imported_models().items()})
    for run in ctx.jobs.runs():
        status = run.read_status()
        final = status.get("final_checkpoint")
        if status.get("state") in ("finished", "stopped") and final and Path(final).is_dir() \
                and not is_classifier(final):
            wanted[f"run-{run.path.name}"] = Path(final)
    for name in set(registry.names()) - set(wanted):
        registry.remove(name)
    for name, path in wanted.items():
        if name not in registry:
            try:
                registry.add_folder(path, name=name)
            except Exception:  # a broken folder must not take the API down; chat will show its error
                continue


def build_app(workspace: str | Path, upload_limit_mb: float | None = None,
              auth: tuple[str, str] | None = None, background_jobs: bool = True,
              shipped_dir: str | Path | None = None, access: Access | None = None,
              limits: WorkLimits | None = None, gpu_slices=None) -> FastAPI:
    """The whole server as one FastAPI app (uvicorn runs it; tests run it in a thread).

    `shipped_dir` (default: the repository's checkpoints/) holds the ready-to-chat models.
    `access` (default: read from the environment, see gate.py) says who may use it; `auth`
    sets the page's login on top of it. `limits` (default: from the environment, see bounded.py)
    bound the work one request may start. `gpu_slices` (default: spaces.GPU on ZeroGPU, else none)
    is the decorator that gives one call the GPU; with it, runs train in GPU slices (jobs.py) and the
    chat and /v1 decode each answer in a GPU call (minimind/inference/gpu_call.py).
    """
    access = access or Access.from_env()
    if auth is not None:
        access = dataclasses.replace(access, login=auth)
    limit = upload_limit_mb or float(os.environ.get("MINIMIND_UPLOAD_LIMIT_MB", "200"))
    ws = Workspace(Path(workspace), limit)
    jobs = JobManager(ws, gpu_slices=gpu_slices)
    ctx = AppContext(ws, jobs, public_warning=access.warning(), bounded=BoundedWork(limits or WorkLimits.from_env()),
                     local_folders=not access.public_space, models=ModelRegistry(gpu_calls=jobs.gpu_slices))
    if shipped_dir is not None:
        ctx.shipped_dir = Path(shipped_dir)
    if ctx.public_warning:
        log.warning("MiniMind Studio: %s", ctx.public_warning)
        print(f"WARNING: {ctx.public_warning}", flush=True)
    registry = ctx.models  # one registry: the page's chat and /v1 share every loaded model
    sync_registry(ctx, registry)
    jobs.on_tick.append(lambda: sync_registry(ctx, registry))
    if background_jobs:
        jobs.start_background()
        threading.Thread(target=start_server, name="fork-server", daemon=True).start()
    # the gate below decides who may call /v1 and bounds every body: the API adds no check of its own
    app = create_app(registry, api_key=None, max_request_bytes=None)
    add_classify_routes(app, ctx)  # before the page is mounted at "/": these routes answer first
    add_download_route(app, ws)
    blocks = build_blocks(ctx)
    login = access.checks_password if access.login else None  # constant time, user name included
    app = gr.mount_gradio_app(app, blocks, path="/", auth=login, i18n=I18N, css=CSS,
                              theme=gr.themes.Soft(), max_file_size=f"{int(limit)}mb", show_error=False)
    blocks.has_launched = True  # mounted, Gradio skips its own "only uploaded files" check unless told it runs
    calm_queue(blocks)
    gradio_app = _mounted_gradio(app)
    ctx.uploads.attach(blocks.upload_file_set, gradio_app.uploaded_file_dir)
    body_limit = max_request_bytes(os.environ.get("MINIMIND_MAX_REQUEST_MB"))
    upload_limit = int(limit * 2**20) + 2**20  # the files plus their multipart framing
    # outermost first: gate, then size limits, then the file check on Gradio's calls
    app.add_middleware(OnlyReceivedFiles, area=ctx.uploads)
    app.add_middleware(BodyLimit, max_bytes=body_limit, applies=lambda path: not path.startswith(UPLOAD_ROUTE))
    app.add_middleware(StreamLimit, max_bytes=upload_limit, applies=lambda path: path.startswith(UPLOAD_ROUTE),
                       refusal=too_large(upload_limit, "MINIMIND_UPLOAD_LIMIT_MB, for all files of one upload",
                                         "upload fewer or smaller files at a time"),
                       inspect=form_fields_within_limit)
    app.add_middleware(Gate, access=access, session_user=gradio_session_user(gradio_app),
                       throttle=LoginThrottle.from_env(os.environ))
    app.state.context = ctx
    app.state.access = access
    return app


# Gradio's queue looks for waiting events every 1 ms and for progress to send every 10 ms, busy or
# not: a server with no page open used 0.067 of a core, 0.024 with these (benchmarks/NOTES.md,
# "page_cpu"). An event then waits up to 10 ms more to start; a progress bar moves every 50 ms.
QUEUE_LOOK_S, QUEUE_PROGRESS_S = 0.01, 0.05


def calm_queue(blocks) -> None:
    """Give the page's event queue the intervals above. They are attributes Gradio sets on its
    queue and offers no setting for: where a Gradio version names them otherwise, nothing changes."""
    queue = getattr(blocks, "_queue", None)
    if hasattr(queue, "sleep_when_free") and hasattr(queue, "progress_update_sleep_when_free"):
        queue.sleep_when_free = max(queue.sleep_when_free, QUEUE_LOOK_S)
        queue.progress_update_sleep_when_free = max(queue.progress_update_sleep_when_free, QUEUE_PROGRESS_S)


def _mounted_gradio(app: FastAPI):
    """The Gradio app mount_gradio_app placed at "/" (its login tokens and upload folder)."""
    for route in app.routes:
        inner = getattr(route, "app", None)
        if hasattr(inner, "get_blocks") and hasattr(inner, "uploaded_file_dir"):
            return inner
    raise RuntimeError("the Gradio page is not mounted")


def serve(host: str = "0.0.0.0", port: int = 7860, workspace: str | Path = "workspace") -> None:
    """Run the server. Its entry points (python -m webapp, the Space's app.py) first point Gradio's
    file cache into the workspace (workspace.use_private_gradio_temp), before gradio is imported."""
    import uvicorn

    app = build_app(workspace)
    print(f"MiniMind Studio on http://{'localhost' if host == '0.0.0.0' else host}:{port} "
          f"(workspace {Path(workspace).resolve()})", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")

"""The MiniMind Studio server: a Gradio page (Corpus, Train, Chat, Export) and the
OpenAI-compatible API under /v1, in one FastAPI app."""

from __future__ import annotations

import os
from pathlib import Path

import gradio as gr
from fastapi import FastAPI

from minimind.serving import ModelRegistry, create_app

from .context import AppContext
from .i18n import I18N, t
from .jobs import JobManager
from .tabs import chat, corpus, export, train
from .workspace import Workspace

CSS = """
.mm-progress { width: 100%; height: 14px; background: #e5e7eb; border-radius: 7px; overflow: hidden; }
.mm-progress > div { height: 100%; background: #6366f1; transition: width .5s; }
"""


def build_blocks(ctx: AppContext) -> gr.Blocks:
    with gr.Blocks(title="MiniMind Studio") as blocks:
        gr.Markdown(f"# {EN_TITLE}", elem_id="title")
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
        with gr.Accordion(t("api"), open=False):
            gr.Markdown(API_HELP)
    return blocks


EN_TITLE = "MiniMind Studio · MiniMind 工作室"
API_HELP = """The same models answer at `/v1` (OpenAI-compatible: `GET /v1/models`,
`POST /v1/chat/completions`, `POST /v1/completions`, streaming with `"stream": true`).

```bash
curl -s localhost:7860/v1/chat/completions -H 'Content-Type: application/json' \\
  -d '{"model": "minimind-tang", "messages": [{"role": "user", "content": "續寫：床前明月光"}]}'
```
Set `MINIMIND_API_KEY` to require `Authorization: Bearer <key>`."""


def sync_registry(ctx: AppContext, registry: ModelRegistry) -> None:
    """Serve every shipped model and finished run under a stable name (runs as run-<id>)."""
    wanted = {name: path for name, path in ctx.shipped().items()}
    for run in ctx.jobs.runs():
        status = run.read_status()
        final = status.get("final_checkpoint")
        if status.get("state") in ("finished", "stopped") and final and Path(final).is_dir():
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
              shipped_dir: str | Path | None = None) -> FastAPI:
    """The whole server as one FastAPI app (uvicorn runs it; tests run it in a thread).

    `shipped_dir` (default: the repository's checkpoints/) holds the ready-to-chat models.
    """
    limit = upload_limit_mb or float(os.environ.get("MINIMIND_UPLOAD_LIMIT_MB", "200"))
    ws = Workspace(Path(workspace), limit)
    jobs = JobManager(ws)
    ctx = AppContext(ws, jobs) if shipped_dir is None else AppContext(ws, jobs, shipped_dir=Path(shipped_dir))
    registry = ModelRegistry()
    sync_registry(ctx, registry)
    jobs.on_tick.append(lambda: sync_registry(ctx, registry))
    if background_jobs:
        jobs.start_background()
    api = create_app(registry, api_key=os.environ.get("MINIMIND_API_KEY") or None)
    app = gr.mount_gradio_app(api, build_blocks(ctx), path="/", auth=auth, i18n=I18N, css=CSS,
                              theme=gr.themes.Soft(), max_file_size=f"{int(limit)}mb",
                              allowed_paths=[str(ws.root)], show_error=True)
    app.state.context = ctx
    return app


def auth_from_env() -> tuple[str, str] | None:
    value = os.environ.get("MINIMIND_AUTH", "")
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise SystemExit("MINIMIND_AUTH must look like user:password")
    return user, password


def serve(host: str = "0.0.0.0", port: int = 7860, workspace: str | Path = "workspace") -> None:
    import uvicorn

    app = build_app(workspace, auth=auth_from_env())
    print(f"MiniMind Studio on http://{'localhost' if host == '0.0.0.0' else host}:{port} "
          f"(workspace {Path(workspace).resolve()})", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")

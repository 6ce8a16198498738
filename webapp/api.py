"""The classifier API: label probabilities from a finished classifier run, over HTTP.

    GET  /api/classify   -> {"object": "list", "data": [{"id": "run-<run id>", "labels": [...]}, ...]}
    POST /api/classify   {"model": "run-<run id>", "texts": ["...", ...]}
                         -> {"model": ..., "labels": [...], "results": [{"label": best, "probabilities":
                             {label: p, ...}}, ...]}  (one result per text, in order; classes in id order)

Models are named as /v1 names them (a run as `run-<run id>`, the bare run id also accepted; a
shipped classifier by its folder name) and looked up among the server's own classifiers only,
never as a path. The same gate as /v1 lets a request in (gate.py: API key, login or session) and
the same body limit bounds it; at most MAX_TEXTS texts of MAX_TEXT_CHARS characters each. Errors
have the OpenAI shape of /v1's and name no server path. Not under /v1: OpenAI has no such endpoint.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from fastapi import FastAPI, Request

from minimind.errors import MiniMindError
from minimind.serving.guards import parse_json
from minimind.serving.pool import QueueFull
from minimind.serving.protocol import ApiError, bad_request

from . import classifiers
from .context import AppContext, without_paths

CLASSIFY_ROUTE = "/api/classify"


def api_names(ctx: AppContext) -> dict[str, str]:
    """API name -> page id of every classifier this server offers (run-<id> and <id> for a run)."""
    names = {}
    for _, model_id in classifiers.classifier_choices(ctx):
        kind, _, name = model_id.partition(":")
        if kind == "run":
            names[f"run-{name}"] = model_id
            names.setdefault(name, model_id)
        else:
            names.setdefault(name, model_id)
    return names


def _alias(name: str, model_id: str) -> bool:
    """Whether `name` is a run's bare id (an alias of its run-<id> name)."""
    return model_id.startswith("run:") and not name.startswith("run-")


def folder_labels(folder: Path) -> list[str]:
    """A classifier folder's classes, in id order, read from its files (nothing loaded)."""
    from minimind.classifier import ADAPTER_LABELS, read_adapter_labels
    from minimind.errors import CheckpointError

    try:
        if (folder / ADAPTER_LABELS).is_file():
            return read_adapter_labels(folder)[0]
        id2label = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("id2label") or {}
        return [str(id2label[k]) for k in sorted(id2label, key=int)]
    except (OSError, ValueError, KeyError, TypeError, CheckpointError):
        return []


def add_classify_routes(app: FastAPI, ctx: AppContext) -> None:
    """GET and POST CLASSIFY_ROUTE on `app` (whose ApiError handler answers the refusals)."""

    @app.get(CLASSIFY_ROUTE)
    async def list_classifiers():
        data = []
        for name, model_id in api_names(ctx).items():
            if _alias(name, model_id):
                continue  # listed once, as run-<id>
            data.append({"id": name, "object": "classifier", "labels": folder_labels(ctx.model_folder(model_id))})
        return {"object": "list", "data": data}

    @app.post(CLASSIFY_ROUTE)
    async def classify_texts(request: Request):
        body = parse_json(await request.body())
        if not isinstance(body, dict):
            raise bad_request('the request body must be a JSON object: {"model": "run-<id>", "texts": ["..."]}')
        name = body.get("model")
        if not isinstance(name, str) or not name:
            raise bad_request("model must be the name of a classifier (GET /api/classify lists them)", "model")
        names = api_names(ctx)
        if name not in names:
            listed = sorted(n for n, model_id in names.items() if not _alias(n, model_id))
            raise ApiError(404, "there is no classifier of that name on this server; classifiers: "
                           + (", ".join(listed) or "none yet (train one on a labelled corpus)"),
                           param="model", code="model_not_found")
        if "texts" not in body:
            raise bad_request('texts is missing: send {"texts": ["..."]}', "texts")
        try:
            texts = classifiers.check_texts(body["texts"])
        except classifiers.ClassifyError as err:
            raise bad_request(str(err), "texts") from None
        try:  # the /v1 pool's admission: bounded waiting, a 429 beyond it (as generation requests get)
            ticket = request.app.state.pool.admit()
        except QueueFull as err:
            raise ApiError(429, str(err), type="rate_limit_error", code="queue_full") from err
        try:
            results = await asyncio.to_thread(classifiers.classify, ctx, names[name], texts)
        except MiniMindError as err:
            raise ApiError(400, without_paths(str(err)), param="model", code="model_unusable") from None
        finally:
            ticket.release()
        labels = list(results[0]) if results else []
        return {"object": "classification", "model": name, "labels": labels,
                "results": [{"label": max(p, key=p.get), "probabilities": p} for p in results]}

"""The OpenAI-compatible HTTP API as a FastAPI app: /v1/models, /v1/chat/completions, /v1/completions.

`create_app(registry)` returns an app the `serve` command runs with uvicorn and
the web app mounts in its own process. A body over the size limit is refused
before it is read (413, guards.py); requests are checked here (400 with an
OpenAI-style body), admitted or refused (429), then generated in worker
threads (minimind.serving.pool) and answered as JSON or as server-sent events
(`data: {chunk}` lines ending with `data: [DONE]`). Every error under the prefix,
404 and 405 included, has OpenAI's shape and names no server path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from ..errors import MiniMindError, SamplingError
from ..chat_format import answer_room
from ..generation import Generation, chat, complete
from ..registry import LoadedModel, ModelRegistry
from .guards import DEFAULT_MAX_REQUEST_BYTES, BodyLimit, bearer_token, parse_json, same_secret
from .throttle import LoginThrottle, retry_after, throttled_message
from .pool import GenerationPool, QueueFull
from .protocol import (ApiError, GenerationRequest, bad_request, chat_chunk, chat_response, completion_chunk,
                       completion_response, from_sampling_error, new_id, parse_chat, parse_completion,
                       usage_chunk)

log = logging.getLogger(__name__)
HTTP_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def create_app(registry: ModelRegistry, api_key: str | None = None, max_queue: int = 32,
               prefix: str = "/v1", title: str = "MiniMind API",
               max_request_bytes: int | None = DEFAULT_MAX_REQUEST_BYTES,
               throttle: LoginThrottle | None = None) -> FastAPI:
    """An app serving `registry`'s models at `{prefix}/models`, `{prefix}/chat/completions` and
    `{prefix}/completions`.

    api_key:   when set, every request needs `Authorization: Bearer <api_key>` (the `serve`
               command reads MINIMIND_API_KEY); otherwise the API is open.
    max_queue: requests running or waiting at once; one more is answered 429 at once.
    Each model decodes its requests together (continuous batching, minimind.inference); how
    many at once is the registry's `max_batch`. Sampling settings a request leaves out come
    from the model's generation_config.json.
    max_request_bytes: bodies over this (default 1 MB) are answered 413 before they are read;
               None when the host app guards sizes itself (the web app does, for all its routes).
    throttle:  slows down wrong keys (throttle.py); default: one of its own, by peer address.
    To mount it in another app: `host.mount("/v1", create_app(registry, prefix=""))`.
    """
    pool = GenerationPool(max_queue=max_queue)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        pool.shutdown()

    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.registry = registry
    app.state.pool = pool

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, err: ApiError):
        headers = {"Retry-After": "1"} if err.status == 429 else None
        return JSONResponse(err.body(), status_code=err.status, headers=headers)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, err: HTTPException):
        return JSONResponse(ApiError(err.status_code, str(err.detail), code=None).body(),
                            status_code=err.status_code, headers=getattr(err, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, err: RequestValidationError):
        return JSONResponse(bad_request("the request does not match this endpoint's parameters",
                                        None, "invalid_request").body(), status_code=422)

    @app.exception_handler(Exception)
    async def _bug(request: Request, err: Exception):  # the traceback goes to the log, not to the caller
        log.exception("unhandled error answering %s %s", request.method, request.url.path)
        return JSONResponse(_server_error().body(), status_code=500)

    if api_key:
        throttle = throttle or LoginThrottle()

        @app.middleware("http")
        async def _auth(request: Request, call_next):
            client = throttle.client(request.scope, request.headers)
            offered = bool(request.headers.get("authorization", "").strip())  # a try, not a forgotten header
            wait = throttle.wait(client) if offered else 0.0
            if wait > 0:
                err = ApiError(429, throttled_message(wait), param=None, code="rate_limited")
                return JSONResponse(err.body(), status_code=429, headers=retry_after(wait))
            right = same_secret(bearer_token(request.headers), api_key)
            if offered:
                (throttle.succeeded if right else throttle.failed)(client)
            if not right:
                err = ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer <key>' "
                               "with the key the server was started with (MINIMIND_API_KEY).",
                               param=None, code="invalid_api_key")
                return JSONResponse(err.body(), status_code=401, headers={"WWW-Authenticate": "Bearer"})
            return await call_next(request)

    if max_request_bytes is not None:
        app.add_middleware(BodyLimit, max_bytes=max_request_bytes)

    @app.get(f"{prefix}/models")
    async def list_models():
        return {"object": "list", "data": registry.describe()}

    @app.get(prefix + "/models/{name:path}")
    async def get_model(name: str):
        for entry in registry.describe():
            if entry["id"] == name:
                return entry
        raise _unknown_model(name, registry)

    @app.post(f"{prefix}/chat/completions")
    async def chat_completions(request: Request):
        return await _generate(request, parse_chat, is_chat=True)

    @app.post(f"{prefix}/completions")
    async def completions(request: Request):
        return await _generate(request, parse_completion, is_chat=False)

    @app.api_route(prefix or "/", methods=HTTP_METHODS, include_in_schema=False)
    @app.api_route(prefix + "/{rest:path}", methods=HTTP_METHODS, include_in_schema=False)
    async def _no_such_route(request: Request, rest: str = ""):
        """Unknown paths (404) and known paths with another method (405), in OpenAI's shape,
        before a host app mounted at "/" could answer them in its own."""
        path = request.url.path
        allowed = sorted({m for r in app.routes if isinstance(r, APIRoute) and r.endpoint is not _no_such_route
                          and r.path_regex.match(path) for m in r.methods})
        if allowed:
            raise ApiError(405, f"{request.method} is not allowed on {path}; use {' or '.join(allowed)}",
                           code="method_not_allowed")
        raise ApiError(404, f"There is no endpoint {path}: this server answers {prefix}/models, "
                       f"{prefix}/chat/completions and {prefix}/completions", code="unknown_url")

    async def _generate(request: Request, parse, is_chat: bool):
        req = parse(parse_json(await request.body()))
        loaded = await _loaded(registry, req.model)
        try:
            ticket = pool.admit()
        except QueueFull as err:
            raise ApiError(429, str(err), type="rate_limit_error", code="queue_full") from err
        try:  # off the event loop: tokenizing a long prompt takes a while
            generation = await asyncio.to_thread(_start, loaded, req, is_chat)
        except BaseException:
            ticket.release()
            raise
        rid = new_id("chatcmpl" if is_chat else "cmpl")
        events = pool.stream(ticket, lambda: generation)
        if req.stream:
            return StreamingResponse(_sse(events, rid, req.model, req, is_chat), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return await _whole(events, rid, req.model, req, is_chat)

    return app


def _server_error() -> ApiError:
    return ApiError(500, "The server failed to answer this request; its log has the details.",
                    type="server_error", code="internal_error")


def _unknown_model(name: str, registry: ModelRegistry) -> ApiError:
    known = ", ".join(registry.names()) or "none"
    return ApiError(404, f"The model {name!r} does not exist; served models: {known}", param="model",
                    code="model_not_found")


async def _loaded(registry: ModelRegistry, name: str) -> LoadedModel:
    if name not in registry:
        raise _unknown_model(name, registry)
    try:
        return await asyncio.to_thread(registry.get, name)
    except KeyError:
        raise _unknown_model(name, registry) from None
    except MiniMindError as err:
        log.error("model %r could not be loaded: %s", name, err)
        raise ApiError(500, f"The model {name!r} could not be loaded; the server's log has the details.",
                       type="server_error", code="model_load_failed") from err


def _start(loaded: LoadedModel, req: GenerationRequest, is_chat: bool) -> Generation:
    """Check the request against the model (context) and create its Generation (no decoding yet)."""
    model, tokenizer, engine = loaded.model, loaded.tokenizer, loaded.engine
    try:
        params = loaded.sampling.replace(**req.sampling)
        if not req.max_tokens_given:  # a default answer length: whatever room the context leaves, capped
            room = answer_room(model, tokenizer, req.messages if is_chat else req.prompt, params.max_new_tokens)
            params = params.replace(max_new_tokens=room)
        if is_chat:
            return chat(model, tokenizer, req.messages, params, truncate=False, engine=engine)
        return complete(model, tokenizer, req.prompt, params, engine=engine)
    except SamplingError as err:
        raise from_sampling_error(err) from err


# Characters that str.splitlines() treats as line ends but json.dumps(ensure_ascii=False) keeps raw;
# clients that split an event stream with splitlines (httpx, so the openai SDK) would cut a chunk in two.
_LINE_BREAKERS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _encode(obj: dict) -> str:
    """One server-sent event; the JSON stays on a single line for every client's line splitter."""
    return f"data: {json.dumps(obj, ensure_ascii=False).translate(_LINE_BREAKERS)}\n\n"


async def _sse(events: AsyncIterator, rid: str, model: str, req: GenerationRequest, is_chat: bool):
    """Server-sent events: one chunk per text piece, a final chunk with the finish reason,
    usage when asked for (stream_options.include_usage), then [DONE]."""
    try:
        if is_chat:
            yield _encode(chat_chunk(rid, model, {"role": "assistant", "content": ""}))
        elif req.echo:
            yield _encode(completion_chunk(rid, model, req.prompt))
        async for kind, value in events:
            if kind == "piece":
                yield _encode(chat_chunk(rid, model, {"content": value}) if is_chat
                              else completion_chunk(rid, model, value))
            elif kind == "error":
                err = _as_api_error(value)
                yield _encode(err.body())
            else:
                generation: Generation = value
                yield _encode(chat_chunk(rid, model, {}, generation.finish_reason) if is_chat
                              else completion_chunk(rid, model, "", generation.finish_reason))
                if req.include_usage:
                    kind_name = "chat.completion.chunk" if is_chat else "text_completion"
                    yield _encode(usage_chunk(rid, model, kind_name, generation.usage))
        yield "data: [DONE]\n\n"
    finally:
        await events.aclose()  # the client left early: stop generating


async def _whole(events: AsyncIterator, rid: str, model: str, req: GenerationRequest, is_chat: bool):
    pieces = []
    try:
        async for kind, value in events:
            if kind == "piece":
                pieces.append(value)
            elif kind == "error":
                raise _as_api_error(value)
            else:
                generation: Generation = value
    finally:
        await events.aclose()
    text = "".join(pieces)
    if is_chat:
        return chat_response(rid, model, text, generation.finish_reason, generation.usage)
    return completion_response(rid, model, (req.prompt if req.echo else "") + text, generation.finish_reason,
                               generation.usage)


def _as_api_error(err: Exception) -> ApiError:
    if isinstance(err, ApiError):
        return err
    if isinstance(err, SamplingError):
        return from_sampling_error(err)
    if isinstance(err, MiniMindError):
        return bad_request(str(err), None, None)
    log.error("generation failed: %s: %s", type(err).__name__, err)
    return ApiError(500, "Generation failed; the server's log has the details.", type="server_error",
                    code="generation_failed")


"""What every request must pass before any work is done for it: a bounded body, JSON
that parses into plain, valid text, and the API key.

`BodyLimit` is ASGI middleware: it reads at most `max_bytes` of a body (a larger
declared Content-Length is refused at once) and hands the app the buffered
body, so no handler ever parses, decodes or tokenizes more than that.
`parse_json` turns the body into Python values or an `ApiError` (400): invalid
UTF-8, a lone surrogate, nesting deeper than `MAX_JSON_DEPTH`, more than
`MAX_JSON_ITEMS` values (counted on the bytes first, so parsing stays cheap).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable

from .protocol import ApiError, bad_request

DEFAULT_MAX_REQUEST_MB = 1.0   # MINIMIND_MAX_REQUEST_MB: a chat far longer than any context fits in it
DEFAULT_MAX_REQUEST_BYTES = int(DEFAULT_MAX_REQUEST_MB * 2**20)
MAX_JSON_DEPTH = 32            # objects and lists inside one another; requests need about 5
MAX_JSON_ITEMS = 20_000        # values in one body: a chat request has tens, a page call hundreds


def max_request_bytes(value: str | float | None) -> int:
    """Bytes from a megabyte setting (e.g. MINIMIND_MAX_REQUEST_MB); empty means the default."""
    try:
        mb = float(value) if value not in (None, "") else DEFAULT_MAX_REQUEST_MB
    except ValueError:
        raise SystemExit(f"MINIMIND_MAX_REQUEST_MB must be a number of megabytes, got {value!r}") from None
    if mb <= 0:
        raise SystemExit(f"MINIMIND_MAX_REQUEST_MB must be above 0, got {value!r}")
    return int(mb * 2**20)


def too_large(max_bytes: int, setting: str = "MINIMIND_MAX_REQUEST_MB", advice: str = "send a shorter prompt"
              ) -> ApiError:
    return ApiError(413, f"The request body is over this server's limit of {max_bytes / 2**20:g} MB "
                    f"({setting}); {advice}.", code="request_too_large")


async def send_json(send, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
    """Answer a raw ASGI request with a JSON body (the connection closes: the rest of an
    unread body is not worth reading)."""
    data = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
           (b"connection", b"close")]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


class BodyLimit:
    """ASGI middleware: a request body over `max_bytes` is answered 413 before the app runs.

    `applies(path)` chooses the paths it guards (e.g. not an upload route that has
    its own, larger limit). The body is buffered here (at most `max_bytes`) and
    replayed to the app, so a chunked body without Content-Length is bounded too.
    """

    def __init__(self, app, max_bytes: int, applies: Callable[[str], bool] = lambda path: True):
        self.app = app
        self.max_bytes = max_bytes
        self.applies = applies
        self.refusal = too_large(max_bytes)

    async def __call__(self, scope, receive, send):
        if await _passed_or_refused(self, scope, receive, send):
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return await send_json(send, 413, self.refusal.body())
            chunks.append(chunk)
            more = message.get("more_body", False)
        return await self.app(scope, replaying(b"".join(chunks), receive), send)


def replaying(body: bytes, receive):
    """An ASGI `receive` that hands the app a body already read, then the client's messages."""
    replayed = False

    async def replay():
        nonlocal replayed
        if replayed:
            return await receive()  # after the body: wait for the disconnect as usual
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


class StreamLimit:
    """ASGI middleware for routes that stream large bodies to disk (uploads): nothing is buffered
    here; the bytes the app reads are counted (and shown to `inspect`, when given), and past
    `max_bytes` (or when `inspect` objects) the app sees the body end (a cut-off form it
    refuses) while the client gets the refusal, whatever the app answers. A larger declared
    Content-Length is refused at once.

    inspect: `inspect(scope)` -> a function fed each chunk of one request, returning None or
             the ApiError to answer with (e.g. a multipart form field that is too long).
    """

    def __init__(self, app, max_bytes: int, applies: Callable[[str], bool], refusal: ApiError | None = None,
                 inspect: Callable | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.applies = applies
        self.refusal = refusal or too_large(max_bytes)
        self.inspect = inspect

    async def __call__(self, scope, receive, send):
        if await _passed_or_refused(self, scope, receive, send):
            return
        feed = self.inspect(scope) if self.inspect else None
        size, refused, started = 0, False, False

        async def counted():
            nonlocal size, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            error = self.refusal if size > self.max_bytes else (feed(chunk) if feed and chunk else None)
            if error is not None:
                refused = True
                if not started:
                    await send_json(send, error.status, error.body())
                return {"type": "http.request", "body": b"", "more_body": False}  # the app sees the body end
            return message

        async def guarded(message):
            nonlocal started
            if refused:
                return  # the refusal went out instead of whatever the app answers to the cut-off body
            started = True
            await send(message)

        return await self.app(scope, counted, guarded)


async def _passed_or_refused(guard, scope, receive, send) -> bool:
    """What both size guards do first: pass a request they do not guard straight to the app, and
    refuse one whose declared Content-Length is already too large. True when it is handled."""
    if scope["type"] != "http" or not guard.applies(scope.get("path", "")):
        await guard.app(scope, receive, send)
        return True
    declared = _content_length(scope)
    if declared is not None and declared > guard.max_bytes:
        await send_json(send, 413, guard.refusal.body())
        return True
    return False


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _too_many_items() -> ApiError:
    return bad_request(f"the request body holds more than {MAX_JSON_ITEMS:,} values", None, "invalid_json")


def parse_json(raw: bytes):
    """The request body as Python values, or a 400 naming what is wrong with it."""
    if raw.count(b"[") + raw.count(b"{") + raw.count(b",") > MAX_JSON_ITEMS:  # an upper bound, in C
        raise _too_many_items()
    try:
        value = json.loads(raw)
    except RecursionError:
        raise bad_request(f"the request body nests JSON deeper than {MAX_JSON_DEPTH} levels", None,
                          "invalid_json") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise bad_request(f"the request body is not valid JSON ({err})", None, "invalid_json") from None
    except ValueError:  # an integer of more digits than Python converts (4300)
        raise bad_request("the request body holds a number too long to read", None, "invalid_json") from None
    _check_plain(value)
    return value


def _check_plain(value) -> None:
    """Depth within MAX_JSON_DEPTH, at most MAX_JSON_ITEMS values, every string encodable as UTF-8
    (no lone surrogates)."""
    todo, seen = [(value, 1)], 0
    while todo:
        item, depth = todo.pop()
        seen += 1
        if seen > MAX_JSON_ITEMS:
            raise _too_many_items()
        if isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise bad_request(f"the request body nests JSON deeper than {MAX_JSON_DEPTH} levels", None,
                                  "invalid_json")
            children = list(item.items()) if isinstance(item, dict) else [(None, v) for v in item]
            for key, child in children:
                if key is not None:
                    _check_text(key)
                todo.append((child, depth + 1))
        elif isinstance(item, str):
            _check_text(item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise bad_request(f"the request holds text that is not valid Unicode ({err.reason} at character "
                          f"{err.start}); send UTF-8 text", None, "invalid_text") from None


def bearer_token(headers) -> str:
    """The token of an `Authorization: Bearer <token>` header ('' when there is none)."""
    given = headers.get("authorization", "")
    return given[7:].strip() if given[:7].lower() == "bearer " else ""


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets."""
    return secrets.compare_digest(given.encode(), expected.encode())

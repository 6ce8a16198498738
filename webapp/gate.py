"""One gate in front of everything the server answers: the page, its Gradio API, uploads and /v1.

Who may pass is decided here and nowhere else (`Access.allows`):

- With a login (MINIMIND_AUTH=user:password), every route needs one of: the page's
  session cookie (after logging in on the page), HTTP Basic with the same user and
  password, or `Authorization: Bearer <MINIMIND_API_KEY>`. Only what draws the login
  form itself is public: the page shell, its static assets and the login form's POST.
- Without a login, the page is open; /v1 (and /api/classify, the classifier API) needs the key when MINIMIND_API_KEY is set,
  and on a public Hugging Face Space (SPACE_ID set) it stays closed without a key
  unless MINIMIND_PUBLIC_API=1 opens it.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from starlette.datastructures import Headers
from starlette.requests import cookie_parser

from minimind.serving.guards import bearer_token, same_secret, send_json
from minimind.serving.protocol import ApiError
from minimind.serving.throttle import LoginThrottle, retry_after, throttled_message

log = logging.getLogger(__name__)

# What the login page needs before anyone has logged in (GET), and the login itself (POST).
PUBLIC_EXACT = {"/", "/theme.css", "/favicon.ico", "/robots.txt", "/manifest.json"}
PUBLIC_PREFIXES = ("/assets/", "/static/")
LOGIN_PATHS = {"/login", "/login/"}
# Gradio routes this app does not offer: a deep link would hand a session's state to another browser;
# monitoring (off here) would still count every endpoint's calls for anyone who asks
CLOSED = ("/gradio_api/deep_link", "/monitoring", "/gradio_api/monitoring")


@dataclass(frozen=True)
class Access:
    """Who may use this server (read from the environment once, at start)."""

    login: tuple[str, str] | None = None   # MINIMIND_AUTH: the page's user and password
    api_key: str | None = None             # MINIMIND_API_KEY: bearer key for programs
    public_space: bool = False             # SPACE_ID is set: hosted in public on Hugging Face
    public_api: bool = True                # /v1 answers anyone when there is neither login nor key

    @classmethod
    def from_env(cls, env=None) -> "Access":
        env = os.environ if env is None else env
        login = parse_login(env.get("MINIMIND_AUTH", ""))
        public_space = bool(env.get("SPACE_ID"))
        opened = env.get("MINIMIND_PUBLIC_API", "").strip().lower()
        if opened not in ("", "0", "1", "true", "false", "yes", "no"):
            raise SystemExit(f"MINIMIND_PUBLIC_API must be 1 or 0, got {opened!r}")
        public_api = opened in ("1", "true", "yes") if opened else not public_space
        return cls(login, env.get("MINIMIND_API_KEY") or None, public_space, public_api)

    @property
    def open_to_all(self) -> bool:
        """A public Space with no login: anyone on the internet can use the page."""
        return self.public_space and self.login is None

    def warning(self) -> str | None:
        """What the owner of an unprotected public deployment must read (log and page)."""
        if not self.open_to_all:
            return None
        api = ("its /v1 API is open to anyone (MINIMIND_PUBLIC_API=1)" if self.public_api and not self.api_key
               else "its /v1 API needs MINIMIND_API_KEY" if self.api_key
               else "its /v1 API is closed until you set MINIMIND_API_KEY (or MINIMIND_PUBLIC_API=1)")
        return ("This Space has no login: anyone can upload corpora, start training runs and chat here; "
                f"{api}. Set the MINIMIND_AUTH secret (user:password) to make it private.")

    def allows(self, path: str, method: str, headers, session_user: Callable[[], str | None]) -> bool:
        """May this request pass? `session_user()` names the page user of its cookie, if any."""
        api = is_api(path)
        if self.login is None:
            if not api or (self.api_key is None and self.public_api):
                return True
            return self._key(headers)
        if not api and _public(path, method):
            return True
        return self.authenticated(headers, session_user)

    def authenticated(self, headers, session_user: Callable[[], str | None]) -> bool:
        """Does the request carry the key, the page's user and password, or a page session?"""
        return self.credentials(headers) or session_user() is not None

    def credentials(self, headers) -> bool:
        """Does the request's Authorization header hold the key or the page's user and password?"""
        return self._key(headers) or self._basic(headers)

    def offers_credentials(self, headers) -> bool:
        """Does the request try a secret this server checks (so a wrong one counts as a failed login)?"""
        return bool(headers.get("authorization", "").strip()) and (self.login is not None or self.api_key is not None)

    def checks_password(self, user: str, password: str) -> bool:
        """The page's login form, in constant time for the user name as for the password."""
        return self.login is not None and same_secret(user, self.login[0]) & same_secret(password, self.login[1])

    def refusal(self, path: str) -> tuple[dict, dict]:
        """(body, headers) of the 401 for a request that may not pass."""
        if is_api(path):
            if self.login is None and self.api_key is None:
                message = ("This public server's API is closed: its owner must set MINIMIND_API_KEY (then send "
                           "'Authorization: Bearer <key>') or MINIMIND_PUBLIC_API=1 to open it.")
            else:
                message = ("Incorrect or missing credentials: send 'Authorization: Bearer <key>' with the "
                           "server's MINIMIND_API_KEY" + (", or the page's user and password as HTTP Basic"
                                                          if self.login else "") + ".")
            return ApiError(401, message, code="invalid_api_key").body(), {"WWW-Authenticate": "Bearer"}
        return ApiError(401, "Log in on the page first (or send the page's user and password as HTTP Basic, "
                             "or the API key as a bearer token).", code="login_required").body(), {}

    def _key(self, headers) -> bool:
        return self.api_key is not None and same_secret(bearer_token(headers), self.api_key)

    def _basic(self, headers) -> bool:
        given = headers.get("authorization", "")
        if self.login is None or given[:6].lower() != "basic ":
            return False
        try:
            user, _, password = base64.b64decode(given[6:].strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        return same_secret(user, self.login[0]) & same_secret(password, self.login[1])


API_PREFIXES = ("/v1", "/api/classify")  # the HTTP API for programs: /v1 (OpenAI) and the classifier API


def is_api(path: str) -> bool:
    """Whether `path` is the API's (one of API_PREFIXES, or below one): the same rules apply to all of it."""
    return any(path == prefix or path.startswith(prefix + "/") for prefix in API_PREFIXES)


def _asks_deep_link(scope) -> bool:
    """Does the query (decoded, as Gradio reads it) carry a deep_link parameter, on any path?"""
    query = scope.get("query_string", b"").decode("latin-1")
    return any(key == "deep_link" for key, _ in parse_qsl(query, keep_blank_values=True))


def _public(path: str, method: str) -> bool:
    if method == "POST":
        return path in LOGIN_PATHS
    return method in ("GET", "HEAD") and (path in PUBLIC_EXACT or path.startswith(PUBLIC_PREFIXES))


def parse_login(value: str) -> tuple[str, str] | None:
    """MINIMIND_AUTH=user:password -> (user, password); empty -> None."""
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise SystemExit("MINIMIND_AUTH must look like user:password")
    return user, password


class Gate:
    """ASGI middleware applying `Access` to every HTTP request and websocket."""

    def __init__(self, app, access: Access, session_user: Callable[[dict], str | None],
                 throttle: LoginThrottle | None = None):
        self.app = app
        self.access = access
        self.session_user = session_user   # cookies -> the logged-in page user, or None
        self.throttle = throttle or LoginThrottle()

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        path, method = scope.get("path", ""), scope.get("method", "GET")
        user = lambda: self.session_user(cookie_parser(headers.get("cookie", "")))  # noqa: E731
        logging_in = method == "POST" and path in LOGIN_PATHS and self.access.login is not None
        offered = self.access.offers_credentials(headers)
        client = self.throttle.client(scope, headers)
        if (logging_in or offered) and (wait := self.throttle.wait(client)) > 0:
            status, body, extra = 429, ApiError(429, throttled_message(wait), code="rate_limited").body(), \
                retry_after(wait)
            if scope["type"] == "websocket":
                return await send({"type": "websocket.close", "code": 1008})
            return await send_json(send, status, body, extra)
        if offered:  # checked here and now: counted in the same step
            (self.throttle.succeeded if self.access.credentials(headers) else self.throttle.failed)(client)
        if logging_in:
            return await self._login(scope, receive, send, client)
        if not self.access.allows(path, method, headers, user):
            status, (body, extra) = 401, self.access.refusal(path)
        elif path.startswith(CLOSED) or _asks_deep_link(scope):
            status, body, extra = 404, ApiError(404, "Not found", code="not_found").body(), {}
        else:
            if path == "/" and self.access.login is not None and not self.access.authenticated(headers, user):
                send = _without_api_info(send)  # the login form: Gradio would list every endpoint in it
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008})
        await send_json(send, status, body, extra)

    async def _login(self, scope, receive, send, client: str):
        """The login form's POST (public: it is the way in), counted as in flight until Gradio
        answers it (200 with the session cookie, 400 for wrong credentials): a burst of guesses sent
        at once gets no more tries than guesses sent one after another."""
        statuses = []

        async def watched(message):
            if message["type"] == "http.response.start" and not statuses:
                statuses.append(message.get("status", 0))
            return await send(message)

        self.throttle.begin(client)
        try:
            await self.app(scope, receive, watched)
        finally:
            status = statuses[0] if statuses else None
            self.throttle.end(client, True if status == 200 else False if status == 400 else None)


_API_INFO = re.compile(rb"window\.gradio_api_info = .*?;</script>", re.DOTALL)
_NO_API_INFO = b"window.gradio_api_info = {\"named_endpoints\": {}, \"unnamed_endpoints\": {}};</script>"


def _without_api_info(send):
    """Wrap `send` so the page's HTML reaches the client without the API description Gradio
    embeds even in the login form (endpoint names, and choices such as model and corpus names)."""
    start, chunks = None, []

    async def filtered(message):
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        if message["type"] != "http.response.body":
            return await send(message)
        chunks.append(message.get("body", b""))
        if message.get("more_body"):
            return
        body = _API_INFO.sub(lambda _: _NO_API_INFO, b"".join(chunks))
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        await send({**start, "headers": headers + [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return filtered


def gradio_session_user(gradio_app) -> Callable[[dict], str | None]:
    """cookies -> user, checked against the tokens Gradio issued at its /login."""
    def user(cookies: dict) -> str | None:
        cookie_id = getattr(gradio_app, "cookie_id", None)
        tokens = getattr(gradio_app, "tokens", {}) or {}
        for name in (f"access-token-{cookie_id}", f"access-token-unsecure-{cookie_id}"):
            token = cookies.get(name)
            if token and token in tokens:
                return tokens[token]
        return None
    return user

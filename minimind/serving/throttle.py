"""Failed logins slow down: a password or API key cannot be guessed at full speed.

Every door that checks a secret (the page's login form, HTTP Basic, `Authorization: Bearer`)
asks `LoginThrottle.wait(client)` before it checks, and reports the outcome with `failed` or
`succeeded`. A client (an IP address) has FREE_TRIES failures; each further one doubles its wait,
from BASE_WAIT_S up to MAX_WAIT_S. When all clients together fail more than GLOBAL_PER_MINUTE
times in a minute (many addresses guessing), every client waits until the minute has room again.
A success clears its client's count. While a client waits, its tries are answered 429 with
Retry-After and not checked at all, so waiting is the only way on. A try whose outcome comes later
(the login form, answered by Gradio) is in flight from `begin` to `end` and counts as a failure
meanwhile: a burst of tries sent at once gets no more than tries sent one after another.

Behind a reverse proxy every request comes from the proxy's address: name the header in which
the proxy passes on the client's address (MINIMIND_CLIENT_IP_HEADER=X-Forwarded-For) and the last
address in it is used, the one the proxy itself saw. Only set it behind a proxy that writes it;
otherwise a client could send any address it likes.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

log = logging.getLogger(__name__)

FREE_TRIES = 5            # failures a client makes before it waits (the next try is refused)
BASE_WAIT_S = 1.0         # the first wait; each further failure doubles it
MAX_WAIT_S = 900.0        # the longest wait (15 minutes)
GLOBAL_PER_MINUTE = 100   # failures from all clients in one minute before everyone waits
MAX_CLIENTS = 10_000      # clients remembered (the oldest is forgotten first)


class LoginThrottle:
    """Per-client and global backoff of failed logins (one per app; its state lives only here)."""

    def __init__(self, ip_header: str | None = None, clock: Callable[[], float] = time.monotonic,
                 free_tries: int = FREE_TRIES, global_per_minute: int = GLOBAL_PER_MINUTE):
        self.ip_header = (ip_header or "").strip().lower() or None
        self.clock = clock
        self.free_tries = free_tries
        self.global_per_minute = global_per_minute
        self._clients: OrderedDict[str, tuple[int, float]] = OrderedDict()  # client -> (failures, wait until)
        self._recent: deque[float] = deque()  # times of the failures of the last minute, all clients
        self._flying: dict[str, int] = {}     # client -> tries begun and not yet ended

    @classmethod
    def from_env(cls, env) -> "LoginThrottle":
        return cls(ip_header=env.get("MINIMIND_CLIENT_IP_HEADER"))

    def client(self, scope: dict, headers) -> str:
        """The address a request comes from: the peer, or the configured proxy header's last entry."""
        if self.ip_header:
            forwarded = [part.strip() for part in headers.get(self.ip_header, "").split(",") if part.strip()]
            if forwarded:
                return forwarded[-1][:64]
        peer = scope.get("client")
        return str(peer[0]) if peer else "unknown"

    def wait(self, client: str) -> float:
        """Seconds before `client` may try again (0: it may try now)."""
        now = self.clock()
        self._forget_before(now - 60.0)
        failures, until = self._clients.get(client, (0, 0.0))
        flying = self._flying.get(client, 0)
        if flying and failures + flying >= self.free_tries:  # its tries in flight may all be failures
            until = max(until, now + BASE_WAIT_S)
        if len(self._recent) + sum(self._flying.values()) >= self.global_per_minute:
            until = max(until, (self._recent[0] if self._recent else now) + 60.0)
        return max(0.0, until - now)

    def begin(self, client: str) -> None:
        """A try that may go ahead (wait() was 0) and whose outcome comes later."""
        self._flying[client] = self._flying.get(client, 0) + 1

    def end(self, client: str, succeeded: bool | None) -> None:
        """The outcome of a try begun: True, False, or None (neither: e.g. a malformed form)."""
        left = self._flying.pop(client, 0) - 1
        if left > 0:
            self._flying[client] = left
        if succeeded is not None:
            (self.succeeded if succeeded else self.failed)(client)

    def failed(self, client: str) -> None:
        now = self.clock()
        self._forget_before(now - 60.0)
        failures = self._clients.pop(client, (0, 0.0))[0] + 1
        extra = failures - self.free_tries
        wait = 0.0 if extra < 0 else min(MAX_WAIT_S, BASE_WAIT_S * 2 ** min(extra, 30))
        self._clients[client] = (failures, now + wait)
        while len(self._clients) > MAX_CLIENTS:
            self._clients.popitem(last=False)
        self._recent.append(now)
        if wait:
            log.warning("login throttled: %s failed %d times; its next try in %d s", client, failures,
                        math.ceil(wait))
        if len(self._recent) == self.global_per_minute:
            log.warning("login throttled for every client: %d failed logins in the last minute",
                        len(self._recent))

    def succeeded(self, client: str) -> None:
        self._clients.pop(client, None)

    def _forget_before(self, cutoff: float) -> None:
        while self._recent and self._recent[0] < cutoff:
            self._recent.popleft()


def retry_after(wait: float) -> dict[str, str]:
    """The Retry-After header of a 429 for a client that must wait `wait` seconds."""
    return {"Retry-After": str(max(1, math.ceil(wait)))}


def throttled_message(wait: float) -> str:
    return (f"Too many failed logins: try again in {max(1, math.ceil(wait))} s (each further failure "
            "doubles the wait).")

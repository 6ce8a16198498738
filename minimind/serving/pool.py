"""Generation off the event loop, with admission control.

Each admitted request's Generation is iterated in its own worker thread (turning
tokens into text; the tokens come from the model's DecodeBatcher), and its
pieces cross to the event loop through the request's own asyncio queue, so
concurrent streams can never mix. At most `max_queue` requests are admitted at
once (running or waiting); one more gets `QueueFull` (HTTP 429) immediately
instead of hanging.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor

from ..generation import Generation


class QueueFull(Exception):
    """Every admission slot is taken."""


class Ticket:
    """One admitted request's slot; released exactly once."""

    def __init__(self, pool: "GenerationPool"):
        self._pool = pool
        self._released = False
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self._pool._release()


class GenerationPool:
    """A bounded set of admitted requests and the threads that turn their tokens into text."""

    def __init__(self, max_queue: int = 32):
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        self.max_queue = max_queue
        # one thread per admitted request: each mostly waits for its tokens
        self._executor = ThreadPoolExecutor(max_workers=max_queue, thread_name_prefix="minimind-generate")
        self._lock = threading.Lock()
        self._admitted = 0

    @property
    def admitted(self) -> int:
        return self._admitted

    def admit(self) -> Ticket:
        with self._lock:
            if self._admitted >= self.max_queue:
                raise QueueFull(f"the server is busy: {self._admitted} requests are running or waiting "
                                f"(limit {self.max_queue}); retry shortly")
            self._admitted += 1
        return Ticket(self)

    def _release(self) -> None:
        with self._lock:
            self._admitted -= 1

    def stream(self, ticket: Ticket, start: Callable[[], Generation]) -> AsyncIterator[tuple[str, object]]:
        """Start iterating `start()`'s Generation in a worker now (so the ticket is released even if
        nobody ever reads), and return the async iterator of its events: ("piece", text) items,
        then ("done", generation) or ("error", exception). Closing the iterator early cancels."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        cancelled = threading.Event()

        def send(item) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the event loop is gone (server shutting down)
                cancelled.set()

        def work() -> None:
            try:
                if cancelled.is_set():
                    return
                generation = start()
                for piece in generation:
                    if cancelled.is_set():
                        generation.close()
                        return
                    send(("piece", piece))
                send(("done", generation))
            except Exception as err:  # handed to the request, which answers with it
                send(("error", err))
            finally:
                ticket.release()

        try:
            self._executor.submit(work)
        except RuntimeError:  # executor shut down
            ticket.release()
            raise
        return _events(queue, cancelled)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


async def _events(queue: asyncio.Queue, cancelled: threading.Event) -> AsyncIterator[tuple[str, object]]:
    try:
        while True:
            item = await queue.get()
            yield item
            if item[0] != "piece":
                return
    finally:
        cancelled.set()

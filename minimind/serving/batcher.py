"""Continuous batching: one decode thread per model advances every active request together.

At batch 1 a CPU decode is bound by reading the weights, so decoding B sequences
in one step (one (B, d) @ W per matrix) costs little more than decoding one.
`DecodeBatcher` keeps a set of active requests, prefills newcomers between
steps, and runs `FastDecoder.step_batch` over all of them; each request gets
its own KV cache, its own seeded sampler and its own token queue, so streams
cannot mix. A lone request takes the exact single-sequence path. Requests
beyond `max_batch` wait for a free row.

Used by the API (create_app) through `chat(..., engine=batcher)`; a model the
lean path does not cover is decoded one request at a time by the same thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence

import torch

from ..fast_decode import FastDecoder, ModelDecoder, TokenSampler

_END = object()


class TokenStream(Iterator[int]):
    """The tokens of one request, as the decode thread produces them."""

    def __init__(self):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.cancelled = threading.Event()

    def __next__(self) -> int:
        item = self._queue.get()
        if item is _END:
            self._queue.put(_END)  # stay exhausted
            raise StopIteration
        if isinstance(item, BaseException):
            self._queue.put(_END)
            raise item
        return item

    def close(self) -> None:
        """The consumer is done (stop string, client gone): the decode thread drops this request."""
        self.cancelled.set()


class _Request:
    def __init__(self, prompt: list[int], sampler: TokenSampler, max_new_tokens: int, stop_ids: Sequence[int]):
        self.prompt, self.sampler, self.max_new_tokens = prompt, sampler, max_new_tokens
        self.stop = set(stop_ids)
        self.stream = TokenStream()
        self.cache = None
        self.last: int | None = None
        self.count = 0
        self.done = False

    def emit(self, token: int) -> None:
        self.last = token
        self.count += 1
        self.stream._queue.put(token)
        if token in self.stop or self.count >= self.max_new_tokens:
            self.finish()

    def finish(self, error: BaseException | None = None) -> None:
        if not self.done:
            self.done = True
            self.cache = None  # free the KV memory now
            self.stream._queue.put(error if error is not None else _END)

    @property
    def live(self) -> bool:
        return not self.done and not self.stream.cancelled.is_set()


class DecodeBatcher:
    """Decodes all of one model's active requests together in a background thread."""

    def __init__(self, decoder: FastDecoder | ModelDecoder, max_batch: int = 16):
        self.decoder = decoder
        self.vocab_size = decoder.vocab_size
        self.max_batch = max_batch if hasattr(decoder, "step_batch") else 1
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="minimind-batcher", daemon=True)
        self._thread.start()

    def submit(self, prompt_ids: Sequence[int], sampler: TokenSampler, max_new_tokens: int,
               stop_ids: Sequence[int] = ()) -> TokenStream:
        """Queue a request; its tokens arrive on the returned stream."""
        if self._closed.is_set():
            raise RuntimeError("the decode batcher is closed")
        request = _Request(list(prompt_ids), sampler, max_new_tokens, stop_ids)
        if not request.prompt:
            raise ValueError("the prompt is empty")
        if max_new_tokens <= 0:
            request.finish()
        else:
            self._inbox.put(request)
        return request.stream

    def close(self) -> None:
        self._closed.set()
        self._inbox.put(None)

    def _loop(self) -> None:
        active: list[_Request] = []
        waiting: list[_Request] = []
        while not self._closed.is_set():
            self._collect(waiting, block=not active and not waiting)
            while waiting and len(active) < self.max_batch:
                request = waiting.pop(0)
                if request.live and self._prefill(request):
                    active.append(request)
            active = [r for r in active if r.live]
            if active:
                self._step(active)
                active = [r for r in active if r.live]
        for request in active + waiting:
            request.finish(RuntimeError("the server is shutting down"))

    def _collect(self, waiting: list[_Request], block: bool) -> None:
        """Move newly submitted requests to `waiting` (waiting for one when idle)."""
        try:
            item = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
            while True:
                if item is not None:
                    waiting.append(item)
                item = self._inbox.get_nowait()
        except queue.Empty:
            pass

    def _prefill(self, request: _Request) -> bool:
        try:
            request.cache = self.decoder.new_cache(len(request.prompt) + request.max_new_tokens)
            request.sampler.observe(request.prompt)
            ids = torch.as_tensor(request.prompt, dtype=torch.long, device=self.decoder.device)
            request.emit(request.sampler.choose(self.decoder.forward(ids, request.cache)))
        except Exception as err:  # handed to the request's consumer
            request.finish(err)
        return request.live

    def _step(self, active: list[_Request]) -> None:
        try:
            if len(active) == 1:
                logits = self.decoder.step(active[0].last, active[0].cache)[None]
            else:
                logits = self.decoder.step_batch([r.last for r in active], [r.cache for r in active])
        except Exception as err:
            for request in active:
                request.finish(err)
            return
        for request, row in zip(active, logits):
            try:
                request.emit(request.sampler.choose(row))
            except Exception as err:  # one request's failure ends that request, never the loop
                request.finish(err)

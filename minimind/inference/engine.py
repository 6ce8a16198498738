"""The scheduler: one decode thread per model advances every active request together.

Every face (generation.chat / complete, so the terminal chat, the page's chat and the
API) submits requests here. Between steps the thread prefills newcomers (B = 1, T =
prompt), then runs one pass over every active request (B = active, T = 1): continuous
batching, where a lone request is simply a batch of one. Each request has its own KV
cache, its own seeded sampler and its own token queue, so streams cannot mix; one
request's failure ends that request only. Requests beyond `max_batch` wait for a row.

An LSTM model (minimind/lstm.py) runs through the same scheduler with its recurrent state
as each request's cache (recurrent.py) instead of the transformer layer loop (forward.py).

The thread starts with the first request and ends after `IDLE_S` without work, so an
engine holds no thread (and keeps no model alive) while nobody uses it.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
import weakref
from collections.abc import Iterator, Sequence

import torch

from . import cpp_decoder, threads
from .decoder_choice import LLAMA_CPP, ONE_THREAD, PLAIN, PROCESS_THREADS, SPECULATIVE, DecoderChoice
from .draft import Draft
from .gguf_context import close_all as close_gguf_contexts
from .recurrent import RecurrentWeights, StateCache, handles as recurrent_handles
from .recurrent import forward as recurrent_forward
from .forward import KVCache, forward
from .sampler import Sampler
from .weak_cache import WeakCache
from .weights import EngineError, Weights

IDLE_S = 2.0
_END = object()
_RUNNING: "weakref.WeakSet[Engine]" = weakref.WeakSet()  # engines with a decode thread, stopped at exit
_ENGINES: WeakCache[Engine] = WeakCache()                 # each model's engine, while the model lives


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
    def __init__(self, prompt: list[int], sampler: Sampler, max_new_tokens: int, stop_ids: Sequence[int]):
        self.prompt, self.sampler, self.max_new_tokens = prompt, sampler, max_new_tokens
        self.stop = set(stop_ids)
        self.stream = TokenStream()
        self.cache: KVCache | None = None
        self.draft_cache: KVCache | None = None   # speculative decoding: the draft's own cache
        self.tokens = list(prompt)                 # prompt + every token emitted (the last one not yet run)
        self.count = 0
        self.done = False
        self.decoder: str | None = None            # alone: the decoder it keeps, once the timings chose one
        self.threads: str | None = None            # alone: PROCESS_THREADS or ONE_THREAD, for all its passes
        self.timed_s = 0.0                         # alone: seconds of its timed passes
        self.timed_tokens = 0                      # alone: tokens of its timed passes
        self.last_pass: str | None = None          # alone: the decoder of its last pass

    @property
    def last(self) -> int:
        return self.tokens[-1]

    def emit(self, logits: torch.Tensor) -> int:
        token = self.sampler.choose(logits, self.max_new_tokens - self.count)
        self.tokens.append(token)
        self.count += 1
        self.stream._queue.put(token)
        if token in self.stop or self.count >= self.max_new_tokens:
            self.finish()
        return token

    def finish(self, error: BaseException | None = None) -> None:
        if not self.done:
            self.done = True
            self.cache = self.draft_cache = None  # free the KV memory now
            self.stream._queue.put(error if error is not None else _END)

    @property
    def live(self) -> bool:
        return not self.done and not self.stream.cancelled.is_set()


class Engine:
    """Decodes one model's requests (see the module docstring). Thread-safe."""

    def __init__(self, model, max_batch: int = 16, speculate: bool | None = None, draft: str | None = None,
                 llama_cpp: bool | None = None, one_thread: bool = True):
        """`speculate`: True or False decodes lone greedy requests speculatively always or never;
        None (the default) times both where speculation can run and keeps the faster
        (decoder_choice.py). `draft`: what guesses for speculation, "llama.cpp" or "int8"
        (draft.py); None (the default) is llama.cpp where llama-cpp-python is installed and
        the model's GGUF export holds it, int8 otherwise. `llama_cpp`: True decodes lone greedy
        requests through llama.cpp on the float32 weights always (cpp_decoder.py; PyTorch where it
        cannot), False never; None (the default) times it beside the others where it is offered.
        `one_thread`: where the engine times its decoders (`speculate` and `llama_cpp` left to None)
        on a CPU with more than one PyTorch thread, it also times requests run on one thread of the
        decode thread's own (threads.py) and keeps the faster count; False: PyTorch passes always
        run on the process's count."""
        self._model = weakref.ref(model)    # the engine cache is keyed by the model: the engine must not hold it
        self.max_batch = max(1, max_batch)
        # the backend: the transformer layer loop (forward.py) or an LSTM's state (recurrent.py)
        if recurrent_handles(model):
            self._prepare, self._new_cache, self._forward = RecurrentWeights.of, StateCache, recurrent_forward
            speculate = False  # a recurrent state cannot take back rejected guesses
        else:
            self._prepare, self._new_cache, self._forward = Weights.of, KVCache, forward
        self.weights = self._prepare(model)    # fails now, with the reason, for a model it cannot run
        if speculate is None and not speculation_possible(self.weights):
            speculate = False
        if llama_cpp is None and not (speculate is None and cpp_decoder.offered(self.weights)):
            llama_cpp = False
        self.speculate = speculate
        self.llama_cpp = llama_cpp
        one = (one_thread and speculate is None and not llama_cpp and self.weights.device.type == "cpu"
               and torch.get_num_threads() > 1 and threads.settable())
        greedy_names = (PLAIN, SPECULATIVE) + (() if llama_cpp is False else (LLAMA_CPP,))
        sampled_names = (PLAIN,) + (() if llama_cpp is False else (LLAMA_CPP,))
        self.choice = None if speculate is not None or llama_cpp else DecoderChoice(greedy_names)
        # a lone sampled request: plain or llama.cpp (its logits, the request's seeded sampler), timed apart
        self.sampled_choice = DecoderChoice(sampled_names) if llama_cpp is None or one else None
        # requests on one thread of the decode thread's own (threads.py): the same decoders, timed
        # apart, and which count a request runs on, timed by request (decoder_choice.py); each keyed
        # by whether the request is greedy
        self.one_thread = {True: DecoderChoice(greedy_names), False: DecoderChoice(sampled_names)} if one else None
        self.counts = {greedy: DecoderChoice((PROCESS_THREADS, ONE_THREAD)) for greedy in (True, False)} \
            if one else None
        self._threads = torch.get_num_threads()  # the decode thread's count but on one-thread requests
        self.draft = Draft(self._model, draft)  # what guesses for speculation (draft.py)
        # llama.cpp's exact context (cpp_decoder.py), made on the first pass that uses it
        self.cpp = cpp_decoder.exact_context(self._model) if llama_cpp is not False else None
        self.vocab_size = self.weights.vocab_size
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._retiring = False
        self._stopping = threading.Event()    # set at exit: requests under way end, the thread returns

    def submit(self, prompt_ids: Sequence[int], sampler: Sampler, max_new_tokens: int,
               stop_ids: Sequence[int] = ()) -> TokenStream:
        """Queue a request; its tokens arrive on the returned stream (a stop id is yielded, then it ends)."""
        request = _Request(list(prompt_ids), sampler, max_new_tokens, stop_ids)
        if not request.prompt:
            raise ValueError("the prompt is empty")
        if max_new_tokens <= 0:
            request.finish()
            return request.stream
        with self._lock:
            self._inbox.put(request)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="minimind-engine", daemon=True)
                self._thread.start()
                _RUNNING.add(self)
        return request.stream

    def retire(self) -> threading.Thread | None:
        """End the decode thread as soon as it has nothing to do (not after IDLE_S): requests
        queued or running still finish, and a later request starts it again."""
        with self._lock:
            thread = self._thread
            if thread is not None:
                self._inbox.put(None)
        return thread

    def stop(self) -> threading.Thread | None:
        """End the decode thread after its current pass, ending the requests under way with an error
        (at exit: a thread still decoding while the interpreter shuts down aborts the process)."""
        self._stopping.set()
        return self.retire()

    def _next_batch(self, waiting: list[_Request], idle: bool) -> bool:
        """Move new requests to `waiting`; when idle, wait for one. False: nothing came, the thread ends."""
        try:
            item = self._inbox.get(timeout=0 if self._retiring else IDLE_S) if idle else self._inbox.get_nowait()
        except queue.Empty:
            if not idle:
                return True
            with self._lock:  # no request can slip in between this check and the thread's end
                if self._inbox.empty():
                    self._thread, self._retiring = None, False
                    return False
            return True
        while True:
            if item is None:  # see retire()
                self._retiring = True
            else:
                waiting.append(item)
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return True

    def _loop(self) -> None:
        active: list[_Request] = []
        waiting: list[_Request] = []
        self._threads = torch.get_num_threads()  # (a new thread takes the process's count)
        while self._next_batch(waiting, idle=not active and not waiting):
            if self._stopping.is_set():
                for request in active + waiting:
                    request.finish(EngineError("the engine stopped: the process is exiting"))
                with self._lock:
                    self._thread = None
                return
            while waiting and len(active) < self.max_batch:
                request = waiting.pop(0)
                if request.live and self._prefill(request):
                    active.append(request)
            active = [r for r in active if r.live]
            try:
                if len(active) == 1 and (self.cpp is not None or self.sampled_choice is not None or (
                        self.speculate is not False and active[0].sampler.greedy)):
                    self._lone(active[0])
                elif active:
                    threads.use(self._threads)
                    self._step(active)
                    for request in active:
                        request.last_pass = None  # (batched: no draft followed it)
            except Exception as err:  # a fault of the scheduler's own: it ends these requests, not the thread
                for request in active:
                    request.finish(err)
            active = [r for r in active if r.live]

    def _weights(self) -> Weights:
        model = self._model()
        if model is not None:
            weights = self._prepare(model)  # the same object unless the weights changed in place
            if weights is not self.weights:
                for choice in (self.choice, self.sampled_choice, *(self.one_thread or {}).values()):
                    if choice is not None:
                        choice.rewarm()
            self.weights = weights
        return self.weights

    def _prefill(self, request: _Request) -> bool:
        try:
            w = self._weights()
            threads.use(self._threads)
            request.cache = self._new_cache(w, len(request.prompt) + request.max_new_tokens + self.lookahead + 1)
            request.sampler.observe(request.prompt)
            ids = torch.tensor([request.prompt], dtype=torch.long, device=w.device)
            request.emit(self._forward(w, ids, [request.cache])[0])
        except Exception as err:  # handed to the request's consumer
            request.finish(err)
        return request.live

    def _step(self, active: list[_Request]) -> None:
        try:
            w = self.weights
            for request in active:
                self._catch_up(w, request)
            ids = torch.tensor([[r.last] for r in active], dtype=torch.long, device=w.device)
            logits = self._forward(w, ids, [r.cache for r in active])
        except Exception as err:
            for request in active:
                request.finish(err)
            return
        for request, row in zip(active, logits):
            try:
                request.emit(row)
            except Exception as err:  # one request's failure ends that request, never the loop
                request.finish(err)


    def _lone(self, request: _Request) -> None:
        """One pass of a request alone in the engine. Greedy: speculative, plain or through llama.cpp;
        sampled: plain or llama.cpp's logits through the request's own seeded sampler; PyTorch's on the
        process's threads or, for the whole request, on one. As `speculate` and `llama_cpp` say, or as
        the timings so far say (the tokens are the same either way). Each
        decoder first reads what it has not seen of the request, untimed (a llama.cpp pass leaves
        PyTorch's KV cache behind, a PyTorch pass leaves llama.cpp's), so a pass is timed on its own
        tokens alone."""
        w = self._weights()  # (weights changed in place: llama.cpp's copy is made again)
        greedy = request.sampler.greedy
        if request.threads is None:  # (its first pass alone: the count of all its passes)
            request.threads = self.counts[greedy].choose() if self.counts else PROCESS_THREADS
        one = request.threads == ONE_THREAD
        choice = self.one_thread[greedy] if one else self.choice if greedy else self.sampled_choice
        if choice is None:
            threads.use(self._threads)
            if self.llama_cpp and cpp_decoder.ready(self.cpp, w, request.tokens):
                self._llama_cpp(request)
            elif greedy and self.speculate is not False:
                self._speculate(request)
            else:
                self._step([request])
            return
        made = (self.draft.drafts_made, self.cpp.made if self.cpp else 0)
        name = choice.choose(keeping=request.decoder)
        if request.decoder is None and choice.settled and name == choice.current:
            request.decoder = name  # (it keeps it to its end: see decoder_choice.py)
        if name == LLAMA_CPP and not cpp_decoder.ready(self.cpp, w, request.tokens):
            choice.declined(LLAMA_CPP)
            if not self.cpp.usable:  # (it could not be made, or kept failing: it is given up)
                choice.drop(LLAMA_CPP)
            name = choice.choose(leaving_out=LLAMA_CPP)
            request.decoder = name if request.decoder is not None else None
        # (a PyTorch pass just after passes on the other count is not timed: see decoder_choice.py)
        moved = name != LLAMA_CPP and threads.use(1 if one else self._threads)
        if name != LLAMA_CPP:
            self._catch_up(w, request)
        if name == SPECULATIVE and request.last_pass != SPECULATIVE:
            self.draft.read(w, request)  # (the prompt, or what other passes emitted)
        request.last_pass = name
        start, count = time.perf_counter(), request.count
        if name == LLAMA_CPP:
            self._llama_cpp(request)
        elif name == SPECULATIVE:
            self._speculate(request)
        else:
            self._step([request])
        # (a pass that made a draft or a context, first or after the weights changed, is not timed)
        seconds, tokens = time.perf_counter() - start, request.count - count
        if choice.record(name, seconds, tokens,
                         made=moved or made != (self.draft.drafts_made, self.cpp.made if self.cpp else 0)):
            request.timed_s += seconds
            request.timed_tokens += tokens
        if request.done and self.counts is not None and request.timed_tokens:
            self.counts[greedy].record(request.threads, request.timed_s, request.timed_tokens)

    def _llama_cpp(self, request: _Request) -> None:
        """Up to cpp_decoder.STEPS tokens of `request` from llama.cpp's exact float32 logits, each picked
        by the request's sampler (after `cpp_decoder.ready`). It stops early past its context or where
        llama.cpp fails: the next pass goes on, in PyTorch if need be."""
        for _ in range(min(cpp_decoder.STEPS, request.max_new_tokens - request.count)):
            try:
                logits = cpp_decoder.logits_after(self.cpp, self.weights, request.tokens)
            except Exception:  # (counted: a few in a row and the context is given up)
                logits = None
            if logits is None:
                return
            try:
                request.emit(logits)
            except Exception as err:  # the request's own failure (its sampler): it ends that request
                request.finish(err)
            if request.done:
                return

    def _catch_up(self, w: Weights, request: _Request) -> None:
        """Bring the request's KV cache up to all its tokens but the last, as a PyTorch pass expects:
        llama.cpp passes (cpp_decoder.py) leave it behind."""
        cache = request.cache
        behind = request.tokens[cache.length:-1] if cache is not None else []
        if behind:
            self._forward(w, torch.tensor([behind], dtype=torch.long, device=w.device), [cache])

    def describe(self) -> str:
        """How lone greedy requests decode: "plain", "speculative", "llama.cpp" or what the timings
        chose, with which draft, and why llama.cpp no longer decodes where it stopped."""
        if self.choice is not None:
            mode = self.choice.describe()
        else:
            mode = LLAMA_CPP if self.llama_cpp else (SPECULATIVE if self.speculate else PLAIN)
        if self.sampled_choice is not None and sum(self.sampled_choice.tokens.values()):
            mode += "; " + self.sampled_choice.describe("sampled")
        for greedy, requests in ((True, "greedy"), (False, "sampled")):
            if self.one_thread is not None and sum(self.one_thread[greedy].tokens.values()):
                mode += "; on 1 thread, " + self.one_thread[greedy].describe(requests)
                mode += "; threads " + self.counts[greedy].describe(requests)
        notes = [self.draft.describe()] if self.speculate is not False else []
        if self.cpp is not None and self.cpp.note:
            notes.append(self.cpp.note)
        return "; ".join([mode, *notes])

    @property
    def lookahead(self) -> int:
        """Tokens a speculative pass guesses: the draft's (0 where the engine never speculates)."""
        return 0 if self.speculate is False else self.draft.lookahead

    def memory_bytes(self) -> int:
        """The prepared weights (blocked copies and int8 draft included) and the llama.cpp contexts."""
        return self.weights.memory_bytes() + self.draft.memory_bytes() + (self.cpp.memory_bytes() if self.cpp else 0)

    def _speculate(self, request: _Request) -> None:
        """Greedy decoding that reads the exact weights once per several tokens: the draft
        (llama.cpp or int8) guesses up to `lookahead` tokens one by one, the exact weights run the
        last token and all guesses in one pass, and the sampler picks each position's token from
        the exact logits in order, as plain decoding would. Guesses are kept while they equal the pick; the first
        mismatch is replaced by the pick. So the tokens are the exact greedy ones (penalty and
        UTF-8 guard included); the draft only decides how many come per pass."""
        try:
            w = self.weights
            self._catch_up(w, request)
            exact = request.cache
            k = min(self.lookahead, request.max_new_tokens - request.count - 1, exact.capacity - exact.length - 1)
            guesses = self.draft.guess(w, request, k) if k > 0 else []
            start = exact.length
            rows = forward(w, torch.tensor([[request.last] + guesses], device=w.device), [exact], all_logits=True)[0]
        except Exception as err:
            request.finish(err)
            return
        try:
            for i, row in enumerate(rows):
                token = request.emit(row)
                if request.done or i == len(guesses) or token != guesses[i]:
                    break
        except Exception as err:
            request.finish(err)
            return
        if not request.done:
            exact.length = start + i + 1              # the last token, then the guesses that were kept
            self.draft.kept(request, exact.length)


@atexit.register
def _stop_all() -> None:
    for engine in list(_RUNNING):
        thread = engine.stop()
        if thread is not None:
            thread.join(timeout=5)
    close_gguf_contexts()


def speculation_possible(weights: Weights) -> bool:
    """Whether an int8 draft can guess for these weights: float32 matrices on a CPU (the int8
    product is a CPU kernel). Whether it pays is then measured (decoder_choice.py): it does
    where a step is bound by reading the weights, since the draft reads a quarter of the bytes
    per guess and the exact pass checks up to 8 guesses for about the price of one token; it
    does not where a step is bound by per-op overhead, since the draft runs as many ops."""
    return weights.device.type == "cpu" and weights.embed.dtype == torch.float32


def engine_for(model, max_batch: int = 16, llama_cpp: bool | None = None) -> Engine:
    """The model's engine, made once and kept while the model lives: every caller of one model
    shares its decode thread and its prepared weights. (`llama_cpp`, as for Engine, applies when
    this call makes the engine.)"""
    return _ENGINES.get(model, lambda: Engine(model, max_batch, llama_cpp=llama_cpp))

"""llama.cpp contexts of the engine's model, where llama-cpp-python is installed: the draft of
speculative decoding, and an exact greedy decoder.

The draft. Speculative decoding lets a cheap copy of the model guess a few tokens, and the exact
weights check them all in one pass (engine.py). The tokens come from the exact weights, so the
copy only decides how many tokens a pass keeps. Our int8 draft runs the same PyTorch layer loop as
the exact weights, and on a small model that loop is bound by per-op overhead. llama.cpp runs a
layer as a few fused kernels: on MiniMind-Tang it guesses about three times as fast
(benchmarks/NOTES.md). So where llama-cpp-python is installed, the draft is llama.cpp running a
Q8_0 GGUF of the model; elsewhere it stays the int8 copy.

The exact decoder. The same context over float32 weights with a float32 KV cache computes the
model in float32, as the engine's own layer loop does (sums in another order, as a multi-row
product's are), and hands back each step's logits; the request's sampler picks from them, so
penalties, the UTF-8 guard and stop tokens apply as in any other pass. On a small model it runs a
token in well under the time of our per-op-bound loop; the engine times it beside its own
decoders and keeps the faster (decoder_choice.py). It holds a second float32 copy of the weights,
so only models up to EXACT_MAX_BYTES get one.

Threads. A context reads a prompt on the process's threads, but decodes one token at a time on
the count its first reads measured faster, 1 or all (`decode_threads`): on 2 cores a single token of
MiniMind-Tang or -Shakespeare decoded on 2 threads took twice as long as on 1 (llama.cpp's threads
meet at every op, and a token's ops are tiny), so the page's chat, on the process's 2 threads, ran at
half the speed of the 1-thread headline.

Each GGUF holds the weights alone (gguf_model.py's `write_draft_gguf`): llama.cpp reads token
ids, so no tokenizer is needed. It is written to a temporary folder and read into memory, and the
folder is gone before the first use.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import threading
import time
import weakref
from pathlib import Path

import numpy as np
import torch

from ..errors import ExportError
from ..gguf_model import write_draft_gguf
from .weights import EngineError

DRAFT_TYPE = "q8_0"   # a quarter of float32's bytes, as the int8 draft; Tang guesses 8 % faster than with f16
# positions a context holds (llama.cpp allocates its KV cache whole, at load): an import with a
# 131,072-token context would otherwise hold gigabytes for it; longer sequences use PyTorch
DRAFT_CONTEXT = 2048
# float32 weights up to this get an exact llama.cpp decoder (a second copy): it wins where per-op overhead
# bounds a step (MiniMind-Tang, 17.5 MB) and only ties where reading the weights does (MiniMind-Shakespeare, 24 MB)
EXACT_MAX_BYTES = 64 * 2**20
_GGML_F32 = 0                  # ggml's type id of float32 (the exact context's KV cache)
GIVE_UP = 3                    # failed calls in a row before an engine gives a context up for good
PROBE_TOKENS = 8               # single-token reads timed per thread count, twice each, when a context is made
_OPEN: "weakref.WeakSet[GgufContext]" = weakref.WeakSet()  # closed at exit, before llama.cpp unloads
_CLOSING = threading.Event()   # set at exit: no context is made after close_all


def llama_cpp_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


class GgufContext:
    """A llama.cpp context over a copy of `model`: Q8_0 weights for a draft's guesses, or with
    `exact` float32 weights and KV cache for exact logits. One context serves one sequence at a
    time: another sequence keeps the KV cache of the longest prefix the two share and reads the rest."""

    def __init__(self, model, context: int, threads: int, exact: bool = False):
        """`context`: the positions it can hold (at most DRAFT_CONTEXT are allocated)."""
        from llama_cpp import Llama  # (an optional extra: imported when a context is made)

        if _CLOSING.is_set():  # (one made after close_all would be freed after llama.cpp unloads: a crash)
            raise RuntimeError("the process is exiting")
        context = min(context, DRAFT_CONTEXT)
        folder = Path(tempfile.mkdtemp(prefix="minimind-llama-cpp-"))
        try:
            try:
                path = write_draft_gguf(model, folder, "f32" if exact else DRAFT_TYPE)
            except ExportError as err:  # experts, other positions, options llama.cpp's architecture lacks
                raise EngineError(f"llama.cpp cannot run it: {err}") from err
            self.memory_bytes = path.stat().st_size + _kv_bytes(model.config, context, 4 if exact else 2)
            kv = {"type_k": _GGML_F32, "type_v": _GGML_F32} if exact else {}
            # read into memory (no mmap): the file is deleted right after
            self._llm = Llama(model_path=str(path), n_ctx=context, n_batch=min(512, context), n_threads=threads,
                              n_threads_batch=threads, use_mmap=False, verbose=False, **kv)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self.context = context
        self._vocab = model.config.vocab_size
        self.threads = decode_threads(self._llm, threads, self._vocab)  # (before any use: it leaves nothing held)
        self._held: list[int] = []     # exact: the tokens whose keys and values the context holds
        self._lock = threading.Lock()  # a call and close() never overlap (close at exit, from another thread)
        _OPEN.add(self)

    def fits(self, tokens: list[int], k: int) -> bool:
        """Whether `tokens` and `k` more after them fit the context."""
        return len(tokens) + k <= self.context

    def guess(self, tokens: list[int], k: int) -> list[int]:
        """The draft's `k` greedy tokens after `tokens` (RuntimeError once closed)."""
        if k <= 0:
            return []
        guesses: list[int] = []
        with self._lock:
            llm = self._open()
            self._held = []  # (generate() reads past what `read` left: what it holds is asked after)
            for token in llm.generate(tokens, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0):
                guesses.append(int(token))
                if len(guesses) == k:
                    break
            self._held = llm.input_ids[:llm.n_tokens].tolist()  # the tokens and the guesses it read
        return guesses

    def read(self, tokens: list[int]) -> None:
        """Bring the context up to `tokens`: read what it does not hold yet (after the previous
        call's tokens, the new ones). The engine reads a request's earlier tokens this way before
        it times a pass, as PyTorch's KV cache is caught up before its passes are timed."""
        with self._lock:
            self._read(self._open(), tokens, len(tokens))

    def logits_after(self, tokens: list[int]) -> np.ndarray:
        """The float32 logits of the token after `tokens` (a copy: the next call overwrites llama.cpp's)."""
        from llama_cpp import llama_get_logits_ith  # (the last row a call to llama.cpp's decode computed)

        with self._lock:
            llm = self._open()
            self._read(llm, tokens, len(tokens) - 1)  # at least the last token is read: its row is the answer
            return np.ctypeslib.as_array(llama_get_logits_ith(llm.ctx, -1), shape=(self._vocab,)).copy()

    def _read(self, llm, tokens: list[int], at_most: int) -> None:
        """Read `tokens` past the longest prefix the context holds, keeping at most `at_most` of them."""
        held = self._held
        keep = len(held) if held == tokens[:len(held)] else llm.longest_token_prefix(held, tokens)
        keep = min(keep, at_most)
        if keep == len(tokens):
            return
        self._held = []       # (unknown while llama.cpp reads; an error leaves it so: the next call reads all)
        llm.n_tokens = keep   # eval() drops the keys and values past this first
        llm.eval(tokens[keep:])
        del held[keep:]       # (extended, not copied again: a decode step reads one token)
        held.extend(tokens[keep:])
        self._held = held

    def close(self) -> None:
        """Free the context and the weights, after a call under way."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # (made only in part)
            return
        with lock:
            llm, self._llm = self._llm, None
        if llm is not None:
            llm.close()

    def _open(self):
        if self._llm is None:
            raise RuntimeError("the llama.cpp context is closed")
        return self._llm


def decode_threads(llm, most: int, vocab: int) -> int:
    """Set and return the thread count (1 or `most`) that decodes single tokens faster in `llm`, timed
    on PROBE_TOKENS reads each, alternating, twice; prompts keep `most`. The context holds nothing after."""
    if most <= 1:
        return max(1, most)
    from llama_cpp import llama_set_n_threads

    best_s: dict[int, float] = {}
    for _ in range(2):
        for threads in (most, 1):
            llama_set_n_threads(llm.ctx, threads, most)
            llm.n_tokens = 0  # (eval drops the keys and values past this first)
            start = time.perf_counter()
            for token in range(PROBE_TOKENS):
                llm.eval([token % vocab])
            best_s[threads] = min(best_s.get(threads, float("inf")), time.perf_counter() - start)
    llm.n_tokens = 0
    chosen = min(best_s, key=best_s.get)
    llama_set_n_threads(llm.ctx, chosen, most)
    return chosen


class LazyContext:
    """One engine's llama.cpp context of its model (the draft's, or with `exact` the exact decoder's):
    made on first use and again once the weights change in place. Where it cannot be made, or
    fails GIVE_UP calls in a row, `usable` turns False for good and `note` says why."""

    def __init__(self, model_ref, exact: bool, role: str):
        """`model_ref`: a weak reference to the model (the GGUF is written from it); `role`: what it is
        for, in `note` ("draft", "decoder")."""
        self.exact, self.role = exact, role
        self.usable = True
        self.note = ""                         # why it is not used, once it is not
        self.made = 0                          # contexts made so far (a pass that made one is not timed)
        self.context: GgufContext | None = None
        self.copied = None                     # the prepared weights the context is a copy of
        self._model = model_ref
        self._failures = 0                     # calls failed in a row

    def get(self, w) -> GgufContext | None:
        """The context of the prepared weights `w`, made if need be; None where it cannot be."""
        if not self.usable:
            return None
        if self.context is not None and self.copied is w:
            return self.context
        self.close()
        model = self._model()
        if model is None:
            return None
        self.made += 1
        try:
            self.context = GgufContext(model, w.max_positions, torch.get_num_threads(), exact=self.exact)
            self.copied = w
        except Exception as err:  # an export the GGUF cannot hold, a llama.cpp that fails to load it
            self._give_up(err)
        return self.context

    def call(self, use):
        """`use(context)` (after `get`), counting failures: the error is raised to the caller, and the
        GIVE_UP-th in a row ends the context for good."""
        try:
            result = use(self.context)
        except Exception as err:
            self.failed(err)
            raise
        self._failures = 0
        return result

    def failed(self, err: BaseException) -> None:
        """A call failed: the GIVE_UP-th in a row ends the context for good."""
        self._failures += 1
        if self._failures >= GIVE_UP:
            self._give_up(err)

    def memory_bytes(self) -> int:
        context = self.context  # (read once: the decode thread may drop it meanwhile)
        return context.memory_bytes if context is not None else 0

    def close(self) -> None:
        context, self.context, self.copied = self.context, None, None
        if context is not None:
            context.close()

    def _give_up(self, err: BaseException) -> None:
        self.usable, self.note = False, f"no llama.cpp {self.role}: {err}"
        self.close()


def _kv_bytes(config, context: int, width: int) -> int:
    """llama.cpp's KV cache for `context` positions: keys and values of `width` bytes, every layer."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return 2 * width * context * config.num_hidden_layers * config.num_key_value_heads * head_dim


def close_all() -> None:
    """Free every open context (at exit: llama-cpp-python's own cleanup fails once its library is gone)."""
    _CLOSING.set()
    for context in list(_OPEN):
        context.close()

"""llama.cpp as the draft of speculative greedy decoding, where llama-cpp-python is installed.

Speculative decoding lets a cheap copy of the model guess a few tokens, and the exact weights
check them all in one pass (engine.py). The tokens come from the exact weights, so the copy only
decides how many tokens a pass keeps, and how fast the guesses come is what it is for. Our int8
draft runs the same PyTorch layer loop as the exact weights, and on a small model that loop is
bound by per-op overhead. llama.cpp runs a layer as a few fused kernels: on MiniMind-Tang it
guesses about three times as fast (benchmarks/NOTES.md). So where llama-cpp-python is installed,
the draft is llama.cpp running a Q8_0 GGUF of the model; elsewhere it stays the int8 copy.

The GGUF holds the weights alone (gguf_model.py's `write_draft_gguf`): llama.cpp reads token ids,
so no tokenizer is needed, and any model the GGUF export can hold gets a draft. It is written
to a temporary folder and read into memory, and the folder is gone before the first guess.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import threading
import weakref
from pathlib import Path

from ..errors import ExportError
from ..gguf_model import write_draft_gguf
from .weights import EngineError

DRAFT_TYPE = "q8_0"   # a quarter of float32's bytes, as the int8 draft; Tang guesses 8 % faster than with f16
# positions the draft's context holds (llama.cpp allocates its KV cache whole, at load): an import
# with a 131,072-token context would otherwise hold gigabytes for it; longer sequences guess with int8
DRAFT_CONTEXT = 2048
_OPEN: "weakref.WeakSet[GgufDraft]" = weakref.WeakSet()  # closed at exit, before llama.cpp unloads


def llama_cpp_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


class GgufDraft:
    """A llama.cpp context over a Q8_0 copy of `model`, guessing greedy tokens after a sequence.
    One context serves one sequence at a time: a guess after another sequence keeps the KV cache
    of the longest prefix the two share and reads the rest (llama-cpp-python's prefix match)."""

    def __init__(self, model, context: int, threads: int):
        """`context`: the positions it can hold (at most DRAFT_CONTEXT are allocated)."""
        from llama_cpp import Llama  # (an optional extra: imported when a draft is made)

        context = min(context, DRAFT_CONTEXT)
        folder = Path(tempfile.mkdtemp(prefix="minimind-draft-"))
        try:
            try:
                path = write_draft_gguf(model, folder, DRAFT_TYPE)
            except ExportError as err:  # experts, other positions, options llama.cpp's architecture lacks
                raise EngineError(f"llama.cpp cannot run it: {err}") from err
            self.memory_bytes = path.stat().st_size + _kv_bytes(model.config, context)
            # read into memory (no mmap): the file is deleted right after
            self._llm = Llama(model_path=str(path), n_ctx=context, n_batch=min(512, context), n_threads=threads,
                              n_threads_batch=threads, use_mmap=False, verbose=False)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self.context = context
        self._lock = threading.Lock()  # a guess and close() never overlap (close at exit, from another thread)
        _OPEN.add(self)

    def fits(self, tokens: list[int], k: int) -> bool:
        """Whether `tokens` and `k` guesses after them fit the context."""
        return len(tokens) + k <= self.context

    def guess(self, tokens: list[int], k: int) -> list[int]:
        """The draft's `k` greedy tokens after `tokens` (RuntimeError once closed)."""
        if k <= 0:
            return []
        guesses: list[int] = []
        with self._lock:
            if self._llm is None:
                raise RuntimeError("the llama.cpp draft is closed")
            for token in self._llm.generate(tokens, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0):
                guesses.append(int(token))
                if len(guesses) == k:
                    break
        return guesses

    def close(self) -> None:
        """Free the context and the weights, after a guess under way."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # (made only in part)
            return
        with lock:
            llm, self._llm = self._llm, None
        if llm is not None:
            llm.close()


def _kv_bytes(config, context: int) -> int:
    """llama.cpp's KV cache for `context` positions: float16 keys and values for every layer."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return 2 * 2 * context * config.num_hidden_layers * config.num_key_value_heads * head_dim


def close_all() -> None:
    """Free every open draft (at exit: llama-cpp-python's own cleanup fails once its library is gone)."""
    for draft in list(_OPEN):
        draft.close()

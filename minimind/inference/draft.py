"""What guesses tokens for speculative greedy decoding (engine.py checks the guesses).

Two drafts can guess: llama.cpp running a Q8_0 GGUF of the model (gguf_context.py), where
llama-cpp-python is installed and the GGUF can hold the model, and the int8 copy of the weights
(weights.py) everywhere else. One `Draft` per engine keeps which one guesses, why llama.cpp does
not where it does not, the llama.cpp context it holds, and whether a pass had to make a draft
(such a pass is not timed by the decoder choice: it measures making, not decoding).
"""

from __future__ import annotations

import torch

from .forward import KVCache, forward
from .gguf_context import LazyContext, llama_cpp_installed
from .weights import Weights

# tokens a draft guesses per exact pass: llama.cpp's guesses cost a third of int8's, so more of
# them pay (Tang and Shakespeare: 12 beat 8 by 6-25 %; int8: 8 beat 4, 6, 12)
LOOKAHEAD = {"int8": 8, "llama.cpp": 12}


class Draft:
    """The draft of one engine's model. `kind`: "llama.cpp" or "int8" (None: llama.cpp where
    llama-cpp-python is installed); it falls back to int8 for good, saying why in `note`, where
    the llama.cpp draft cannot be made or fails gguf_context.GIVE_UP guesses in a row."""

    def __init__(self, model_ref, kind: str | None = None):
        """`model_ref`: a weak reference to the model (the GGUF is written from it)."""
        if kind not in (None, *LOOKAHEAD):
            raise ValueError(f"draft {kind!r}: use 'llama.cpp' or 'int8'")
        self.kind = kind if kind is not None else ("llama.cpp" if llama_cpp_installed() else "int8")
        self.llama = LazyContext(model_ref, exact=False, role="draft")  # its llama.cpp context, made on first use
        self._int8_made = 0                  # int8 drafts made so far

    @property
    def note(self) -> str:
        """Why the llama.cpp draft could not be used, if it could not."""
        return self.llama.note

    @property
    def drafts_made(self) -> int:
        """Drafts made so far (a pass that made one is not timed)."""
        return self.llama.made + self._int8_made

    @property
    def lookahead(self) -> int:
        """Tokens one speculative pass asks this draft for."""
        return LOOKAHEAD[self.kind]

    def describe(self) -> str:
        return f"{self.kind} draft" + (f" ({self.note})" if self.note else "")

    def memory_bytes(self) -> int:
        """The llama.cpp draft's weights and KV cache (the int8 draft is counted with the weights)."""
        return self.llama.memory_bytes()

    def guess(self, w: Weights, request, k: int) -> list[int]:
        """The draft's `k` greedy tokens after `request.tokens`. The int8 draft keeps its KV cache
        on the request (`request.draft_cache`, as long as its exact cache, `request.cache`)."""
        if self.kind == "llama.cpp":
            gguf = self.llama.get(w)
            if gguf is not None and gguf.fits(request.tokens, k):  # (past its context: int8 guesses)
                try:
                    return self.llama.call(lambda context: context.guess(request.tokens, k))
                except Exception:  # this pass guesses with int8; only repeated failures end the draft
                    pass
            if not self.llama.usable:
                self.kind = "int8"
        return self._int8_guess(w, request, k)

    def read(self, w: Weights, request) -> None:
        """Bring the draft up to all of the request's tokens but the last, as a guess would first:
        the engine calls this before it times a request's first speculative pass, or one after other
        decoders' passes, so that the pass is timed on its own tokens (a failure is left to the guess)."""
        if self.kind == "llama.cpp":
            gguf = self.llama.get(w)
            if gguf is not None and gguf.fits(request.tokens, 0):
                try:
                    self.llama.call(lambda context: context.read(request.tokens[:-1]))
                except Exception:  # (counted; the guess tries again, or int8 guesses)
                    pass
            return
        guessing = self._int8_cache(w, request)
        unseen = request.tokens[guessing.length:-1]
        if unseen:
            forward(w.draft(), torch.tensor([unseen], device=w.device), [guessing])

    def kept(self, request, length: int) -> None:
        """The exact pass kept `length` positions: the int8 draft forgets the rejected guesses."""
        if request.draft_cache is not None:
            request.draft_cache.length = min(request.draft_cache.length, length)

    def close(self) -> None:
        self.llama.close()

    def _int8_cache(self, w: Weights, request) -> KVCache:
        """The request's int8 draft KV cache (made with the int8 draft, if need be)."""
        if not w.drafted:
            self._int8_made += 1
        draft = w.draft()
        if request.draft_cache is None:
            request.draft_cache = KVCache(draft, request.cache.capacity)
        return request.draft_cache

    def _int8_guess(self, w: Weights, request, k: int) -> list[int]:
        guessing = self._int8_cache(w, request)
        draft = w.draft()
        guesses: list[int] = []
        unseen = request.tokens[guessing.length:]   # the draft catches up on what it has not seen, then guesses
        logits = forward(draft, torch.tensor([unseen], device=w.device), [guessing])[0]
        for i in range(k):
            guesses.append(int(logits.argmax()))
            if i < k - 1:
                logits = forward(draft, torch.tensor([[guesses[-1]]], device=w.device), [guessing])[0]
        return guesses

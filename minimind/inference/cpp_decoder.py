"""llama.cpp as a third exact greedy decoder of one engine, where llama-cpp-python is installed.

The engine decodes a lone greedy request plain (its float32 layer loop once a token) or
speculatively (a draft guesses, the layer loop checks). Both are PyTorch and, on a small model,
bound by per-op overhead. llama.cpp over the same float32 weights with a float32 KV cache
computes the same float32 logits a few times faster there (gguf_context.py), and the request's
sampler picks from them. The decoder choice times it beside the other two and keeps the fastest
(decoder_choice.py). A pass here leaves the request's PyTorch KV cache behind; the engine brings
it up to date before a PyTorch pass needs it (engine.py, `_catch_up`).

It is offered only where it can pay and fit: float32 weights on a CPU (what the other decoders
run), up to EXACT_MAX_BYTES (it holds a second float32 copy), and a model the GGUF can hold.
Where the context cannot be made or keeps failing (gguf_context.LazyContext), the engine stops
offering it and says why.
"""

from __future__ import annotations

import torch

from .gguf_context import EXACT_MAX_BYTES, LazyContext, llama_cpp_installed
from .weights import Weights

STEPS = 8     # tokens one pass decodes (the choice and the bookkeeping are paid once per pass)


def offered(weights: Weights) -> bool:
    """Whether a lone greedy request could decode through llama.cpp: installed, float32 weights
    on a CPU, and a second float32 copy small enough to hold."""
    return (llama_cpp_installed() and weights.device.type == "cpu" and weights.embed.dtype == torch.float32
            and weights.param_bytes <= EXACT_MAX_BYTES)


def exact_context(model_ref) -> LazyContext:
    """The engine's exact llama.cpp context: float32 weights and KV cache."""
    return LazyContext(model_ref, exact=True, role="decoder")


def ready(cpp: LazyContext, w: Weights, tokens: list[int]) -> bool:
    """Whether the context (made for `w` if need be) can decode after `tokens`, having read all of them
    but the last (the engine calls this before it times a pass). False where it cannot be made, is
    past its length, or fails (the failure counts towards giving it up)."""
    context = cpp.get(w)
    if context is None or not context.fits(tokens, 1):
        return False
    try:
        context.read(tokens[:-1])
    except Exception as err:  # (a failure counts; a read that works does not clear the count: only logits do)
        cpp.failed(err)
        return False
    return True


def logits_after(cpp: LazyContext, w: Weights, tokens: list[int]) -> torch.Tensor | None:
    """The exact float32 logits after `tokens`, or None where the context cannot take them (not made,
    past its length). A failed call raises (and counts towards giving the context up)."""
    context = cpp.get(w)
    if context is None or not context.fits(tokens, 1):
        return None
    return torch.from_numpy(cpp.call(lambda c: c.logits_after(tokens)))

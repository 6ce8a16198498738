"""The one inference engine: prepared weights, one B x T layer loop, one sampler, one scheduler.
(The registry that keeps one loaded copy of each model per process is minimind.registry, above
generation.)

  weights.py   the model's weights fused in place (no second copy), blocked copies for multi-row products
  forward.py   the layer loop: prefill, single and batched decode are one function
  recurrent.py an LSTM model's path: its recurrent state as the cache, the model's own code per step
  sampler.py   penalty, UTF-8 guard, temperature / top-k / top-p, seeded draws
  utf8.py      which tokens keep the text completable as UTF-8
  engine.py    the scheduler: a decode thread per model, continuous batching
  decoder_choice.py  plain, speculative or llama.cpp greedy decoding, chosen by timing each
  threads.py   the decode thread's own PyTorch thread count (one-thread requests), the process's left as is
  draft.py     what guesses for speculative decoding: llama.cpp or the int8 weights
  gguf_context.py llama.cpp contexts of the model: the draft (Q8_0), the exact decoder (float32)
  cpp_decoder.py  llama.cpp as an exact greedy decoder, where llama-cpp-python is installed
  beams.py     beam search (transformers' generate, the UTF-8 guard on every beam), not scheduled
  weak_cache.py what the engine makes for a model or tokenizer, kept beside it (not on it)
"""

from .engine import Engine, TokenStream, engine_for
from .sampler import Sampler, guard_for
from .weights import EngineError, Weights, unsupported_reason

__all__ = ["Engine", "TokenStream", "engine_for", "Sampler", "guard_for",
           "EngineError", "Weights", "unsupported_reason"]

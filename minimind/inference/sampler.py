"""The engine's one sampler: logits in, one token out.

In order: repetition penalty over every token seen (prompt included, as transformers
does), the UTF-8 guard (tokens that would make the text impossible to complete as UTF-8
are masked, see utf8.py), then temperature 0 = argmax, else temperature, top-k, top-p
and a draw from the request's own seeded generator. Stop strings are matched on text
(minimind.generation.TextStream), since a stop string may span tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..sampling_params import SamplingParams
from .utf8 import Utf8Guard
from .weak_cache import WeakCache

_GUARDS: WeakCache[dict] = WeakCache()  # each tokenizer's guards, by vocabulary size


class Sampler:
    def __init__(self, vocab_size: int, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 repetition_penalty: float = 1.0, seed: int | None = None, guard: Utf8Guard | None = None):
        self.temperature = temperature
        self.top_k = top_k
        self.top_p = top_p
        self.penalty = repetition_penalty
        self.generator = torch.Generator()
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed)
        self.seen = torch.zeros(vocab_size, dtype=torch.bool) if repetition_penalty != 1.0 else None
        self.guard = guard
        self.state = guard.start if guard is not None else None

    @classmethod
    def from_params(cls, params: SamplingParams, vocab_size: int, guard: Utf8Guard | None = None) -> Sampler:
        """A request's sampler from its checked parameters (chat, the API and GRPO's rollouts all
        build theirs here)."""
        return cls(vocab_size, params.temperature, params.top_k, params.top_p, params.repetition_penalty,
                   params.seed, guard)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def observe(self, tokens: Sequence[int]) -> None:
        """Tokens the model read (the prompt): the repetition penalty counts them as seen."""
        if self.seen is not None and len(tokens):
            self.seen[torch.as_tensor(list(tokens), dtype=torch.long)] = True

    def choose(self, logits: torch.Tensor, remaining: int = 1 << 30) -> int:
        """The next token. `remaining`: tokens the answer may still write, this one included
        (the guard keeps an answer from ending inside a character)."""
        logits = logits.float().cpu()
        if self.seen is not None:
            penalised = torch.where(logits < 0, logits * self.penalty, logits / self.penalty)
            logits = torch.where(self.seen[:logits.shape[0]], penalised, logits)
        if self.guard is not None:
            allowed = self.guard.allowed(self.state, remaining)
            if allowed is not None:
                logits = logits.masked_fill(~allowed[:logits.shape[0]], float("-inf"))
        token = int(logits.argmax()) if self.temperature == 0 else self._draw(logits)
        if self.seen is not None:
            self.seen[token] = True
        if self.guard is not None:
            self.state = self.guard.advance(self.state, token)
        return token

    def _draw(self, logits: torch.Tensor) -> int:
        """Top-k (the k best, sorted), then top-p over those: the smallest prefix whose probability
        reaches p (the best token always stays), then a draw at the temperature. Sorting only
        the k candidates, not the vocabulary, is what keeps a sampled token cheap; with neither
        top-k nor top-p (GRPO's rollouts sample the policy itself) nothing is sorted at all."""
        if self.top_k <= 0 and self.top_p >= 1.0:
            return int(torch.multinomial((logits / self.temperature).softmax(-1), 1, generator=self.generator))
        if 0 < self.top_k < logits.shape[0]:
            values, order = torch.topk(logits, self.top_k)
        else:
            values, order = torch.sort(logits, descending=True)
        values = values / self.temperature
        if self.top_p < 1.0:
            probs = values.softmax(-1)
            keep = int(((probs.cumsum(-1) - probs) < self.top_p).sum())   # mass before a token < p
            values, order = values[:max(keep, 1)], order[:max(keep, 1)]
        pick = torch.multinomial(values.softmax(-1), 1, generator=self.generator)
        return int(order[pick])


def guard_for(tokenizer, vocab_size: int) -> Utf8Guard | None:
    """The tokenizer's UTF-8 guard, built once per tokenizer and vocabulary size (None when the
    tokenizer is not byte-level, so its tokens cannot split a character)."""
    if tokenizer is None:
        return None
    guards = _GUARDS.get(tokenizer, dict)
    if vocab_size not in guards:
        guards[vocab_size] = Utf8Guard.for_tokenizer(tokenizer, vocab_size)
    return guards[vocab_size]

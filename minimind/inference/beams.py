"""Beam search, the one decode the engine does not schedule: transformers' `generate` keeps the
beams (and applies the repetition penalty), and the engine's UTF-8 guard masks each beam's next
token, so a beam's text stays completable as UTF-8 as a sampled answer's does. Not streamed: the
best beam is known only at the end. Reached through `SamplingParams(num_beams > 1)` (the library,
the terminal chat's `/params num_beams=3`)."""

from __future__ import annotations

import torch
from transformers import LogitsProcessorList

from ..sampling_params import SamplingParams
from .sampler import guard_for
from .utf8 import Utf8Guard


def beam_search(model, tokenizer, prompt_ids: list[int], params: SamplingParams, stop_ids: list[int]) -> list[int]:
    """The best beam's tokens after `prompt_ids`, up to and including its first stop token."""
    device = next(model.parameters()).device
    ids = torch.tensor([prompt_ids], device=device)
    guard = guard_for(tokenizer, model.get_output_embeddings().weight.shape[0])
    guarded = LogitsProcessorList([GuardEachBeam(guard, len(prompt_ids), params.max_new_tokens)] if guard else [])
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), num_beams=params.num_beams,
                             do_sample=False, max_new_tokens=params.max_new_tokens,
                             repetition_penalty=params.repetition_penalty, eos_token_id=stop_ids,
                             pad_token_id=stop_ids[0] if stop_ids else 0, logits_processor=guarded)
    new = out[0, len(prompt_ids):].tolist()
    for i, token in enumerate(new):
        if token in stop_ids:
            return new[:i + 1]
    return new


class GuardEachBeam:
    """A transformers logits processor: the UTF-8 guard's mask for each beam, from its tokens so far."""

    def __init__(self, guard: Utf8Guard, prompt_length: int, max_new_tokens: int):
        self.guard, self.prompt_length, self.max_new_tokens = guard, prompt_length, max_new_tokens
        self.states = {(): guard.start}  # tokens written -> state; each beam extends a prefix seen last step

    def _state(self, tokens: tuple):
        known = len(tokens)
        while tokens[:known] not in self.states:  # the longest prefix already seen (one step back, usually)
            known -= 1
        state = self.states[tokens[:known]]
        for end in range(known + 1, len(tokens) + 1):
            state = self.states[tokens[:end]] = self.guard.advance(state, tokens[end - 1])
        return state

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        written = input_ids.shape[1] - self.prompt_length
        for row, tokens in enumerate(input_ids[:, self.prompt_length:].tolist()):
            state = self._state(tuple(tokens))
            allowed = self.guard.allowed(state, self.max_new_tokens - written)
            if allowed is not None:
                scores[row] = scores[row].masked_fill(~allowed[:scores.shape[1]].to(scores.device), float("-inf"))
        return scores

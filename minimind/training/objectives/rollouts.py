"""Answers sampled from the policy being trained, through the one inference engine.

The engine runs a plain model (a LoRA adapter must be merged, a 4-bit base expanded), so
GRPO keeps one plain copy of the policy for sampling and refreshes its weights from the
trained model before each batch of rollouts: a full fine-tune copies the weights, an
adapter run writes base + the adapter's delta into the adapted matrices only. Every
answer has its own seeded sampler, so the rollouts of a step are a function of the
weights and the seeds: a resumed run samples the same answers.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from ...chat_format import context_size, stop_token_ids
from ...inference import Sampler, engine_for, guard_for
from ...sampling_params import SamplingParams

MAX_ROLLOUT_BATCH = 256  # sequences the engine decodes together


@dataclass(frozen=True)
class RolloutSampling(SamplingParams):
    """SamplingParams with the temperature bound of GRPO's config (grpo.temperature in (0, 10]):
    rollouts may sample hotter than a chat does, to explore."""

    max_temperature: ClassVar[float] = 10.0


@dataclass
class Rollouts:
    answers: list[list[int]]  # token ids of each answer (its stop token included when it stopped)
    seconds: float            # wall time of the sampling

    @property
    def tokens(self) -> int:
        return sum(len(a) for a in self.answers)


class RolloutPolicy:
    """A plain copy of the trained model that the engine samples from."""

    def __init__(self, trained: nn.Module, tokenizer):
        self.adapter = hasattr(trained, "peft_config")
        inner = trained.get_base_model() if self.adapter else trained
        self.model = _copy(inner).eval().requires_grad_(False)
        self.tokenizer = tokenizer
        self.stop_ids = stop_token_ids(self.model, tokenizer, chat_mode=True)
        self.context = context_size(self.model)

    @torch.no_grad()
    def sync(self, trained: nn.Module) -> None:
        """Copy the trained weights in (merged with the adapter's delta for LoRA/QLoRA)."""
        inner = trained.get_base_model() if self.adapter else trained
        if not self.adapter:
            for mine, theirs in zip(self.model.parameters(), inner.parameters()):
                mine.copy_(theirs)
            return
        for name, module in inner.named_modules():
            if hasattr(module, "base_layer") and hasattr(module, "get_delta_weight"):
                target = self.model.get_submodule(name)
                weight = _dense_weight(module.base_layer) + module.get_delta_weight("default").to(target.weight.dtype)
                target.weight.copy_(weight)

    def sample(self, prompts: list[list[int]], seeds: list[int], max_new_tokens: int, temperature: float,
               top_k: int, top_p: float) -> Rollouts:
        """One sampled answer per prompt (repeat a prompt for a group), all decoded together."""
        # (no llama.cpp copy: the policy's weights change every step, and each change would remake it)
        engine = engine_for(self.model, max_batch=MAX_ROLLOUT_BATCH, llama_cpp=False)
        engine.max_batch = max(engine.max_batch, min(len(prompts), MAX_ROLLOUT_BATCH))
        guard = guard_for(self.tokenizer, engine.vocab_size)
        sampling = RolloutSampling(temperature=temperature, top_k=top_k, top_p=top_p, repetition_penalty=1.0)
        start = time.perf_counter()
        streams = []
        for prompt, seed in zip(prompts, seeds):
            room = max(1, min(max_new_tokens, self.context - len(prompt) - 1))
            params = sampling.replace(seed=seed, max_new_tokens=room)
            sampler = Sampler.from_params(params, engine.vocab_size, guard)
            streams.append(engine.submit(prompt, sampler, params.max_new_tokens, self.stop_ids))
        answers = [list(stream) for stream in streams]
        return Rollouts(answers, time.perf_counter() - start)

    def text(self, answer: list[int]) -> str:
        """An answer's text, without its stop token."""
        ids = answer[:-1] if answer and answer[-1] in self.stop_ids else answer
        return self.tokenizer.decode(ids, skip_special_tokens=True)


def _copy(model: nn.Module) -> nn.Module:
    plain = _plain(model)
    return copy.deepcopy(plain) if plain is model else plain


def _plain(model: nn.Module) -> nn.Module:
    """The model as a plain module the engine can run: one with adapter layers (LoRA) or 4-bit
    weights (QLoRA) is rebuilt with ordinary nn.Linear layers holding the base weights (expanded)."""
    if not any(_is_4bit(m) or hasattr(m, "base_layer") for m in model.modules()):
        return model
    plain = type(model)(model.config).to(next(model.parameters()).device)  # MiniMind, or its LSTM
    with torch.no_grad():
        for name, module in plain.named_modules():
            if isinstance(module, nn.Linear):
                source = model.get_submodule(name)
                source = getattr(source, "base_layer", source)
                module.weight.copy_(_dense_weight(source))
        own = dict(model.named_parameters())
        for name, param in plain.named_parameters():  # embeddings and norms (adapted matrices were copied above)
            if name in own and own[name].dtype.is_floating_point and own[name].shape == param.shape:
                param.copy_(own[name])
    return plain


def _is_4bit(module: nn.Module) -> bool:
    return type(module).__name__ == "Linear4bit"


def _dense_weight(linear: nn.Module) -> torch.Tensor:
    """A linear layer's weight as a float tensor (a 4-bit one dequantized)."""
    if _is_4bit(linear):
        from bitsandbytes.functional import dequantize_4bit

        return dequantize_4bit(linear.weight.data, linear.weight.quant_state).float()
    return linear.weight.float()

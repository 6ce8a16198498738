"""The size and learning rate of a new model, chosen from what the run can afford on this machine.

A CPU budget buys few tokens. A model too large for them ends under-trained: on the Tang
poems, two minutes of one core gave held-out 7.88 bits per character at width 128 and
8.31 at width 256 (`nano`), because the small model trained on twice the tokens
(benchmarks/NOTES.md, "Model size"). So a new model's size (`model.preset: auto`, the
default) is the largest size of `LADDER` whose planned training tokens are at least
`TOKENS_PER_PARAMETER` times its parameters, with the planned tokens measured: the steps a
time budget buys come from a speed probe of each candidate on this device and precision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..config import MiniMindConfig
from ..lstm import MiniMindLSTMConfig, MiniMindLSTMForCausalLM
from ..model import MiniMindForCausalLM

LADDER = ("pico", "micro", "nano", "mini", "small", "base")
# An LSTM model (model.architecture: lstm) climbs its own sizes (lstm.LSTM_PRESETS, sized like the
# transformer presets of the same name) by the same rule and ratio: not refitted for LSTMs.
LSTM_LADDER = ("pico", "micro", "nano", "mini")
# Fitted on this hardware (benchmarks/NOTES.md, "Model size"): on the Tang poems, the size that
# won had 2.6 (10 minutes, 1 thread) and 4.3 (10 minutes, 2 threads) planned tokens per
# parameter, the next size up, which lost, 1.2 and 2.4; at 2 minutes the smallest won anyway;
# at 60 minutes (1 thread) micro on 5.2 beat pico on 13.6 (6.18 against 6.30 BPC).
TOKENS_PER_PARAMETER = 2.5
# Peak pretraining learning rate of a new model: the small sizes train best with more (pico,
# Tang, 2 minutes: 7.77 BPC at 4e-3 vs 7.88 at 2e-3); the others keep the 2e-3 the shipped
# models were trained with.
PRESET_LR = {"pico": 4e-3, "micro": 3e-3}
DEFAULT_LR = 2e-3
# A second timing of the chosen size this many times slower or faster than its first means the
# machine's speed changed while the sizes were timed, and the sizes are timed again. At 60
# minutes on the Tang poems the first timings ran 2.5 times slow (0.51 s a step against 0.20 a
# second later) and chose pico where micro wins (benchmarks/NOTES.md, "Size probe"). An
# undisturbed process times its first size up to 1.28 times slow (its first model warming up)
# and the rest within about 10 %: those timings are what TOKENS_PER_PARAMETER was fitted on.
PROBE_TOLERANCE = 1.5
# A new model that will see its training split at least REPEAT_PASSES times trains with residual
# dropout REPEAT_DROPOUT (unless model.overrides sets dropout). Without it the Shakespeare hour
# (micro, 11 passes over 1.3M tokens) overfit: validation BPC bottomed at 1.750 and rose to 1.807,
# ending worse than the 10-minute model (benchmarks/NOTES.md, "Repetition").
REPEAT_PASSES = 6.0
REPEAT_DROPOUT = 0.1


@dataclass
class SizeChoice:
    preset: str
    parameters: int
    planned_tokens: int

    def describe(self) -> str:
        return (f"model size {self.preset}: {self.parameters / 1e6:.2f}M parameters for ~{self.planned_tokens / 1e6:.2f}M "
                f"planned tokens ({self.planned_tokens / max(self.parameters, 1):.2f} per parameter; "
                f"the largest size with at least {TOKENS_PER_PARAMETER:g})")


def choose_preset(planned_tokens: Callable[[str], float], parameters: Callable[[str], int],
                  ladder: tuple = LADDER, ratio: float = TOKENS_PER_PARAMETER) -> SizeChoice:
    """The largest size in `ladder` with planned_tokens(size) >= ratio * parameters(size); the
    smallest when none is. Sizes are tried smallest first and the search stops at the first that
    falls short (bigger ones get fewer tokens for more parameters), so a probe runs at most for
    one size past the choice."""
    chosen = None
    for name in ladder:
        params, tokens = parameters(name), planned_tokens(name)
        if tokens < ratio * params and chosen is not None:
            break
        chosen = SizeChoice(name, params, int(tokens))
        if tokens < ratio * params:
            break
    return chosen


def choose_timed_preset(seconds_per_step: Callable[[str], float], tokens_for: Callable[[float], float],
                        parameters: Callable[[str], int], ladder: tuple = LADDER, ratio: float = TOKENS_PER_PARAMETER,
                        log: Callable[[str], None] = lambda message: None) -> SizeChoice:
    """choose_preset for a time budget: `seconds_per_step(size)` times a size on this device,
    `tokens_for(seconds)` is what a step time buys of the budget left. The chosen size is timed
    a second time; if the two timings differ by more than PROBE_TOLERANCE either way (another
    process starting beside this one), every size is timed again, once, and the choice is made
    from those timings."""
    first: dict[str, float] = {}

    def planned(name: str) -> float:
        first[name] = seconds_per_step(name)
        return tokens_for(first[name])

    choice = choose_preset(planned, parameters, ladder, ratio)
    again = seconds_per_step(choice.preset)
    if max(again, first[choice.preset]) <= PROBE_TOLERANCE * min(again, first[choice.preset]):
        return choice
    log(f"size probe: {choice.preset} timed {first[choice.preset]:.2f}s/step, then {again:.2f}s/step: "
        "the machine's speed changed while the sizes were timed, so they are timed again")
    return choose_preset(lambda name: tokens_for(seconds_per_step(name)), parameters, ladder, ratio)


def ladder_for(architecture: str) -> tuple:
    """The sizes `model.preset: auto` chooses from for a new model of `architecture`."""
    return LSTM_LADDER if architecture == "lstm" else LADDER


def parameter_count(preset: str, vocab_size: int, overrides: dict | None = None,
                    architecture: str = "transformer") -> int:
    """Parameters of a new model of `preset` (tied embeddings counted once), without allocating it."""
    config_class, model_class = ((MiniMindLSTMConfig, MiniMindLSTMForCausalLM) if architecture == "lstm"
                                 else (MiniMindConfig, MiniMindForCausalLM))
    config = config_class.from_preset(preset, vocab_size=vocab_size, **(overrides or {}))
    with torch.device("meta"):
        model = model_class(config)
    return sum(p.numel() for p in model.parameters())


def repetition_dropout(passes: float) -> float:
    """Residual dropout of a new model planned to see its training split `passes` times: none while
    repeated tokens still teach about as much as new ones, REPEAT_DROPOUT once it would overfit."""
    return REPEAT_DROPOUT if passes >= REPEAT_PASSES else 0.0


def pretrain_lr(preset: str) -> float:
    """Default peak learning rate of a new model of `preset`."""
    return PRESET_LR.get(preset, DEFAULT_LR)

"""Learning rate as a pure function of the step: linear warmup, cosine decay to a floor.

Being a pure function of the step is what makes resume exact without saving a
scheduler object.
"""

import math


def lr_at(step: int, max_steps: int, peak: float, warmup: int, min_ratio: float) -> float:
    """Learning rate for optimizer step `step` (0-based) of `max_steps`."""
    if warmup > 0 and step < warmup:
        return peak * (step + 1) / warmup
    span = max(max_steps - warmup, 1)
    progress = min(max(step - warmup, 0) / span, 1.0)
    floor = peak * min_ratio
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def default_warmup(max_steps: int) -> int:
    """5% of the run, at most 200 steps."""
    return min(200, max(1, max_steps // 20))

"""Built-in GRPO rewards, stated in config and never user code: each is a pure function
fn(answer, prompt, record, **params) -> float in [0, 1]. See registry.py for the config shape,
poetry.py and text.py for each reward's scoring rule, poems.py for the poem helpers."""

from .registry import (REWARDS, Param, Reward, RewardKind, build_rewards, describe_rewards, score_answer,
                       score_answers)

__all__ = ["REWARDS", "Param", "Reward", "RewardKind", "build_rewards", "describe_rewards", "score_answer",
           "score_answers"]

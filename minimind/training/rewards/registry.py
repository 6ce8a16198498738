"""Rewards stated in config: a name, a weight and parameters, checked once at build time.

A hosted page hands us YAML, never Python: every reward is one of the built-in kinds below,
and everything a user can get wrong is a ConfigError before the first rollout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from minimind.errors import ConfigError

import minimind.training.rewards.pattern as pattern
import minimind.training.rewards.poetry as poetry
import minimind.training.rewards.text as text

RHYME_CLASS_SHARE = 0.3  # the rhyme reward's default class_share (see poetry.spread_rhymes)


@dataclass(frozen=True)
class Param:
    name: str
    kind: type  # str, int, float or list (a list parameter also takes one string)
    default: object
    help: str
    required: bool = False


@dataclass(frozen=True)
class RewardKind:
    name: str
    fn: Callable  # fn(answer, prompt, record, **params, **prepared) -> float in [0, 1]
    params: tuple[Param, ...]
    description: str  # one line for the page
    prepare: Callable[[dict], dict] | None = None  # params -> what fn also takes, built when it first scores
    spread: Callable | None = None  # spread(answers, scores, **params) -> scores: what a batch of answers
                                    # scored together changes (one rhyme class for every answer)


REWARDS: dict[str, RewardKind] = {kind.name: kind for kind in (
    RewardKind("form", poetry.poem_form, (
        Param("form", str, "", "五言绝句 / 七言绝句 / 五言律诗 / 七言律诗 (or 五绝 …); empty: the "
                               "record's form field, else the form named in the prompt"),),
        "The answer has the requested regulated-poem form (verse count and length); partial credit when close."),
    RewardKind("rhyme", poetry.rhyme, (
        Param("class_share", float, RHYME_CLASS_SHARE,
              "the most of a batch's rhyming answers one rhyme class earns full credit for (real Tang poems: "
              "the commonest class about a quarter); 1 = no limit"),),
        "The even verses end in one rhyme (modern Mandarin finals, tone ignored); partial credit when most do; "
        "less credit where one rhyme class takes over a batch.", spread=poetry.spread_rhymes),
    RewardKind("title", poetry.on_title, (
        Param("chars", int, 2, "different characters of the title (《…》 in the prompt) the answer uses for "
                               "full credit"),),
        "The answer stays on the requested title: it uses characters of it; 1.0 when no title is named."),
    RewardKind("length", text.length, (
        Param("min_chars", int, 0, "fewest characters, whitespace not counted (0 = no bound)"),
        Param("max_chars", int, 0, "most characters (0 = no bound)"),
        Param("min_lines", int, 0, "fewest non-empty lines (0 = no bound)"),
        Param("max_lines", int, 0, "most non-empty lines (0 = no bound)")),
        "The answer's length is within bounds; falls linearly to 0 outside."),
    RewardKind("regex", text.regex_match, (
        Param("pattern", str, "", f"a regular expression, at most {pattern.MAX_CHARS} characters, each "
                                   f"counted repeat at most {pattern.MAX_REPEAT:,}",
              required=True),),
        "A regular expression is found in the answer.", prepare=text.prepare_regex),
    RewardKind("contains", text.contains, (
        Param("text", list, [], "texts the answer must contain (plus each record's must_contain)"),),
        "Share of the required texts the answer contains."),
    RewardKind("avoid", text.avoid, (
        Param("text", list, [], "texts the answer must not contain (plus each record's must_avoid)"),),
        "1 minus the share of banned texts the answer contains."),
    RewardKind("no_repetition", text.no_repetition, (
        Param("n", int, 2, "length of the character n-grams compared"),),
        "Share of distinct character n-grams: penalizes repeating itself."),
    RewardKind("format", text.wrapped, (
        Param("open", str, "<poem>", "text the answer starts with"),
        Param("close", str, "</poem>", "text the answer ends with")),
        "The answer is wrapped in an opening and a closing tag with text between."),
)}

_CHECKS: dict[str, Callable[[dict], dict]] = {
    "form": poetry.check_form, "rhyme": poetry.check_rhyme, "title": poetry.check_title,
    "length": text.check_length, "regex": text.check_regex,
    "contains": lambda params: text.check_texts("contains", params),
    "avoid": lambda params: text.check_texts("avoid", params),
    "no_repetition": text.check_no_repetition, "format": text.check_wrapped,
}
MAX_WEIGHT = 1000.0  # weights are relative: a bound keeps their sum and the weighted mean finite
_KIND_WORDS = {str: "a string", int: "an integer", float: "a number", list: "a string or a list of strings"}


@dataclass(frozen=True)
class Reward:
    """A configured reward; params are complete (defaults filled) and already checked. What its kind
    prepares (a compiled pattern) is built when it first scores, so checking a config (as the web
    page does) never builds it."""
    name: str
    weight: float
    params: dict
    prepared: dict = field(default_factory=dict, compare=False, repr=False)

    def __call__(self, answer: str, prompt: str, record: dict | None = None) -> float:
        kind = REWARDS[self.name]
        if kind.prepare is not None and not self.prepared:
            self.prepared.update(kind.prepare(self.params))
        score = kind.fn(answer, prompt, record or {}, **self.params, **self.prepared)
        return min(1.0, max(0.0, float(score)))


def _typed(reward: str, param: Param, value):
    """The value as param.kind, or a ConfigError saying what was expected."""
    ok = {
        str: isinstance(value, str),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, (int, float)) and not isinstance(value, bool),
        list: isinstance(value, str) or (isinstance(value, (list, tuple))
                                         and all(isinstance(v, str) for v in value)),
    }[param.kind]
    if not ok:
        raise ConfigError(f"reward {reward!r}: parameter {param.name!r} must be {_KIND_WORDS[param.kind]}, "
                          f"got {value!r} ({type(value).__name__})")
    if param.kind is list:
        return [value] if isinstance(value, str) else list(value)
    return float(value) if param.kind is float else value


def _build_one(spec, position: int) -> Reward:
    known = ", ".join(REWARDS)
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ConfigError(f"rewards[{position}]: each reward needs a name (one of {known}), "
                          f"e.g. {{name: form, weight: 1.0}}; got {spec!r}")
    name = spec["name"]
    if name not in REWARDS:
        raise ConfigError(f"rewards[{position}]: unknown reward {name!r}; known rewards: {known}")
    kind = REWARDS[name]
    weight = spec.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) \
            or not 0 <= weight <= MAX_WEIGHT:
        raise ConfigError(f"reward {name!r}: weight must be a number between 0 and {MAX_WEIGHT:g} (only the "
                          f"weights' ratios matter), got {weight!r}")
    allowed = {p.name: p for p in kind.params}
    params = {}
    for key, value in spec.items():
        if key in ("name", "weight"):
            continue
        if key not in allowed:
            takes = f"its parameters: {', '.join(allowed)}" if allowed else "it takes no parameters"
            raise ConfigError(f"reward {name!r}: unknown parameter {key!r}; {takes}")
        params[key] = _typed(name, allowed[key], value)
    for param in kind.params:
        if param.name not in params:
            if param.required:
                raise ConfigError(f"reward {name!r}: parameter {param.name!r} is required ({param.help})")
            params[param.name] = list(param.default) if param.kind is list else param.default
    if name in _CHECKS:
        params = _CHECKS[name](params)
    return Reward(name, float(weight), params)


def build_rewards(specs: list[dict]) -> list[Reward]:
    """Rewards from config entries such as {"name": "contains", "weight": 0.5, "text": "月"}:
    keys other than name and weight are the reward's parameters; weight defaults to 1.0."""
    if not isinstance(specs, (list, tuple)) or not specs:
        raise ConfigError(f"rewards: none configured; give a list such as [{{name: form, weight: 1.0}}] "
                          f"(known rewards: {', '.join(REWARDS)})")
    rewards = [_build_one(spec, i) for i, spec in enumerate(specs)]
    seen = set()
    for reward in rewards:
        if reward.name in seen:
            raise ConfigError(f"reward {reward.name!r} is listed twice; keep one entry (each reward "
                              "is one metric; put all its texts in one list)")
        seen.add(reward.name)
    if not any(r.weight > 0 for r in rewards):
        raise ConfigError("rewards: every weight is 0, so nothing is rewarded; give at least one "
                          "reward a weight > 0 (weight 0 only logs a reward)")
    return rewards


def score_answer(rewards: list[Reward], answer: str, prompt: str, record: dict | None = None) -> dict[str, float]:
    """Each reward's score by name, plus "reward": the weighted mean, so it stays in [0, 1]."""
    return score_answers(rewards, [answer], [prompt], [record])[0]


def score_answers(rewards: list[Reward], answers: list[str], prompts: list[str],
                  records: list[dict | None]) -> list[dict[str, float]]:
    """`score_answer` for answers scored together (a GRPO step's rollouts, an evaluation): a reward
    whose kind has `spread` then sees the whole batch."""
    scores = [{r.name: r(a, p, rec) for r in rewards} for a, p, rec in zip(answers, prompts, records)]
    for r in rewards:
        spread = REWARDS[r.name].spread
        if spread is not None and scores:
            for row, value in zip(scores, spread(answers, [row[r.name] for row in scores], **r.params)):
                row[r.name] = min(1.0, max(0.0, float(value)))
    total_weight = sum(r.weight for r in rewards)
    for row in scores:
        row["reward"] = sum(r.weight * row[r.name] for r in rewards) / total_weight
    return scores


def describe_rewards() -> list[dict]:
    """The kinds and their parameters, for the page to draw a form from."""
    return [{"name": kind.name, "description": kind.description,
             "params": [{"name": p.name, "kind": p.kind.__name__, "default": p.default,
                         "help": p.help, "required": p.required} for p in kind.params]}
            for kind in REWARDS.values()]

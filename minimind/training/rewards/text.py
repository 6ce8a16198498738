"""Text rewards for any language: length bounds, a pattern, required and banned texts, variety,
and an answer wrapped in tags. Each checks its parameters at build time (check_*), never while
scoring, and returns a float in [0, 1]."""

from __future__ import annotations

import unicodedata

from minimind.errors import ConfigError

import minimind.training.rewards.pattern as user_pattern


def _bound_score(value: int, low: int, high: int) -> float:
    """1.0 inside [low, high] (0 = no bound); outside, linear to 0 as the distance reaches the bound."""
    if low and value < low:
        return max(0.0, 1.0 - (low - value) / low)
    if high and value > high:
        return max(0.0, 1.0 - (value - high) / high)
    return 1.0


def length(answer: str, prompt: str, record: dict, min_chars: int = 0, max_chars: int = 0,
           min_lines: int = 0, max_lines: int = 0) -> float:
    """Characters (whitespace not counted) and non-empty lines within bounds; the product of the
    two bound scores. E.g. max_chars=20: 30 characters score 0.5, 40 or more score 0."""
    chars = sum(1 for ch in answer if not ch.isspace())
    lines = sum(1 for line in answer.splitlines() if line.strip())
    return _bound_score(chars, min_chars, max_chars) * _bound_score(lines, min_lines, max_lines)


def check_length(params: dict) -> dict:
    for name, value in params.items():
        if value < 0:
            raise ConfigError(f"reward 'length': {name} must be >= 0 (0 = no bound), got {value}")
    for unit in ("chars", "lines"):
        low, high = params[f"min_{unit}"], params[f"max_{unit}"]
        if low and high and low > high:
            raise ConfigError(f"reward 'length': min_{unit} ({low}) is above max_{unit} ({high}); "
                              "swap them or set one to 0 (no bound)")
    return params


def regex_match(answer: str, prompt: str, record: dict, pattern: str = "", compiled=None) -> float:
    """1.0 when the pattern is found anywhere in the answer (regex.search); a search that runs past
    pattern.SEARCH_TIMEOUT_S scores 0, as does an empty answer. `compiled`: the pattern as the
    reward compiled it once (prepare_regex); compiled here when not given."""
    if not answer.strip():
        return 0.0
    return 1.0 if user_pattern.search(compiled or user_pattern.compile_checked(pattern), answer) else 0.0


def check_regex(params: dict) -> dict:
    user_pattern.check_pattern(params["pattern"])  # bounded, and compiled only in a bounded child
    return params


def prepare_regex(params: dict) -> dict:
    """The checked pattern compiled, once per reward, when it first scores (in the trainer)."""
    return {"compiled": user_pattern.compile_checked(params["pattern"])}


def _texts(value) -> list[str]:
    """A text or a list of texts (a record field may hold either) as distinct non-empty strings."""
    items = [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else []
    return list(dict.fromkeys(t for t in items if isinstance(t, str) and t))


def contains(answer: str, prompt: str, record: dict, text: list | str = ()) -> float:
    """Share of the required texts (`text` plus record["must_contain"]) found in the answer;
    1.0 when nothing is required (a record without the field asks for nothing)."""
    wanted = _texts([*_texts(text), *_texts(record.get("must_contain"))])
    if not wanted:
        return 1.0
    return sum(t in answer for t in wanted) / len(wanted)


def avoid(answer: str, prompt: str, record: dict, text: list | str = ()) -> float:
    """1 - share of the banned texts (`text` plus record["must_avoid"]) found in the answer."""
    banned = _texts([*_texts(text), *_texts(record.get("must_avoid"))])
    if not banned:
        return 1.0
    return 1.0 - sum(t in answer for t in banned) / len(banned)


def check_texts(name: str, params: dict) -> dict:
    if any(not t for t in params["text"]):
        raise ConfigError(f"reward {name!r}: 'text' holds an empty string, which every answer "
                          "contains; remove it")
    return params


def _letters(answer: str) -> str:
    return "".join(ch for ch in answer if not ch.isspace() and unicodedata.category(ch)[0] not in "PZ")


def no_repetition(answer: str, prompt: str, record: dict, n: int = 2) -> float:
    """Distinct character n-grams / all n-grams, whitespace and punctuation removed: 1.0 when no
    n-gram repeats; an answer shorter than n scores 0."""
    letters = _letters(answer)
    grams = [letters[i:i + n] for i in range(len(letters) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def check_no_repetition(params: dict) -> dict:
    if not 1 <= params["n"] <= 16:
        raise ConfigError(f"reward 'no_repetition': n must be between 1 and 16, got {params['n']}")
    return params


def wrapped(answer: str, prompt: str, record: dict, open: str = "<poem>", close: str = "</poem>") -> float:
    """1.0 for `open` + non-empty text + `close` (outer whitespace ignored); 0.5 when only the
    opening or only the closing holds, or both with nothing between; else 0."""
    text = answer.strip()
    starts, ends = text.startswith(open), text.endswith(close)
    if starts and ends and len(text) >= len(open) + len(close):
        return 1.0 if text[len(open):len(text) - len(close)].strip() else 0.5
    return 0.5 if starts or ends else 0.0


def check_wrapped(params: dict) -> dict:
    for name in ("open", "close"):
        if not params[name].strip():
            raise ConfigError(f"reward 'format': {name} is empty; give the tag the answer should "
                              f"{'start' if name == 'open' else 'end'} with, e.g. "
                              f"{'<poem>' if name == 'open' else '</poem>'}")
    return params

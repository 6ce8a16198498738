"""Poem rewards: the requested regulated form, a rhyme on the even verses (spread over the rhyme
classes across a batch), and staying on the requested title.

Both give partial credit below 1.0 so that a policy close to the target still sees which way
is up; 1.0 is kept for the exact thing, so the best answer is unambiguous.
"""

from __future__ import annotations

from collections import Counter

from minimind.errors import ConfigError

from .poems import (FORMS, SHAPES, even_rhyme, han_characters, normalize_form, requested_form, rhyme_of,
                    title_characters, verses)


def _closeness(value: int, target: int) -> float:
    """1 at the target, falling linearly to 0 at twice (or zero times) the target."""
    return max(0.0, 1.0 - abs(value - target) / target)


def form_score(vs: list[str], form: str) -> float:
    """1.0 when the verses are exactly `form`; else 0.5 * verse-count closeness + 0.5 * the mean
    closeness of each verse's length to the form's, which is < 1 unless the form is exact.

    E.g. for a 五言绝句 request: four 7-character verses score 0.5 + 0.5 * 0.6 = 0.8; eight
    5-character verses score 0 + 0.5 = 0.5; four 5-character verses with one of 6 score 0.975.
    """
    chars, lines = SHAPES[form]
    if not vs:
        return 0.0
    if len(vs) == lines and all(len(v) == chars for v in vs):
        return 1.0
    count = _closeness(len(vs), lines)
    length = sum(_closeness(len(v), chars) for v in vs) / len(vs)
    return 0.5 * count + 0.5 * length


def poem_form(answer: str, prompt: str, record: dict, form: str = "") -> float:
    """The form asked by the `form` parameter, else record["form"], else named in the prompt;
    with none of these, the best score over the four forms."""
    wanted = normalize_form(form) if form else None
    if wanted is None and isinstance(record.get("form"), str):
        wanted = normalize_form(record["form"])
    if wanted is None:
        wanted = requested_form(prompt)
    vs = verses(answer)
    if wanted is not None:
        return form_score(vs, wanted)
    return max(form_score(vs, name) for name in FORMS.values())


def check_form(params: dict) -> dict:
    if params["form"] and normalize_form(params["form"]) is None:
        raise ConfigError(f"reward 'form': form {params['form']!r} is not one of "
                          f"{', '.join(FORMS.values())} (or 五绝/七绝/五律/七律); leave it empty to "
                          "take the form from each record or prompt")
    return {"form": normalize_form(params["form"]) if params["form"] else ""}


def rhyme(answer: str, prompt: str, record: dict, class_share: float = 1.0) -> float:
    """1.0 when the last characters of all even verses (2nd, 4th, …) share a 十三辙 rhyme class
    (any reading, tone ignored; a modern proxy, see poems.py). Otherwise
    0.5 * (best - 1) / (even - 1), where best is the most even verses sharing one class: half
    credit at most, and 0 when no two even verses rhyme or there are fewer than two. `class_share`
    acts across a batch of answers (`spread_rhymes`), not here."""
    best, n_even = even_rhyme(answer)
    if n_even < 2:
        return 0.0
    if best == n_even:
        return 1.0
    return 0.5 * max(best - 1, 0) / (n_even - 1)


def spread_rhymes(answers: list[str], scores: list[float], class_share: float = 1.0) -> list[float]:
    """The rhyme credit of a batch of answers, where one rhyme class holds more of the batch's
    rhyming answers than `class_share` of them (and more than two): each of those answers keeps
    allowed / held of its credit. A policy rewarded for rhyme alone found one easy class (清 生 情
    成 …) for almost every poem; real Tang poems spread over the thirteen, the commonest about a
    quarter. A lone answer, or a batch that spreads its rhymes, scores as before."""
    if class_share >= 1.0:
        return list(scores)
    classes = [found[0] if score > 0 and (found := rhyme_of(answer)) else None
               for answer, score in zip(answers, scores)]
    held = Counter(c for c in classes if c)
    allowed = max(class_share * sum(held.values()), 2.0)
    return [score * min(1.0, allowed / held[c]) if c else score for score, c in zip(scores, classes)]


def check_rhyme(params: dict) -> dict:
    share = params["class_share"]
    if not 0.0 < share <= 1.0:
        raise ConfigError(f"reward 'rhyme': class_share must be above 0 and at most 1 (the most of a batch's "
                          f"rhyming answers one rhyme class keeps full credit for; 1 = no limit), got {share!r}")
    return params


def on_title(answer: str, prompt: str, record: dict, chars: int = 2) -> float:
    """Staying on the requested title: the share of `chars` different characters of the title (《…》
    in the prompt, form words aside) the answer uses, at most 1; 1.0 when the prompt names no
    title. Real Tang regulated poems use one or more characters of their title in most cases
    (benchmarks/grpo.py measures how many); more than `chars` earns nothing more, so copying the
    title into every verse does not pay."""
    title = title_characters(prompt)
    if not title:
        return 1.0
    return min(1.0, len(title & han_characters(answer)) / min(chars, len(title)))


def check_title(params: dict) -> dict:
    if not 1 <= params["chars"] <= 10:
        raise ConfigError(f"reward 'title': chars must be between 1 and 10 (title characters the answer "
                          f"uses for full credit), got {params['chars']!r}")
    return params

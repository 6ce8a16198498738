"""Poem rewards: the requested regulated form, and a rhyme on the even verses.

Both give partial credit below 1.0 so that a policy close to the target still sees which way
is up; 1.0 is kept for the exact thing, so the best answer is unambiguous.
"""

from __future__ import annotations

from minimind.errors import ConfigError

from .poems import FORMS, SHAPES, even_rhyme, normalize_form, requested_form, verses


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


def rhyme(answer: str, prompt: str, record: dict) -> float:
    """1.0 when the last characters of all even verses (2nd, 4th, …) share a 十三辙 rhyme class
    (any reading, tone ignored; a modern proxy, see poems.py). Otherwise
    0.5 * (best - 1) / (even - 1), where best is the most even verses sharing one class: half
    credit at most, and 0 when no two even verses rhyme or there are fewer than two."""
    best, n_even = even_rhyme(answer)
    if n_even < 2:
        return 0.0
    if best == n_even:
        return 1.0
    return 0.5 * max(best - 1, 0) / (n_even - 1)

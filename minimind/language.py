"""Which languages a text is written in, as far as counting characters and words can tell.

A model card's `language` lets the Hub list a model under the languages it writes; an export
can only tell from the text the model was trained or scored on. Only what counting tells
reliably is named: Chinese by its Han characters, English by its commonest words. Other
languages are not guessed (a wrong code misfiles a model; a missing one only leaves it unlisted).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
LATIN_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
# the commonest English words: together about a fifth of any English text, rare in other Latin-script languages
ENGLISH_WORDS = frozenset(
    "the and of to a in is that it you i my for with not be his he this your but as have me what so "
    "we are was all by on her him will do no thou thy".split())
MIN_SHARE = 0.1      # a language named must make up at least this share of the text's words
MIN_ENGLISH = 0.12   # and for English, this share of its Latin-script words must be the common ones above
MAX_CHARS = 200_000  # enough text to tell; a larger corpus is not read further


def text_languages(texts: Iterable[str] | str) -> list[str]:
    """ISO 639-1 codes, Chinese first: "zh" when Han characters are a tenth or more of the words
    (a Han character counted as one word), "en" when Latin-script words are and enough of them are
    common English words. [] when neither holds or there is no text."""
    han = latin = english = 0
    seen = 0
    for text in [texts] if isinstance(texts, str) else texts:
        text = text[:MAX_CHARS - seen]
        seen += len(text)
        han += len(HAN.findall(text))
        words = LATIN_WORD.findall(text)
        latin += len(words)
        english += sum(1 for w in words if w.lower() in ENGLISH_WORDS)
        if seen >= MAX_CHARS:
            break
    total = han + latin
    if not total:
        return []
    found = ["zh"] if han >= MIN_SHARE * total else []
    if latin >= MIN_SHARE * total and english >= MIN_ENGLISH * latin:
        found.append("en")
    return found

"""Regulated-poem helpers shared by the GRPO rewards and the Tang data scripts: verse split,
form (五言绝句 …), the form a request asks for, and a rhyme check on the even verses.

The rhyme check is a MODERN-READING PROXY: it compares the Mandarin finals of the last
character of the 2nd, 4th, 6th, 8th verses (any reading of a heteronym, tone ignored), grouped
into the thirteen classes of the 十三辙 below; the same character twice does not rhyme with itself. Tang poets rhymed by Middle Chinese readings
(the 平水韵 rhyme groups) and by tone class; many of their rhymes no longer rhyme in Mandarin
and a few modern rhymes were not rhymes then. Good enough to reward "sounds rhymed"; not a
prosody checker.
"""

from __future__ import annotations

import re
from functools import lru_cache

# (characters per verse, verses) -> form name
FORMS = {(5, 4): "五言绝句", (7, 4): "七言绝句", (5, 8): "五言律诗", (7, 8): "七言律诗"}
SHAPES = {name: shape for shape, name in FORMS.items()}
SHORT_FORMS = {"五绝": "五言绝句", "七绝": "七言绝句", "五律": "五言律诗", "七律": "七言律诗"}

_VERSE_SPLIT = re.compile(r"[，。！？；、,.!?;\n]")
_WHITESPACE = re.compile(r"\s+")
_TAG = re.compile(r"</?[A-Za-z][\w-]*>")  # <poem> … </poem>: markup, not verse text
_TRADITIONAL = str.maketrans({"絕": "绝", "詩": "诗"})
_FORM_NAMES = re.compile("|".join([*SHAPES, *SHORT_FORMS]))
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")

# Finals as pypinyin writes them in Style.FINALS (strict: ü is "v", iu is "iou", ui is "uei",
# un is "uen") -> one of the thirteen 辙 of Mandarin folk rhyming.
RHYME_CLASSES = {
    "发花": ("a", "ia", "ua"),
    "梭波": ("o", "e", "uo", "io"),
    "乜斜": ("ie", "ve", "ê"),
    "一七": ("i", "er", "v"),  # pypinyin writes the "-i" of zhi/ci/si as plain "i"
    "姑苏": ("u",),
    "怀来": ("ai", "uai"),
    "灰堆": ("ei", "uei"),
    "遥条": ("ao", "iao"),
    "油求": ("ou", "iou"),
    "言前": ("an", "ian", "uan", "van"),
    "人辰": ("en", "in", "uen", "vn"),
    "江阳": ("ang", "iang", "uang"),
    "中东": ("eng", "ing", "ong", "iong", "ueng"),
}
# the loose spellings too (pypinyin's strict=False), in case a reading comes back that way
_LOOSE = {"ui": "灰堆", "iu": "油求", "un": "人辰", "ue": "乜斜"}
_CLASS_OF_FINAL = {final: name for name, finals in RHYME_CLASSES.items() for final in finals} | _LOOSE


def verses(text: str) -> list[str]:
    """The verses of a poem: split on Chinese and ASCII punctuation and newlines, whitespace
    and markup tags (<poem>) dropped, empty pieces skipped."""
    text = _TAG.sub("", text)
    pieces = (_WHITESPACE.sub("", piece) for piece in _VERSE_SPLIT.split(text))
    return [piece for piece in pieces if piece]


def form_of(text: str) -> str | None:
    """五言绝句 etc. when every verse has 5 or 7 characters and there are 4 or 8 of them."""
    vs = verses(text)
    lengths = {len(v) for v in vs}
    if len(lengths) != 1:
        return None
    return FORMS.get((lengths.pop(), len(vs)))


def normalize_form(name: str) -> str | None:
    """A form name as FORMS spells it, from a full or short name (七律), simplified or
    traditional (七言絕句); None when it names none of the four."""
    name = name.strip().translate(_TRADITIONAL)
    name = SHORT_FORMS.get(name, name)
    return name if name in SHAPES else None


def requested_form(prompt: str) -> str | None:
    """The form a request asks for, first mention wins: 写一首七言律诗 / 来首五绝 -> its name."""
    match = _FORM_NAMES.search(prompt.translate(_TRADITIONAL))
    return normalize_form(match.group(0)) if match else None


@lru_cache(maxsize=65536)
def rhyme_classes(char: str) -> frozenset[str]:
    """The 十三辙 classes of every reading of a character; empty for non-Han characters."""
    if not _HAN.fullmatch(char):
        return frozenset()
    from pypinyin import Style, pinyin  # lazy: importing minimind stays cheap

    readings = pinyin(char, style=Style.FINALS, heteronym=True, strict=True, errors="ignore")
    finals = readings[0] if readings else []
    return frozenset(_CLASS_OF_FINAL[f] for f in finals if f in _CLASS_OF_FINAL)


def _last_han(verse: str) -> str:
    found = _HAN.findall(verse)
    return found[-1] if found else ""


def _rhyme_members(text: str) -> tuple[dict[str, set[str]], int]:
    """({rhyme class: the different even-verse endings in it}, even verses)."""
    endings = [_last_han(v) for v in verses(text)[1::2]]
    members: dict[str, set[str]] = {}
    for char in endings:
        for name in rhyme_classes(char) if char else ():
            members.setdefault(name, set()).add(char)
    return members, len(endings)


def even_rhyme(text: str) -> tuple[int, int]:
    """(largest number of even verses ending in DIFFERENT characters of one rhyme class, even
    verses). A rhyme character used again counts once: poets avoid it (重韵), and a policy
    rewarded for rhyme otherwise learns to end every even verse with 人."""
    members, n_even = _rhyme_members(text)
    return max((len(chars) for chars in members.values()), default=0), n_even


def rhyme_of(text: str) -> tuple[str, frozenset[str]] | None:
    """(the class most even verses rhyme in, its rhyme characters) when at least two even verses
    rhyme (ties: the class named first in RHYME_CLASSES); else None."""
    members, _ = _rhyme_members(text)
    order = list(RHYME_CLASSES)
    ranked = sorted(members.items(), key=lambda item: (-len(item[1]), order.index(item[0])))
    if not ranked or len(ranked[0][1]) < 2:
        return None
    return ranked[0][0], frozenset(ranked[0][1])


_TITLE = re.compile(r"《([^《》]{1,60})》")


def title_characters(prompt: str) -> set[str]:
    """The Han characters of the title a request names in 《》 (以《春夜》为题…), empty when none."""
    match = _TITLE.search(prompt)
    return set(_HAN.findall(match.group(1))) if match else set()


def han_characters(text: str) -> set[str]:
    return set(_HAN.findall(text))


def rhymes(text: str) -> bool:
    """True when there are at least two even verses and their last characters are different
    characters of one class."""
    best, n_even = even_rhyme(text)
    return n_even >= 2 and best == n_even

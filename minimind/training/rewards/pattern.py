"""A user's regular expression, bounded before it compiles.

The `regex` module expands counted repeats while it compiles: `a{10000000}` takes 2.6 GB,
`a{1000000000}` more memory than a server has, and `(?:ab){4294967294}` runs for minutes. A
reward pattern comes from a page anyone may use, so it is read here first, without compiling:
every counted repeat is at most MAX_REPEAT, and the pattern's size with every repeat written
out (nested repeats multiply) is at most MAX_UNITS, which keeps a compiled pattern within a few
MB and a millisecond or two. The reading over-counts where the syntax is ambiguous (a brace
inside a set, a bounded `{0,n}` that the module would not expand), so a pattern it passes
compiles within those bounds. Nothing is cached: each compile is dropped after use.
"""

from __future__ import annotations

import re

from minimind.errors import ConfigError

MAX_CHARS = 200        # characters of a pattern
MAX_REPEAT = 1000      # the largest count of a counted repeat {m}, {m,n}, {m,}
MAX_UNITS = 10_000     # atoms once every counted repeat is written out (about 260-620 bytes each compiled)
SEARCH_TIMEOUT_S = 0.05  # a search past this scores 0: catastrophic backtracking cannot hang the trainer

_COUNTED = re.compile(r"\{(\d*)(?:,(\d*))?\}")  # {m} {m,} {,n} {m,n}, as the regex module reads them
_BRACED = re.compile(r"\{[\w \-=:.&^]*\}")  # what \p{Han}, \P{L}, \N{name} hold: never a repeat
_ESCAPE_ARGUMENT = {"p": _BRACED, "P": _BRACED, "N": _BRACED}  # (\g<name> is literal text in version 0)
_GROUP_OPENING = re.compile(r"\?(?:P?<\w+>|<[=!]|[:=!>|]|[a-zA-Z0-9\-]*:)")
_INLINE_FLAGS = re.compile(r"\(\?([a-zA-Z0-9\-]*)[:)]")  # (?i) (?x:...) (?V1)


def _refuse(pattern: str, why: str) -> ConfigError:
    return ConfigError(f"reward 'regex': pattern {pattern[:60]!r} {why}")


def _flags_allowed(pattern: str) -> None:
    """Verbose mode (x) lets comments hide syntax and version 1 (V1) nests sets: neither is
    needed in a short pattern, and both would make the reading below ambiguous."""
    for match in _INLINE_FLAGS.finditer(pattern):
        flags = match.group(1)
        if "x" in flags or "V1" in flags:
            raise _refuse(pattern, f"uses the inline flag {'V1' if 'V1' in flags else 'x'!r} "
                                   f"({match.group(0)}); write the pattern without it")


def expanded_units(pattern: str) -> int:
    """An upper bound of the pattern's atoms once every counted repeat is written out (a group
    counts its contents, all branches together); ConfigError for a count above MAX_REPEAT."""
    frames = [[0, 0]]  # per open group: [sum of finished items, size of the last item]
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        frame = frames[-1]
        if ch == "\\":  # an escape is one atom; \p{Han} with what its braces hold
            end = min(i + 2, n)
            if i + 1 < n and pattern[i + 1] in _ESCAPE_ARGUMENT:
                argument = _ESCAPE_ARGUMENT[pattern[i + 1]].match(pattern, end)
                end = argument.end() if argument else end
            frame[0] += frame[1]
            frame[1] = 1
            i = end
        elif ch == "[":
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            if j >= n:
                raise _refuse(pattern, "does not compile: a '[' has no ']'")
            frame[0] += frame[1]
            frame[1] = 1
            i = j + 1
        elif ch == "(":
            if pattern.startswith("(?#", i):  # a comment ends at the first ')'
                close = pattern.find(")", i)
                i = n if close < 0 else close + 1
                continue
            frames.append([0, 0])
            opening = _GROUP_OPENING.match(pattern, i + 1)  # (?: (?P<name> (?<= (?i: ... : not atoms
            i = opening.end() if opening else i + 1
        elif ch == ")":
            if len(frames) == 1:
                raise _refuse(pattern, "does not compile: a ')' has no '('")
            inner = frames.pop()
            parent = frames[-1]
            parent[0] += parent[1]
            parent[1] = inner[0] + inner[1]
            i += 1
        elif ch == "{" and (counted := _COUNTED.match(pattern, i)) and any(counted.groups()):
            counts = [int(c) for c in counted.groups() if c]
            if any(c > MAX_REPEAT for c in counts):
                raise _refuse(pattern, f"repeats {max(counts):,} times ({counted.group(0)}); the limit is "
                                       f"{MAX_REPEAT:,} for one repeat")
            frame[1] *= max(max(counts), 1)
            i = counted.end()
        else:  # a literal, '.', an anchor, '|' or a quantifier *, +, ? (which writes out nothing)
            if ch not in "*+?|":
                frame[0] += frame[1]
                frame[1] = 1
            i += 1
    if len(frames) > 1:
        raise _refuse(pattern, "does not compile: a '(' has no ')'")
    return frames[0][0] + frames[0][1]


def check_pattern(pattern: str) -> None:
    """ConfigError unless `pattern` is short, within the repeat bounds and compiles."""
    import regex

    if not pattern:
        raise ConfigError("reward 'regex': pattern is empty; give a regular expression the answer "
                          "should match, e.g. pattern: '月'")
    if len(pattern) > MAX_CHARS:
        raise ConfigError(f"reward 'regex': pattern has {len(pattern)} characters; keep it to "
                          f"{MAX_CHARS} or fewer")
    _flags_allowed(pattern)
    units = expanded_units(pattern)
    if units > MAX_UNITS:
        raise _refuse(pattern, f"is {units:,} atoms long with its repeats written out; the limit is "
                               f"{MAX_UNITS:,} (nested repeats multiply: (?:a{{100}}){{100}} is 10,000)")
    try:
        regex.compile(pattern, cache_pattern=False)
    except regex.error as error:
        raise _refuse(pattern, f"does not compile: {error}") from None


def search(pattern: str, text: str) -> bool:
    """Whether a checked pattern is found in `text`; a search past SEARCH_TIMEOUT_S counts as not found."""
    import regex

    try:
        return regex.compile(pattern, cache_pattern=False).search(text, timeout=SEARCH_TIMEOUT_S) is not None
    except TimeoutError:
        return False

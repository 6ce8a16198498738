"""Bad records: fail at once (strict) or skip a bounded number of them (lenient).

A 1M-line file should not be refused for one broken line when the user says so,
but a file that is mostly broken must still be refused, with the first examples
shown so the user can see what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CorpusError

EXAMPLES_KEPT = 10  # skipped records reported with their position


@dataclass
class Skipped:
    """One bad record that lenient mode left out."""

    file: str       # display name of the file
    position: str   # "line 12", "record 5 (line 7)", "row 3"
    reason: str     # what was found and what was expected

    def __str__(self) -> str:
        return f"{self.file}: {self.position}: {self.reason}"


@dataclass
class Problems:
    """Collects bad records; raises CorpusError when strict or past `max_skipped`."""

    strict: bool = True
    max_skipped: int = 100
    count: int = 0
    examples: list[Skipped] = field(default_factory=list)

    def bad(self, file: str, position: str, reason: str) -> None:
        """Report a bad record: raise in strict mode or once too many are skipped, else skip it."""
        if self.strict:
            raise CorpusError(reason, file, position)
        self.count += 1
        if len(self.examples) < EXAMPLES_KEPT:
            self.examples.append(Skipped(file, position, reason))
        if self.count > self.max_skipped:
            first = ", ".join(f"{s.file} {s.position}" for s in self.examples[:3])
            raise CorpusError(f"{reason} — that is more than {self.max_skipped} bad records (the lenient "
                              f"limit), so the corpus is refused (the first were at {first})", file, position)


def describe(value: object) -> str:
    """A short, safe description of a found value for an error message."""
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(value), type(value).__name__)
    if isinstance(value, str):
        return f"{kind} {snippet(value)}"
    if isinstance(value, dict):
        keys = ", ".join(snippet(str(k), 20) for k in list(value)[:8])
        return f"{kind} with fields [{keys}]"
    if isinstance(value, (int, float, bool)):
        return f"{kind} ({value!r})"
    if isinstance(value, list):
        return f"{kind} of {len(value)} items"
    return kind


def snippet(text: str, limit: int = 60) -> str:
    """`text` quoted, cut to `limit` characters, control characters escaped."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return repr(cut)


def safe_name(name: str) -> str:
    """A file name made safe to print: control characters (newlines, ANSI escapes) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)

"""A user's regular expression, bounded before it compiles anywhere that matters.

The `regex` module expands counted repeats while it compiles: `a{10000000}` takes 2.6 GB,
`a{1000000000}` more memory than a server has, and `(?:ab){4294967294}` runs for minutes; nested
repeats multiply, and full case folding of wide ranges costs tens of KB per range. A reward
pattern comes from a page anyone may use, so it is checked in two steps:

1. any counted repeat above MAX_REPEAT ({m}, {m,n}, {m,} or {,n} anywhere in the text, whatever
   it belongs to) is refused at once, with a sentence saying so;
2. the pattern is then compiled in a child Python process whose address space may grow by at most
   COMPILE_MEMORY_MB and which is stopped after COMPILE_SECONDS: what the module really builds is
   measured by the module itself, so no reading of its syntax can be fooled (`(?i){1000}` repeats
   what comes before it; `\\)` continues a comment).

Nothing is cached: the check compiles in a process that then exits, and scoring compiles each
reward's pattern once, in the trainer, when it first scores (see registry.Reward).
"""

from __future__ import annotations

import re
import subprocess
import sys

from minimind.errors import ConfigError

MAX_CHARS = 200          # characters of a pattern
MAX_REPEAT = 1000        # the largest count of a counted repeat
COMPILE_MEMORY_MB = 128  # what compiling may add to a fresh Python process
COMPILE_SECONDS = 3.0    # Python's start and the compile together
SEARCH_TIMEOUT_S = 0.05  # a search past this scores 0: catastrophic backtracking cannot hang the trainer

_COUNT = re.compile(r"\{(\d*),?(\d*)\}")

# Run by the child: limit its own address space first, then compile the pattern read from stdin.
_COMPILE = f"""
import sys
try:
    import resource
    with open("/proc/self/statm") as statm:
        start = int(statm.read().split()[0]) * resource.getpagesize()
    limit = start + {COMPILE_MEMORY_MB} * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
except (ImportError, OSError, ValueError):
    pass  # no address-space limit on this platform: the time limit still holds
import regex
try:
    regex.compile(sys.stdin.read(), cache_pattern=False)
except regex.error as error:
    print(error)
    sys.exit(2)
except MemoryError:
    sys.exit(3)
"""


def _refuse(pattern: str, why: str) -> ConfigError:
    return ConfigError(f"reward 'regex': pattern {pattern[:60]!r} {why}")


def _repeats_within_bound(pattern: str) -> None:
    for match in _COUNT.finditer(pattern):
        counts = [int(c) for c in match.groups() if c]
        if counts and max(counts) > MAX_REPEAT:
            raise _refuse(pattern, f"repeats {max(counts):,} times ({match.group(0)}); the limit is "
                                   f"{MAX_REPEAT:,} for one repeat")


def _compiles_within_bounds(pattern: str) -> None:
    """Compile in a child within COMPILE_MEMORY_MB and COMPILE_SECONDS; ConfigError otherwise."""
    try:
        done = subprocess.run([sys.executable, "-I", "-c", _COMPILE], input=pattern, text=True, encoding="utf-8",
                              capture_output=True, timeout=COMPILE_SECONDS)
    except subprocess.TimeoutExpired:
        raise _refuse(pattern, f"takes longer than {COMPILE_SECONDS:g} s to compile; write it with fewer or "
                               "smaller repeats") from None
    if done.returncode == 2:
        raise _refuse(pattern, f"does not compile: {done.stdout.strip()}")
    if done.returncode == 3 or done.returncode < 0:
        raise _refuse(pattern, f"needs more than {COMPILE_MEMORY_MB} MB to compile (nested repeats multiply: "
                               "(?:a{100}){100} is 10,000 copies); write it with fewer or smaller repeats")
    if done.returncode != 0:
        raise ConfigError(f"reward 'regex': the pattern could not be checked (exit code {done.returncode})")


def check_pattern(pattern: str) -> None:
    """ConfigError unless `pattern` is short, within the repeat bound and compiles within bounds."""
    if not pattern:
        raise ConfigError("reward 'regex': pattern is empty; give a regular expression the answer "
                          "should match, e.g. pattern: '月'")
    if len(pattern) > MAX_CHARS:
        raise ConfigError(f"reward 'regex': pattern has {len(pattern)} characters; keep it to "
                          f"{MAX_CHARS} or fewer")
    if "\x00" in pattern:
        raise _refuse(pattern, "holds a NUL character; write \\x00 to match one")
    _repeats_within_bound(pattern)
    _compiles_within_bounds(pattern)


def compile_checked(pattern: str):
    """A checked pattern, compiled here (the trainer's copy; nothing cached by the module)."""
    import regex

    return regex.compile(pattern, cache_pattern=False)


def search(compiled, text: str) -> bool:
    """Whether `compiled` is found in `text`; a search past SEARCH_TIMEOUT_S counts as not found."""
    try:
        return compiled.search(text, timeout=SEARCH_TIMEOUT_S) is not None
    except TimeoutError:
        return False

"""Which exact greedy decoder a lone request uses, chosen by timing both where they run.

Plain decoding runs the exact weights once per token. Speculative decoding lets an int8
draft guess several tokens, then checks them all in one exact pass. Both give the same
tokens, so the choice is speed alone. Which one is faster depends on the machine as much as
on the model. MiniMind-Tang (18 MB of float32 matrices) lost 13 % to speculation on a machine
where a step was bound by per-op overhead, and gained 73 % on one bound by memory bandwidth
(benchmarks/NOTES.md). So the engine times both on the requests it serves and keeps the
faster. It tries the other again now and then, because the machine's load and how often
the draft guesses right both change.
"""

from __future__ import annotations

WARMUP = 1      # a decoder's first pass (and its first after the weights change) is not timed: it makes
                # the int8 draft or oneDNN's blocked copies
TRIALS = 3      # timed passes of each decoder before the engine picks one
RECHECK = 50    # once in this many passes, the slower decoder runs again
DECAY = 0.8     # weight kept by the older timings at each new one: recent passes count most


class DecoderChoice:
    """Seconds per token of plain and speculative greedy decoding, as measured in use."""

    def __init__(self):
        self.passes = 0
        self._runs = {False: 0, True: 0}           # passes run by each (False: plain, True: speculative)
        self._untimed = {False: WARMUP, True: WARMUP}  # passes of each still to run untimed
        self._seconds = {False: 0.0, True: 0.0}    # decayed sums of the timed passes
        self._tokens = {False: 0.0, True: 0.0}
        self.tokens = {False: 0, True: 0}          # tokens each has emitted, for reports
        self.timed = {False: 0, True: 0}           # passes of each that were timed

    def seconds_per_token(self, speculative: bool) -> float | None:
        """The decayed mean time of one token, None before a timed pass."""
        tokens = self._tokens[speculative]
        return self._seconds[speculative] / tokens if tokens else None

    def speculate(self) -> bool:
        """The decoder for the next pass: each in turn until both have TRIALS timed passes, then
        the faster, with the slower once in RECHECK passes. (Timed passes, not passes: passes
        that made a draft or followed a change of weights are not timed.)"""
        if min(self.timed.values()) < TRIALS:
            return self._runs[True] < self._runs[False]
        faster = self.seconds_per_token(True) < self.seconds_per_token(False)
        return (not faster) if self.passes % RECHECK == 0 else faster

    def record(self, speculative: bool, seconds: float, tokens: int, made: bool = False) -> None:
        """One pass of `speculative` (or plain) decoding took `seconds` and emitted `tokens`;
        `made`: it made a draft first (not timed, as a first pass is not)."""
        self.passes += 1
        self._runs[speculative] += 1
        self.tokens[speculative] += tokens
        if self._untimed[speculative] > 0 or made:
            self._untimed[speculative] = max(0, self._untimed[speculative] - 1)
        elif tokens > 0:
            self.timed[speculative] += 1
            self._seconds[speculative] = self._seconds[speculative] * DECAY + seconds
            self._tokens[speculative] = self._tokens[speculative] * DECAY + tokens

    def rewarm(self) -> None:
        """The weights changed in place: each decoder's next pass makes its copies again, untimed."""
        self._untimed = {False: WARMUP, True: WARMUP}

    def describe(self) -> str:
        """What the engine has used so far, for logs and benchmark rows."""
        total = sum(self.tokens.values())
        if not total:
            return "timed: no greedy request yet"
        return f"timed: speculative for {100 * self.tokens[True] / total:.0f} % of greedy tokens"

"""Which exact greedy decoder a lone request uses, chosen by timing each where they run.

Plain decoding runs the exact weights once per token. Speculative decoding lets a draft guess
several tokens, then checks them all in one exact pass. Where llama-cpp-python is installed,
llama.cpp can also run the exact float32 weights (cpp_decoder.py). All give the same tokens, so
the choice is speed alone. Which one is faster depends on the machine as much as on the model.
MiniMind-Tang (18 MB of float32 matrices) lost 13 % to speculation on a machine where a step was
bound by per-op overhead, and gained 73 % on one bound by memory bandwidth (benchmarks/NOTES.md).
So the engine times each on the requests it serves and keeps the fastest. It tries the others
again now and then, because the machine's load and how often the draft guesses right both change.

Where the process has more than one PyTorch thread, a request may also run on one thread of the
decode thread's own (threads.py): a small model's passes are bound by per-op overhead, which more
threads add to, while a larger model's products gain from every thread. Which count a request
runs on is timed by whole requests (a DecoderChoice over the two counts, where a "pass" is a
request), and which decoder by pass on each count apart: passes on one count just after passes on
the other time what neither does in a run of its own. On two cores, passes taking turns between
the counts timed 4.9 ms a token on one thread and 5.1 on two, while whole requests ran about 4.6
ms a token on one thread and 6.3 on two (MiniMind-Shakespeare, benchmarks/NOTES.md).

A request keeps the decoder it started with (once the trials are over): moving it between PyTorch
and llama.cpp makes the other read what it missed, a cost no pass's timing shows. Moved whenever
the timings crossed, MiniMind-Tang lost 12 % to its fastest decoder alone (benchmarks/NOTES.md).
A better decoder found meanwhile takes the next request. For the same reason a slower decoder is
rechecked on a request's first pass, where no decoder is behind, not in the middle of an answer.
"""

from __future__ import annotations

WARMUP = 1      # a decoder's first pass (and its first after the weights change) is not timed: it makes
                # the int8 draft, oneDNN's blocked copies or a llama.cpp context
TRIALS = 3      # timed passes of each decoder before the engine picks one
RECHECK = 50    # a slower decoder runs again (the slower ones in turn) on the first request to start this many
                # passes after the last recheck
DECAY = 0.8     # weight kept by the older timings at each new one: recent passes count most
SWITCH = 0.1    # the engine leaves the decoder it uses for one timed this much faster a token: two decoders
                # within the noise would otherwise swap from one request to the next
PLAIN, SPECULATIVE, LLAMA_CPP = "plain", "speculative", "llama.cpp"
PROCESS_THREADS, ONE_THREAD = "the process's threads", "1 thread"   # the counts a request may run on


class DecoderChoice:
    """Seconds per token of each greedy decoder (`names`, in the order they take turns), as measured in use.
    (The engine also times its two thread counts with one, a request standing for a pass.)"""

    def __init__(self, names: tuple[str, ...] = (PLAIN, SPECULATIVE)):
        self.names = list(names)
        self.passes = 0
        self._runs = dict.fromkeys(self.names, 0)         # passes run by each
        self._untimed = dict.fromkeys(self.names, WARMUP)  # passes of each still to run untimed
        self._seconds = dict.fromkeys(self.names, 0.0)    # decayed sums of the timed passes
        self._tokens = dict.fromkeys(self.names, 0.0)
        self.tokens = dict.fromkeys(self.names, 0)        # tokens each has emitted, for reports
        self.timed = dict.fromkeys(self.names, 0)         # passes of each that were timed
        self.current: str | None = None                   # the decoder chosen as the fastest, once trials end
        self._rechecked = 0                               # `passes` at the last recheck
        self._rechecks = 0

    def seconds_per_token(self, name: str) -> float | None:
        """The decayed mean time of one token, None before a timed pass."""
        tokens = self._tokens[name]
        return self._seconds[name] / tokens if tokens else None

    @property
    def settled(self) -> bool:
        """Whether the trials are over (every decoder has had its TRIALS timed passes)."""
        return all(self.timed[name] >= TRIALS for name in self.names)

    def choose(self, leaving_out: str | None = None, keeping: str | None = None) -> str:
        """The decoder for the next pass: those with fewer than TRIALS timed passes in turn, then the
        fastest, with a slower one once RECHECK passes have gone by since the last recheck. (Timed
        passes, not passes: passes that made a draft or followed a change of weights are not
        timed.) `leaving_out`: a decoder that cannot take this pass (see `declined`). `keeping`: the
        decoder the request started with, which it keeps to its end, even where another is now timed
        faster (and no recheck interrupts it)."""
        names = [name for name in self.names if name != leaving_out] or self.names
        untried = [name for name in names if self.timed[name] < TRIALS]
        if untried:
            return min(untried, key=lambda name: self._runs[name])
        if keeping in names:
            return keeping
        ranked = sorted(names, key=self.seconds_per_token)
        if self.current in names and ranked[0] != self.current and \
                self.seconds_per_token(ranked[0]) > (1 - SWITCH) * self.seconds_per_token(self.current):
            ranked.remove(self.current)  # (not faster by SWITCH: it stays)
            ranked.insert(0, self.current)
        if leaving_out is None:
            self.current = ranked[0]
        if self.passes - self._rechecked >= RECHECK and len(ranked) > 1:
            self._rechecked, self._rechecks = self.passes, self._rechecks + 1
            slower = ranked[1:]
            return slower[self._rechecks % len(slower)]
        return ranked[0]

    def drop(self, name: str) -> None:
        """`name` can no longer run (its llama.cpp context failed): choose among the others."""
        if name in self.names and len(self.names) > 1:
            self.names.remove(name)

    def declined(self, name: str) -> None:
        """`name` was chosen but could not take the pass (a sequence past llama.cpp's context): it
        counts as a run, so that the others take their turns, and the caller chooses again without it."""
        self._runs[name] += 1

    def record(self, name: str, seconds: float, tokens: int, made: bool = False) -> bool:
        """One pass of `name` took `seconds` and emitted `tokens`; `made`: it made a draft or a
        context first (not timed, as a first pass is not). True where the pass was timed."""
        self.passes += 1
        self._runs[name] += 1
        self.tokens[name] += tokens
        if self._untimed[name] > 0 or made:
            self._untimed[name] = max(0, self._untimed[name] - 1)
        elif tokens > 0:
            self.timed[name] += 1
            self._seconds[name] = self._seconds[name] * DECAY + seconds
            self._tokens[name] = self._tokens[name] * DECAY + tokens
            return True
        return False

    def rewarm(self) -> None:
        """The weights changed in place: each decoder's next pass makes its copies again, untimed."""
        self._untimed = dict.fromkeys(self._untimed, WARMUP)

    def describe(self, requests: str = "greedy") -> str:
        """What the engine has used so far for lone `requests` ("greedy", "sampled"), for logs and benchmark rows."""
        total = sum(self.tokens.values())
        if not total:
            return f"timed: no {requests} request yet"
        shares = sorted(((n, t) for n, t in self.tokens.items() if t), key=lambda item: -item[1])
        return ("timed: " + ", ".join(f"{name} for {100 * t / total:.0f} %" for name, t in shares)
                + f" of {requests} tokens")

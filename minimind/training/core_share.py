"""Threads of a CPU run whose cores other processes use too.

PyTorch splits each op over one thread per core and waits for the slowest. When another process
keeps a core busy (the studio answering a program's chat while a run trains, a second trainer, a
test), a thread of every op waits for that core: measured on 2 cores (AVX2, a LoRA run of
MiniMind-Tang), a run on 2 threads fell from 2,973 to 424 tokens/s beside a chat decoding on 2
threads, and the chat from 274 to 197 tokens/s; the run on 1 thread kept 1,553-2,032 and the chat
262-373. A lighter neighbour (the page watching the run in a browser on the same machine, 0.6 of
a core) left the two counts about equal. So a run whose `threads` is left at 0 reads, every
`WINDOW_S`, how much CPU time other processes took on the cores it may use (Linux: /proc/stat less
/proc/self/stat). While they keep `BUSY_FROM` of a core or more, it times a window of steps on one
thread fewer per core they hold against the window before on all of its threads (the same load
beside both, else it times them again), and keeps all threads only when they are `ALL_THREADS_BY`
faster; it measures again after `RETRY_S`, or at once when their load moves by `LEVEL_SHIFT`, and
takes all its threads back once they stop. A run with `threads` set keeps them; elsewhere than
Linux nothing changes. Kernels compiled by torch.compile keep the thread count they were built
with; the matmuls between them follow.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

WINDOW_S = 2.0      # seconds of CPU accounting (and of steps) one decision reads (USER_HZ ticks are 10 ms)
MIN_STEPS = 3       # steps a window needs at least, however long they take
BUSY_FROM = 0.4     # of a core, what others must keep busy before fewer threads are tried
RETRY_S = 60.0      # a choice made beside busy neighbours is measured again after this long ...
LEVEL_SHIFT = 0.4   # ... or as soon as their load moves by this many cores from what it was chosen beside
ALL_THREADS_BY = 0.1  # all threads are kept beside busy neighbours only when this much faster a step: a wrong
                      # "all" beside a heavy neighbour cost 10x (1.7 s a step against 0.17), a wrong "fewer" at
                      # most what the threads given up would add


def threads_for(most: int, cores: int, others: float) -> int:
    """The threads to try for a run allowed `most` on `cores` cores while other processes keep
    `others` cores' worth of time busy: one fewer per core they hold (a core counts once they take
    `BUSY_FROM` of it), never fewer than one."""
    held = math.floor(max(0.0, others) + 1.0 - BUSY_FROM)
    return max(1, min(most, cores - held))


def cpu_ticks(cpus: set[int], stat_text: str) -> int | None:
    """Busy ticks (user, nice, system, irq, softirq; guest time is inside user) of `cpus` in the text
    of /proc/stat; None when it names none of them."""
    total, found = 0, False
    for line in stat_text.splitlines():
        name, *fields = line.split() or [""]
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
        total, found = total + user + nice + system + irq + softirq, True
    return total if found else None


def own_ticks(self_stat_text: str) -> int:
    """This process's user + system ticks, every thread included, from the text of /proc/self/stat."""
    fields = self_stat_text.rsplit(")", 1)[1].split()  # (the command name may hold spaces)
    return int(fields[11]) + int(fields[12])


def read_sample(cpus: set[int]) -> tuple[float, int, int] | None:
    """(now, busy ticks of `cpus`, this process's ticks); None where /proc cannot say."""
    try:
        with open("/proc/stat") as fh:
            busy = cpu_ticks(cpus, fh.read())
        with open("/proc/self/stat") as fh:
            own = own_ticks(fh.read())
    except (OSError, ValueError, IndexError):
        return None
    return None if busy is None else (time.perf_counter(), busy, own)


def others_between(before: tuple[float, int, int], after: tuple[float, int, int]) -> float:
    """Cores' worth of time other processes kept busy between two `read_sample`s."""
    (t0, busy0, own0), (t1, busy1, own1) = before, after
    return ((busy1 - busy0) - (own1 - own0)) / os.sysconf("SC_CLK_TCK") / max(t1 - t0, 1e-9)


class ThreadChoice(NamedTuple):
    """A change of the thread count kept: after a timed comparison (`fewer` threads took `fewer_s`
    a step against `all_s` on all), or back to all threads once the cores are free (`fewer` None)."""

    threads: int
    others: float
    fewer: int | None = None
    fewer_s: float = 0.0
    all_s: float = 0.0


@dataclass
class CoreShare:
    """The thread count of one run, told each step's seconds (`after_step`)."""

    most: int                          # the run's threads when it has the cores to itself
    cpus: set[int]                     # the cores this process may run on
    threads: int = 0                   # the count now in force
    others: float = 0.0                # cores' worth of time others took in the last window
    sample: Callable[[set[int]], tuple[float, int, int] | None] = read_sample
    _last: tuple[float, int, int] | None = None
    _steps: list[float] = field(default_factory=list)   # this window's step seconds
    _all_threads_s: float | None = None  # beside the neighbours, a step on `most` threads (the window before a trial)
    _all_threads_others: float = 0.0    # the neighbours' load in that window
    _trying: bool = False              # this window runs on fewer threads, to be compared
    _chosen: int | None = None         # what the last comparison kept ...
    _chosen_at: float = 0.0            # ... when ...
    _level: float = 0.0                # ... and the neighbours' load on the count kept
    _due: bool = False                 # measure again at the next window (all threads were just restored)

    @classmethod
    def start(cls, most: int, cpus: set[int] | None = None, sample=read_sample) -> CoreShare | None:
        """Watching starts here; None where the accounting cannot be read (not Linux)."""
        if cpus is None:
            cpus = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
        share = cls(most=most, cpus=cpus, threads=most, sample=sample)
        share._last = sample(cpus) if cpus and most > 1 else None
        return share if share._last is not None else None

    def _use(self, threads: int) -> None:
        if threads != self.threads:
            torch.set_num_threads(threads)
            self.threads = threads

    def after_step(self, seconds: float) -> ThreadChoice | None:
        """Call after each training step with its seconds; the choice when the count kept changes
        (it is then in force; the run's log says it), else None."""
        self._steps.append(seconds)
        if len(self._steps) < MIN_STEPS or time.perf_counter() - self._last[0] < WINDOW_S:
            return None
        now = self.sample(self.cpus)
        if now is None:
            return None
        self.others, t1 = others_between(self._last, now), now[0]
        self._last, step_s = now, statistics.median(self._steps)
        self._steps.clear()
        if self.others < BUSY_FROM:  # the cores are free (again)
            before, self._trying, self._chosen = self._chosen, False, None
            self._use(self.most)
            return ThreadChoice(self.most, self.others) if before is not None and before < self.most else None
        if self._trying:  # this window ran on fewer threads: keep the faster
            before, self._trying = self._chosen, False
            if abs(self.others - self._all_threads_others) > LEVEL_SHIFT:  # the neighbours changed meanwhile:
                self._use(self.most)             # no comparison; all threads are timed again first
                self._due = True
                return None
            fewer, fewer_s = self.threads, step_s
            faster = self._all_threads_s <= (1 - ALL_THREADS_BY) * fewer_s
            self._chosen, self._chosen_at = (self.most if faster else fewer), t1
            self._level = self.others if self._chosen == fewer else self._all_threads_others
            self._use(self._chosen)
            return None if self._chosen == before else ThreadChoice(self._chosen, self.others, fewer, fewer_s,
                                                                   self._all_threads_s)
        if (self._due or self._chosen is None or t1 - self._chosen_at > RETRY_S
                or abs(self.others - self._level) > LEVEL_SHIFT):  # (re)measure: all threads now, then fewer
            if self.threads != self.most:
                self._use(self.most)  # the next window times all threads beside the neighbours
                self._due = True
                return None
            self._due = False
            fewer = threads_for(self.most, len(self.cpus), self.others)
            if fewer < self.most:
                self._all_threads_s, self._all_threads_others, self._trying = step_s, self.others, True
                self._use(fewer)
        return None

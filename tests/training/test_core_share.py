"""A CPU run that shares its cores: how many threads it tries beside busy neighbours, how it reads
the kernel's accounting, the measured choice between all threads and fewer, and a real run beside a
process that keeps a core busy."""

import os
import re
import subprocess
import sys
import time

import pytest
import torch
from training_helpers import make_config, write_text_corpus

from minimind.training import RunDir, core_share, train
from minimind.training.core_share import (CoreShare, ThreadChoice, cpu_ticks, others_between, own_ticks, read_sample,
                                          threads_for)

linux_only = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux's /proc")


@pytest.mark.parametrize("most, cores, others, expected", [
    (2, 2, 0.0, 2), (2, 2, 0.3, 2), (2, 2, 0.45, 1), (2, 2, 1.0, 1), (2, 2, 1.9, 1),
    (8, 8, 2.5, 5), (4, 8, 1.0, 4), (8, 8, 30.0, 1), (1, 2, 1.0, 1)])
def test_one_thread_fewer_per_core_the_others_hold(most, cores, others, expected):
    assert threads_for(most, cores, others) == expected


def test_the_accounting_is_read_for_our_cores_and_our_process_only():
    stat = ("cpu  900 0 900 9000 0 0 0 0 0 0\n"
            "cpu0 100 1 20 5000 7 3 4 50 0 0\n"
            "cpu1 300 2 40 4000 9 5 6 60 0 0\n"
            "cpu2 999 9 99 1000 9 9 9 0 0 0\n"
            "intr 12345\nctxt 999\n")
    assert cpu_ticks({0, 1}, stat) == (100 + 1 + 20 + 3 + 4) + (300 + 2 + 40 + 5 + 6)  # idle, iowait, steal out
    assert cpu_ticks({1}, stat) == 353
    assert cpu_ticks({7}, stat) is None
    # the command name may hold spaces and a parenthesis: the fields are counted after the last one
    assert own_ticks("4242 (python (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3") == 325


class Kernel:
    """A stand-in for /proc: a window is `seconds` in which this process uses one core, others `others`."""

    def __init__(self):
        self.t, self.busy, self.own = 0.0, 0, 0

    def sample(self, cpus):
        return self.t, self.busy, self.own

    def window(self, others: float, seconds: float):
        tick = os.sysconf("SC_CLK_TCK")
        self.t += seconds
        self.own += round(seconds * tick)
        self.busy += round(seconds * tick) + round(seconds * others * tick)


@pytest.fixture
def threads_kept():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _window(share: CoreShare, kernel: Kernel, others: float, step_s: float, seconds: float = 1.0) -> list:
    kernel.window(others, seconds)
    return [share.after_step(step_s) for _ in range(core_share.MIN_STEPS)]


def test_fewer_threads_are_timed_against_all_and_the_faster_kept(threads_kept, monkeypatch):
    monkeypatch.setattr(core_share, "WINDOW_S", 0.0)
    kernel = Kernel()
    share = CoreShare.start(2, cpus={0, 1}, sample=kernel.sample)
    # alone: all threads, nothing said
    assert _window(share, kernel, 0.05, 0.1) == [None] * 3 and share.threads == 2
    # a neighbour takes a core: this window on 2 threads is the reference, the next one tries 1
    assert _window(share, kernel, 1.0, 0.3)[-1] is None and share.threads == 1
    assert torch.get_num_threads() == 1
    kept = _window(share, kernel, 1.0, 0.1)[-1]
    assert share.threads == 1 and kept == ThreadChoice(threads=1, others=1.0, fewer=1, fewer_s=0.1, all_s=0.3)
    assert _window(share, kernel, 1.0, 0.1) == [None] * 3 and share.threads == 1  # kept, not re-tried yet
    # after RETRY_S: one window on all threads again, one on fewer; the same choice is not logged again
    assert _window(share, kernel, 1.0, 0.1, seconds=core_share.RETRY_S)[-1] is None and share.threads == 2
    assert _window(share, kernel, 1.0, 0.3)[-1] is None and share.threads == 1
    assert _window(share, kernel, 1.0, 0.1)[-1] is None and share.threads == 1
    # the neighbour leaves: all threads back at once
    assert _window(share, kernel, 0.0, 0.1)[-1] == ThreadChoice(threads=2, others=0.0)
    assert share.threads == 2 and torch.get_num_threads() == 2


def test_fewer_threads_that_are_slower_are_not_kept(threads_kept, monkeypatch):
    monkeypatch.setattr(core_share, "WINDOW_S", 0.0)
    kernel = Kernel()
    share = CoreShare.start(2, cpus={0, 1}, sample=kernel.sample)
    _window(share, kernel, 0.6, 0.09)   # a light neighbour (a browser watching the run): 2 threads timed ...
    kept = _window(share, kernel, 0.6, 0.11)[-1]  # ... then 1, slower
    assert share.threads == 2 and kept.threads == 2 and (kept.fewer, kept.fewer_s, kept.all_s) == (1, 0.11, 0.09)
    # nothing frees the cores, so nothing more is said until the next measurement
    assert _window(share, kernel, 0.6, 0.09) == [None] * 3
    # a heavier neighbour arrives (a program chatting through /v1): measured again at once, not in a minute
    assert _window(share, kernel, 1.3, 0.3)[-1] is None and share.threads == 1
    assert _window(share, kernel, 1.3, 0.1)[-1] == ThreadChoice(threads=1, others=1.3, fewer=1, fewer_s=0.1, all_s=0.3)


def test_a_comparison_across_a_change_of_load_is_not_made_and_all_threads_win_only_by_a_margin(
        threads_kept, monkeypatch):
    monkeypatch.setattr(core_share, "WINDOW_S", 0.0)
    kernel = Kernel()
    share = CoreShare.start(2, cpus={0, 1}, sample=kernel.sample)
    # a chat begins within the window on all threads: its steps look fast beside half a core ...
    assert _window(share, kernel, 0.5, 0.09)[-1] is None and share.threads == 1
    # ... and the window on one thread runs beside the whole chat: not compared, all threads timed again
    assert _window(share, kernel, 1.3, 0.15)[-1] is None and share.threads == 2
    assert _window(share, kernel, 1.3, 1.7)[-1] is None and share.threads == 1
    assert _window(share, kernel, 1.3, 0.17)[-1] == ThreadChoice(threads=1, others=1.3, fewer=1, fewer_s=0.17,
                                                                  all_s=1.7)
    # beside a light neighbour, all threads 5 % faster is not enough to take them back
    share = CoreShare.start(2, cpus={0, 1}, sample=kernel.sample)
    _window(share, kernel, 0.6, 0.095)
    assert _window(share, kernel, 0.6, 0.1)[-1].threads == 1 and share.threads == 1


def test_nothing_to_share_with_one_thread_or_without_the_accounting():
    assert CoreShare.start(1, cpus={0, 1}, sample=Kernel().sample) is None  # one thread has nothing to give
    assert CoreShare.start(2, cpus={0, 1}, sample=lambda cpus: None) is None  # no /proc (macOS, Windows)


def _burner(cpu: int) -> subprocess.Popen:
    """A process that keeps one core busy."""
    return subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])


@linux_only
def test_the_kernel_accounting_sees_a_process_that_keeps_a_core_busy():
    cpus = sorted(os.sched_getaffinity(0))
    burner = _burner(cpus[0])
    try:
        time.sleep(0.5)  # (the burner's start, an interpreter's, is not its loop)
        before = read_sample({cpus[0]})
        time.sleep(1.0)
        after = read_sample({cpus[0]})
    finally:
        burner.kill()
        burner.wait()
    assert before is not None and after is not None
    assert others_between(before, after) > 0.5  # (the core is shared with whatever else runs here)


@linux_only
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity") else True,
                    reason="needs two cores")
@pytest.mark.parametrize("threads", [0, 2])
def test_a_run_on_default_threads_measures_fewer_beside_a_busy_core_and_a_pinned_one_does_not(
        tmp_path, threads, threads_kept, monkeypatch):
    monkeypatch.setattr(core_share, "WINDOW_S", 0.3)
    cpus = sorted(os.sched_getaffinity(0))[:2]
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], max_steps=120 if not threads else 40, threads=threads)
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(cpus))  # this process on two cores, one of them kept busy
    torch.set_num_threads(2)  # PyTorch's default on two cores
    burner = _burner(cpus[0])
    try:
        time.sleep(0.5)
        status = train(cfg)
    finally:
        burner.kill()
        burner.wait()
        os.sched_setaffinity(0, affinity)
    log = RunDir(tmp_path / "run").log_file.read_text()
    assert status["state"] == "finished"
    measured = [line for line in log.splitlines() if "other processes keep" in line]
    device = RunDir(tmp_path / "run").read_status()["device"]
    if threads:
        assert not measured and device.startswith("CPU (2 threads")
    else:
        assert measured and re.search(r"a step took [\d.]+s on 1 of 2 threads, [\d.]+s on all; training on [12]$",
                                      measured[0])
        # the page's Device line names the threads of the last change
        last = [line for line in log.splitlines() if "training on" in line][-1].split("training on ")[1].split()[0]
        assert device.startswith(f"CPU ({last} thread{'s' * (last != '1')}")
    assert torch.get_num_threads() == 2  # the run gives back the threads it found

"""Page work in a bounded child: its result comes back, its typed error comes back with its message,
and memory or time past the limit stops the child (not the server) with a message that names the setting."""

import os
import threading
import time

import pytest

from minimind.errors import CorpusError
from webapp.bounded import BoundedWork, WorkLimitError, WorkLimits, run_bounded

LIMITS = WorkLimits(memory_mb=400, seconds=20)


def _allocate(mb: int) -> int:
    return len(bytearray(mb * 2**20))


def _tensor(n: int) -> float:
    import torch

    return float(torch.ones(n, n).sum())


def _refuse(message: str):
    raise CorpusError(message, "poems.jsonl", "line 3")


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _pid() -> int:
    return os.getpid()


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_the_result_and_the_childs_own_error_come_back():
    assert run_bounded(_allocate, 50, limits=LIMITS, what="the test") == 50 * 2**20
    assert run_bounded(_pid, limits=LIMITS, what="the test") != os.getpid()
    with pytest.raises(CorpusError, match=r"^poems.jsonl: line 3: no such field$") as caught:
        run_bounded(_refuse, "no such field", limits=LIMITS, what="the test")
    assert caught.value.file == "poems.jsonl" and caught.value.position == "line 3"


@pytest.mark.parametrize("fn, arg", [(_allocate, 2000), (_tensor, 20_000)])
def test_memory_past_the_limit_stops_the_child_not_the_server(fn, arg):
    before = _rss_mb()
    started = time.perf_counter()
    with pytest.raises(WorkLimitError, match=r"needed more than the 400 MB .* MINIMIND_WORK_MEMORY_MB"):
        run_bounded(fn, arg, limits=LIMITS, what="the test")
    assert time.perf_counter() - started < 10
    assert _rss_mb() - before < 50


def test_time_past_the_limit_stops_the_child():
    started = time.perf_counter()
    with pytest.raises(WorkLimitError, match=r"took longer than 6 s .* MINIMIND_WORK_SECONDS"):
        run_bounded(_sleep, 60, limits=WorkLimits(memory_mb=400, seconds=6), what="the test")
    assert time.perf_counter() - started < 10


def test_limits_come_from_the_environment_and_bad_values_stop_the_server():
    limits = WorkLimits.from_env({"MINIMIND_WORK_MEMORY_MB": "1024", "MINIMIND_WORK_SECONDS": "30",
                                  "MINIMIND_MAX_CORPUS_CHARS": "5000"})
    assert limits == WorkLimits(1024, 30.0, 5000)
    assert WorkLimits.from_env({}).memory_mb >= 2048
    for bad in ({"MINIMIND_WORK_MEMORY_MB": "lots"}, {"MINIMIND_WORK_SECONDS": "-1"}):
        with pytest.raises(SystemExit, match="must be a number of at least"):
            WorkLimits.from_env(bad)


def test_the_pages_work_runs_one_child_at_a_time_and_a_request_waits_at_most_the_time_limit():
    work = BoundedWork(WorkLimits(memory_mb=400, seconds=5))
    first = threading.Thread(target=work.run, args=(_sleep, 3), kwargs={"what": "the first"})
    first.start()
    time.sleep(0.5)
    started = time.perf_counter()
    assert work.run(_pid, what="the second") != os.getpid()  # it waited for the first to finish
    assert time.perf_counter() - started > 2
    first.join()
    busy = BoundedWork(WorkLimits(memory_mb=400, seconds=1))
    with busy._slot:  # another visitor's work holds the slot past this one's time limit
        with pytest.raises(WorkLimitError, match="busy with other visitors' work and could not start the next"):
            busy.run(_pid, what="the next")

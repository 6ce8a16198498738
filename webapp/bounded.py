"""Work a visitor states, run in a child process with a memory and a time limit.

An estimate trains a few steps, an inspection decodes a corpus, a tokenizer learns one: each grows
with what a visitor typed or uploaded, and in the web process one such request could take the
memory or the minutes of every other visitor (batch 2 x 8192 added 2.6 GB to the server and kept
it). So the page runs them here: in a child forked from a clean, single-threaded server process
(multiprocessing's forkserver, the library preloaded, so a child starts in well under a second),
whose address space may grow by at most `memory_mb` (RLIMIT_AS) and which is killed at its
deadline. The caller gets the result, the child's own MiniMindError, or a WorkLimitError naming
the limit and the setting that raises it; the child's memory goes back to the system with it.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from minimind.errors import MiniMindError

log = logging.getLogger(__name__)

# imported once by the fork server, so that each child starts with them loaded
PRELOAD = ["minimind", "minimind.data", "minimind.tokenizer", "minimind.vocabulary", "minimind.training.estimate",
           "minimind.export.heldout", "webapp.work"]
DEFAULT_SECONDS = 300.0
DEFAULT_CORPUS_CHARS = 200_000_000


class WorkLimitError(MiniMindError):
    """Work stopped at its memory or time limit; the message names the limit and its setting."""


def _total_memory_mb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError, AttributeError):
        return 8192


@dataclass(frozen=True)
class WorkLimits:
    """How much one piece of page work may take: memory beyond what its process starts with, in MB
    (MINIMIND_WORK_MEMORY_MB; default a quarter of this machine's memory, at least 2 GB), wall-clock
    seconds (MINIMIND_WORK_SECONDS; default 300), and the characters one corpus may decode to
    (MINIMIND_MAX_CORPUS_CHARS; default 200 million, about a 200 MB upload of plain text)."""

    memory_mb: int = 2048
    seconds: float = DEFAULT_SECONDS
    corpus_chars: int = DEFAULT_CORPUS_CHARS

    @classmethod
    def from_env(cls, env=None) -> "WorkLimits":
        env = os.environ if env is None else env
        memory = _setting(env, "MINIMIND_WORK_MEMORY_MB", max(2048, _total_memory_mb() // 4), 256)
        seconds = _setting(env, "MINIMIND_WORK_SECONDS", DEFAULT_SECONDS, 5)
        chars = _setting(env, "MINIMIND_MAX_CORPUS_CHARS", DEFAULT_CORPUS_CHARS, 1000)
        return cls(int(memory), float(seconds), int(chars))


def _setting(env, name: str, default: float, low: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= low:
        raise SystemExit(f"{name} must be a number of at least {low:g}, got {raw!r}")
    return value


def _context():
    """The fork server where the platform has one (Linux, macOS); spawn elsewhere."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        return context
    return multiprocessing.get_context("spawn")


def start_server() -> None:
    """Start the fork server now (it imports the library once, a few seconds), not at the first request."""
    context = _context()
    if context.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def _out_of_memory(err: BaseException) -> bool:
    """MemoryError, or torch's and other C allocators' way of saying the same."""
    text = str(err).lower()
    return isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError" or (
        isinstance(err, RuntimeError) and ("can't allocate memory" in text or "not enough memory" in text))


def _child(connection, fn: Callable, args: tuple, memory_mb: int) -> None:
    try:
        import resource

        with open("/proc/self/statm") as statm:  # the address space the child starts with, in pages
            start = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = start + memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, OSError, ValueError):
        pass  # no resource limits on this platform: the time limit still holds
    try:
        outcome = ("ok", fn(*args))
    except MiniMindError as err:
        outcome = ("error", err)
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which decides
        if _out_of_memory(err):
            outcome = ("memory", None)
        else:
            traceback.print_exc()
            outcome = ("bug", f"{type(err).__name__}")
    try:
        connection.send(outcome)
    except Exception:  # an unpicklable error: say it was a bug
        traceback.print_exc()
        connection.send(("bug", "unpicklable result"))
    connection.close()


class BoundedWork:
    """The page's bounded work, one child at a time: the memory limit is then also the most all of
    the page's children take together (an estimate, an inspection and a save at once would
    otherwise take three times it). A request waits for the slot at most the time limit."""

    def __init__(self, limits: WorkLimits):
        self.limits = limits
        self._slot = threading.Lock()

    def run(self, fn: Callable, *args, what: str):
        if not self._slot.acquire(timeout=self.limits.seconds):
            raise WorkLimitError(f"the server is busy with other visitors' work and could not start {what} within "
                                 f"{self.limits.seconds:g} s; try again in a minute")
        try:
            return run_bounded(fn, *args, limits=self.limits, what=what)
        finally:
            self._slot.release()


def run_bounded(fn: Callable, *args, limits: WorkLimits, what: str):
    """fn(*args) in a child process within `limits`; `what` names the work in messages ("the
    estimate"). Raises the child's MiniMindError, or WorkLimitError at a limit."""
    context = _context()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(sender, fn, args, limits.memory_mb), daemon=True)
    child.start()
    sender.close()
    try:
        if not receiver.poll(limits.seconds):
            raise WorkLimitError(f"{what} took longer than {limits.seconds:g} s and was stopped; ask for less "
                                 "(fewer or smaller files, a shorter sequence, a smaller batch) or raise "
                                 "MINIMIND_WORK_SECONDS on the server")
        kind, value = receiver.recv()
    except EOFError:  # the child died without a word: killed by the kernel or an allocator's abort
        kind, value = "memory", None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receiver.close()
    if kind == "ok":
        return value
    if kind == "error":
        raise value
    if kind == "memory":
        log.warning("%s stopped at its memory limit (%d MB; exit code %s)", what, limits.memory_mb, child.exitcode)
        raise WorkLimitError(f"{what} needed more than the {limits.memory_mb:,} MB of memory this server allows "
                             "for it and was stopped; ask for less (a smaller batch or sequence length, fewer or "
                             "smaller files) or raise MINIMIND_WORK_MEMORY_MB on the server")
    raise RuntimeError(f"{what} failed in its child process ({value}); the server log has the traceback")

"""The engine's one-thread decoders: a lone request's PyTorch passes timed on the process's threads
and on one of the decode thread's own (minimind/inference/threads.py), the same tokens either way,
and no other thread of the process moved off its count."""

import threading
import time

import pytest
import torch

from minimind import MiniMindForCausalLM
from minimind.inference import Engine, Sampler, threads
from minimind.inference.decoder_choice import (LLAMA_CPP, ONE_THREAD, PLAIN, PROCESS_THREADS, SPECULATIVE,
                                               RECHECK, TRIALS, WARMUP)

from helpers import tiny_config

pytestmark = pytest.mark.skipif(not threads.settable(), reason="this PyTorch build has no OpenMP")
PROMPT = [250] * 3 + list(range(40, 70))


@pytest.fixture
def two_threads():
    """The process on two PyTorch threads, as the page runs on a 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _model():
    torch.manual_seed(0)
    return MiniMindForCausalLM(tiny_config()).eval()


def _idle(engine):
    """Wait for the decode thread to end: it records a request's timing just after its last token."""
    thread = engine.retire()
    if thread is not None:
        thread.join(timeout=30)


def _counting(engine):
    """Note the PyTorch thread count each plain or speculative pass of `engine` runs on, as seen
    inside the pass, on the decode thread."""
    seen = []
    step, speculate = engine._step, engine._speculate
    engine._step = lambda active: seen.append(("plain", len(active), torch.get_num_threads())) or step(active)
    engine._speculate = lambda r: seen.append(("speculative", 1, torch.get_num_threads())) or speculate(r)
    return seen


def test_each_request_runs_on_one_count_the_counts_take_turns_and_the_tokens_stay(two_threads):
    """A request's passes all run on the thread count its first pass drew: passes on one count just
    after passes on the other time what neither does alone (decoder_choice.py). The counts take
    turns by request, then the faster one is kept; the decoders are timed on each count apart."""
    model = _model()
    expected = list(Engine(model, speculate=False).submit(PROMPT, Sampler(512), 60))
    engine = Engine(model, draft="int8", llama_cpp=False)
    assert engine.choice.names == engine.one_thread[True].names == [PLAIN, SPECULATIVE]
    assert engine.sampled_choice.names == engine.one_thread[False].names == [PLAIN]
    seen = _counting(engine)
    counts = []
    for _ in range(2 * (WARMUP + TRIALS) + 2):
        seen.clear()
        assert list(engine.submit(PROMPT, Sampler(512), 60)) == expected
        counts.append({count for _, _, count in seen})
    _idle(engine)
    assert all(len(c) == 1 for c in counts), counts
    assert [c.pop() for c in counts[:2 * (WARMUP + TRIALS)]] == [2, 1] * (WARMUP + TRIALS)
    assert engine.counts[True].settled and engine.counts[False].timed == {PROCESS_THREADS: 0, ONE_THREAD: 0}
    assert engine.choice.settled and engine.one_thread[True].settled  # each count timed its decoders
    assert "; on 1 thread, timed: " in engine.describe() and "; threads timed: " in engine.describe()

    # one count made far slower, then the other: the requests follow (the slower one is rechecked
    # on whole requests now and then, decoder_choice.RECHECK)
    speculate, step = engine._speculate, engine._step
    for slow, kept in ((2, ONE_THREAD), (1, PROCESS_THREADS)):
        engine._step = lambda active, slow=slow: (torch.get_num_threads() == slow and time.sleep(0.01)) or step(active)
        engine._speculate = lambda r, slow=slow: (torch.get_num_threads() == slow and time.sleep(0.08)) or speculate(r)
        for _ in range(3 * RECHECK):
            assert list(engine.submit(PROMPT, Sampler(512), 8)) == expected[:8]
        _idle(engine)
        assert engine.counts[True].current == kept
    engine._step, engine._speculate = step, speculate

    # a sampled request takes turns on both counts too, with the same seeded tokens as plain alone
    sampled = list(Engine(model, speculate=False).submit(PROMPT, Sampler(512, temperature=0.9, seed=3), 30))
    for _ in range(2 * (WARMUP + TRIALS)):
        assert list(engine.submit(PROMPT, Sampler(512, temperature=0.9, seed=3), 30)) == sampled
    _idle(engine)
    assert engine.counts[False].settled


def test_only_the_decode_thread_changes_its_count(two_threads):
    """A thread that starts while the decode thread is on one thread, and the thread that asked,
    keep the process's count; batched passes run on it too."""
    engine = Engine(_model(), draft="int8", llama_cpp=False)
    seen = _counting(engine)
    during = []
    outside = threading.Thread(target=lambda: during.append(torch.get_num_threads()))
    step = engine._step

    def step_and_look(active):  # a thread started from inside a one-thread pass, as a handler might be
        if torch.get_num_threads() == 1 and not during:
            outside.start()
            outside.join()
        return step(active)

    engine._step = step_and_look
    for _ in range(2):
        list(engine.submit(PROMPT, Sampler(512), 40))
    assert during == [2] and torch.get_num_threads() == 2

    # several requests at once: batched passes on the process's count
    engine._step = lambda active: seen.append(("plain", len(active), torch.get_num_threads())) or step(active)
    streams = [engine.submit(PROMPT, Sampler(512, temperature=0.9, seed=i), 20) for i in range(3)]
    for stream in streams:
        list(stream)
    batched = [count for name, rows, count in seen if rows > 1]
    assert batched and set(batched) == {2}


def test_no_one_thread_requests_where_they_cannot_differ_or_are_turned_off(two_threads):
    model = _model()
    engine = Engine(model, draft="int8", llama_cpp=False, one_thread=False)
    assert engine.one_thread is None and engine.counts is None and engine.sampled_choice is None
    assert Engine(model, speculate=False).one_thread is None  # a decoder asked for runs as asked
    torch.set_num_threads(1)
    engine = Engine(model, draft="int8", llama_cpp=False)
    assert engine.one_thread is None and engine.choice.names == [PLAIN, SPECULATIVE]
    assert LLAMA_CPP not in engine.choice.names


def test_a_process_without_openmps_setter_decodes_on_its_own_count(two_threads, monkeypatch):
    """Where OpenMP's per-thread setter cannot be found (no such symbol; Windows, where ctypes cannot
    open the process itself), the engine offers no one-thread requests and `use` changes nothing."""
    import ctypes

    for failure in (TypeError("LoadLibrary() argument 1 must be str, not None"), OSError("no such library")):
        def missing(*args, failure=failure, **kwargs):
            raise failure

        monkeypatch.setattr(ctypes, "CDLL", missing)
        threads._omp_set_num_threads.cache_clear()
        try:
            assert not threads.settable() and threads.use(1) is False
            assert Engine(_model(), draft="int8", llama_cpp=False).one_thread is None
        finally:
            monkeypatch.undo()
            threads._omp_set_num_threads.cache_clear()
    assert threads.settable()

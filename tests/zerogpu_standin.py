"""A ZeroGPU stand-in that behaves as the platform does for one GPU call (read from the `spaces`
package, 0.51: zero/wrappers.py, client.py), so slices can be tested on a CPU:

- the call runs in a *forked* worker process: its arguments are pickled in the caller first (an
  unpicklable one fails there), its result pickled back; nothing the call changes in memory
  reaches the caller;
- the duration is enforced from outside: past it (plus `grace`) the worker is killed with SIGKILL
  (a running ZeroGPU task ignores SIGTERM), and the caller gets gradio.Error("GPU task aborted",
  title "ZeroGPU worker error"), as when the platform's sentinel sees its worker die;
- an exception inside the call reaches the caller as gradio.Error(<its class name>), the way the
  platform passes it on (a gradio.Error passes unchanged);
- a generator function streams: each yielded value is pickled back as it comes, and closing the
  caller's generator stops the worker at its next yield.

`calls` records each call's (duration, seconds taken, outcome) for the tests to inspect.
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import pickle
import signal
import time
import traceback

import gradio as gr


def _worker(fn, payload: bytes, results) -> None:
    try:
        args, kwargs = pickle.loads(payload)
        outcome = ("ok", fn(*args, **kwargs))
    except BaseException as err:  # noqa: BLE001 - everything goes back to the caller, as ZeroGPU does
        traceback.print_exc()
        outcome = ("error", err if isinstance(err, gr.Error) else type(err).__name__)
    results.put(pickle.dumps(outcome))


def _stream_worker(fn, payload: bytes, results, stop) -> None:
    try:
        args, kwargs = pickle.loads(payload)
        for item in fn(*args, **kwargs):
            if stop.is_set():
                break
            results.put(pickle.dumps(("item", item)))
        outcome = ("end", None)
    except BaseException as err:  # noqa: BLE001
        traceback.print_exc()
        outcome = ("error", err if isinstance(err, gr.Error) else type(err).__name__)
    results.put(pickle.dumps(outcome))


def _raise(value):
    raise value if isinstance(value, gr.Error) else gr.Error(value, title="ZeroGPU worker error")


class StandInGpu:
    """`gpu = StandInGpu(grace=0.0)`; `gpu(duration)(fn)` is what `spaces.GPU(duration=...)(fn)` is on ZeroGPU."""

    def __init__(self, grace: float = 0.0):
        self.grace = grace
        self.calls: list[dict] = []

    def __call__(self, duration: float):
        def decorate(fn):
            if inspect.isgeneratorfunction(fn):
                return self._streaming(fn, duration)

            def call(*args, **kwargs):
                payload = pickle.dumps((args, kwargs))  # PicklingError here, in the caller
                context = multiprocessing.get_context("fork")
                results = context.SimpleQueue()
                started = time.monotonic()
                worker = context.Process(target=_worker, args=(fn, payload, results), daemon=True)
                worker.start()
                deadline = started + duration + self.grace
                while worker.is_alive() and results.empty() and time.monotonic() < deadline:
                    time.sleep(0.02)
                outcome = pickle.loads(results.get()) if not results.empty() else None
                if outcome is None and worker.is_alive():
                    os.kill(worker.pid, signal.SIGKILL)  # the platform ends an overrunning task
                worker.join()
                record = {"duration": duration, "seconds": time.monotonic() - started}
                self.calls.append(record)
                if outcome is None:
                    record["outcome"] = "aborted"
                    raise gr.Error("GPU task aborted", title="ZeroGPU worker error")
                kind, value = outcome
                record["outcome"] = kind
                if kind == "error":
                    _raise(value)
                return value

            return call

        return decorate

    def _streaming(self, fn, duration: float):
        def stream(*args, **kwargs):
            payload = pickle.dumps((args, kwargs))
            context = multiprocessing.get_context("fork")
            results, stop = context.SimpleQueue(), context.Event()
            started = time.monotonic()
            worker = context.Process(target=_stream_worker, args=(fn, payload, results, stop), daemon=True)
            worker.start()
            record = {"duration": duration, "outcome": "running"}
            self.calls.append(record)
            try:
                while True:
                    if not results.empty():
                        kind, value = pickle.loads(results.get())
                        if kind == "item":
                            yield value
                            continue
                        record["outcome"] = "ok" if kind == "end" else "error"
                        if kind == "error":
                            _raise(value)
                        return
                    if not worker.is_alive() and results.empty():
                        record["outcome"] = "aborted"
                        raise gr.Error("GPU task aborted", title="ZeroGPU worker error")
                    if time.monotonic() > started + duration + self.grace:
                        os.kill(worker.pid, signal.SIGKILL)
                        record["outcome"] = "aborted"
                        raise gr.Error("GPU task aborted", title="ZeroGPU worker error")
                    time.sleep(0.005)
            finally:
                if record["outcome"] == "running":
                    record["outcome"] = "closed"  # the caller stopped reading: the worker stops at its next yield
                stop.set()
                worker.join(timeout=10)
                if worker.is_alive():
                    os.kill(worker.pid, signal.SIGKILL)
                    worker.join()
                record["seconds"] = time.monotonic() - started

        return stream

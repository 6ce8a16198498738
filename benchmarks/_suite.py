"""The suite behind `python -m minimind bench`: find the benchmark modules, run each in a
child process, collect rows and summaries, and hand them to the report writer.

A child process per benchmark keeps one benchmark's crash, timeout, memory or
thread setting from touching the next; the child writes its result (or the
traceback of its failure) to a JSON file the parent reads.

    python -m benchmarks._suite --child NAME --json OUT [--quick] [--tiny] [--threads N]
"""

from __future__ import annotations

import argparse
import collections
import importlib
import inspect
import json
import os
import pkgutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The order of the report; modules not named here follow alphabetically.
ORDER = ["train_throughput", "finetune", "decode_throughput", "quality", "step_profile", "data_prep",
         "attention", "export_quality"]


def discover() -> dict[str, str]:
    """{module name: description} of every benchmark module (public modules with run())."""
    found = {}
    for info in pkgutil.iter_modules([str(HERE)]):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"benchmarks.{info.name}")
        except Exception as err:  # noqa: BLE001 -- listed anyway: running it reports the error
            found[info.name] = f"(cannot be imported: {type(err).__name__}: {err})"
            continue
        if callable(getattr(module, "run", None)):
            found[info.name] = getattr(module, "DESCRIPTION", "")
    rank = {name: i for i, name in enumerate(ORDER)}
    return dict(sorted(found.items(), key=lambda kv: (rank.get(kv[0], len(ORDER)), kv[0])))


# ---------------------------------------------------------------- child side

def run_child(name: str, quick: bool, tiny: bool, threads: int, out: Path) -> None:
    """Run one benchmark in this process and write {rows, summary, ...} or {error} to `out`."""
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if threads:
        torch.set_num_threads(threads)
    from benchmarks._report import _git_commit

    record: dict = {"threads": torch.get_num_threads(), "commit": _git_commit()}
    start = time.perf_counter()
    try:
        module = importlib.import_module(f"benchmarks.{name}")
        kwargs = {"tiny": True} if tiny else {}
        if tiny and "tiny" not in inspect.signature(module.run).parameters:
            raise ValueError(f"{name} has no tiny size")
        result = module.run(quick, **kwargs)
        record.update(rows=result["rows"], summary=result["summary"],
                      headline=list(getattr(module, "HEADLINE", [])))
        if "threads" in result:  # a benchmark whose runs set their own threads (quality, side by side)
            record["threads"] = result["threads"]
    except BaseException as err:  # noqa: BLE001 -- reported in the table, whatever it was
        record["error"] = f"{type(err).__name__}: {err}"
        record["traceback"] = traceback.format_exc()[-3000:]
    record["seconds"] = time.perf_counter() - start
    out.write_text(json.dumps(record, default=_jsonable, ensure_ascii=False), encoding="utf-8")


def _jsonable(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


# ---------------------------------------------------------------- parent side

def _run_one(name: str, quick: bool, tiny: bool, threads: int, timeout: int, device: str = "cpu") -> dict:
    """One benchmark in a child process, its output echoed with a prefix; a failed, crashed or
    timed-out child becomes a record with status and the end of its output."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "benchmarks._suite", "--child", name, "--json", str(out)]
        cmd += ["--quick"] * quick + ["--tiny"] * tiny + (["--threads", str(threads)] if threads else [])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
            env.setdefault(key, "1")
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        env["MINIMIND_BENCH_DEVICE"] = device
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", start_new_session=True)
        timed_out = threading.Event()

        def kill():
            timed_out.set()
            os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        tail: collections.deque = collections.deque(maxlen=30)
        try:
            for line in proc.stdout:
                tail.append(line.rstrip())
                print(f"[{name}] {line}", end="", flush=True)
            code = proc.wait()
        finally:
            timer.cancel()
        seconds = time.perf_counter() - start
        record = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
    record.update(name=name, wall_s=seconds, quick=quick, tiny=tiny,
                  measured=time.strftime("%Y-%m-%d %H:%M %Z"))
    if timed_out.is_set():
        record.update(status="timed out", error=f"stopped after {timeout} s")
    elif "error" in record:
        record["status"] = "failed"
    elif code != 0 or "rows" not in record:
        record.update(status="crashed", error=f"exit code {code}: " + " | ".join(list(tail)[-5:]))
    else:
        record["status"] = "ok"
    if record["status"] != "ok":
        record.setdefault("output_tail", "\n".join(tail))
    return record


def run_suite(names: list[str], quick: bool, tiny: bool, threads: int, timeout: int, out_dir: Path,
              command: str, device: str = "cpu") -> list[dict]:
    """Run `names` one after another, writing RESULTS.md and results.json in `out_dir` after
    each one (a suite stopped half-way keeps what it measured), with earlier results of
    benchmarks not run now kept."""
    descriptions = discover()
    load_before = os.getloadavg()
    start = time.perf_counter()
    records = []
    for name in names:
        print(f"== {name}: {descriptions[name]}", flush=True)
        record = _run_one(name, quick, tiny, threads, timeout, device)
        record["device"] = device
        record["description"] = descriptions[name]
        records.append(record)
        print(f"== {name}: {record['status']} in {record['wall_s']:.0f} s", flush=True)
        _write(out_dir, records, list(descriptions), command, time.perf_counter() - start, threads, load_before)
    return records


def _write(out_dir: Path, records: list[dict], order: list[str], command: str, wall_s: float,
           threads: int, load_before) -> None:
    from benchmarks import _report

    doc = {"generated": time.strftime("%Y-%m-%d %H:%M %Z"), "command": command, "wall_s": wall_s,
           "machine": _report.machine(threads, load_before, os.getloadavg())}
    out_dir.mkdir(parents=True, exist_ok=True)
    doc["benchmarks"] = _merge(out_dir / "results.json", records, order)
    (out_dir / "results.json").write_text(json.dumps(doc, indent=1, default=_jsonable, ensure_ascii=False),
                                          encoding="utf-8")
    results_md = out_dir / "RESULTS.md"
    previous = results_md.read_text(encoding="utf-8") if results_md.is_file() else ""
    results_md.write_text(_report.carry_sections(previous, _report.render(doc, out_dir)), encoding="utf-8")


def _merge(previous: Path, records: list[dict], order: list[str]) -> list[dict]:
    """This run's records plus earlier ones for benchmarks not run now, in report order."""
    by_name = {}
    if previous.is_file():
        try:
            by_name = {r["name"]: r for r in json.loads(previous.read_text(encoding="utf-8"))["benchmarks"]}
        except (ValueError, KeyError, TypeError):
            by_name = {}
    by_name.update({r["name"]: r for r in records})
    return [by_name[n] for n in order if n in by_name]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", required=True)
    parser.add_argument("--json", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    run_child(args.child, args.quick, args.tiny, args.threads, Path(args.json))


if __name__ == "__main__":
    main()

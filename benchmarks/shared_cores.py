"""Shared cores: a training run and a chat on the same CPU, as on a studio Space whose page chats
while a run trains.

The run is the one the page launches, a `python -m minimind train` child process: LoRA on the shipped
MiniMind-Tang, the shipped Tang poem sample, batch 4 x 64 tokens. The chat is this process decoding
through `generation.chat` (the engine the page and the API use) with the shipped MiniMind-Tang, one
greedy answer of up to 64 tokens after another, on this process's threads. Legs, same data and
settings, each measured over the same window once the run has begun its steps (its tokens and
seconds read from its status at the window's start and end; the run is then stopped):

- the run alone, and the chat alone;
- the two together, the run on `threads: 0` (ours: it gives a core up while another process keeps
  it busy, minimind/training/core_share.py);
- the two together, the run pinned to the same number of threads (`threads: N`, the behaviour
  before: the reference).

The together legs alternate (ours, pinned, three times in the full run). Reported: tokens/s of the
run and of the chat in each leg, the threads the run chose (its log's decisions), and the ratios of
the medians, ours / pinned. On a machine with many more cores than
the two processes keep busy, both legs should match.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NAME = "shared_cores"
DESCRIPTION = "a training run beside a chat on the same CPU: run and chat tokens/s, threads given up vs pinned"
HEADLINE = ["run tok/s beside a chat, ours / pinned threads", "chat tok/s beside a run, ours / pinned threads"]
ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "checkpoints" / "minimind-tang"
POEMS = ROOT / "samples" / "tang_poems_sample.jsonl"
PROMPTS = ["春夜", "登高", "送友人", "秋思", "山居", "江上"]


def _default_threads(env: dict) -> int:
    """The threads a fresh trainer process starts with here (PyTorch's default, or OMP_NUM_THREADS)."""
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"], env=env,
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def _start_run(folder: Path, threads: int, env: dict) -> subprocess.Popen:
    sets = {"mode": "lora", "model.init_from": str(SHIPPED), "data.files": f"[{POEMS}]", "data.seq_len": 64,
            "data.cache_dir": str(folder.parent / "cache"), "batch_size": 4, "max_steps": 100000,
            "eval_every": 100000, "save_every": 100000, "log_every": 1, "compile": "off", "threads": threads,
            "run_dir": str(folder)}
    cmd = [sys.executable, "-m", "minimind", "train", "--no-progress"]
    for key, value in sets.items():
        cmd += ["--set", f"{key}={value}"]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _status(folder: Path) -> dict:
    try:
        return json.loads((folder / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def _wait_for_steps(folder: Path, proc: subprocess.Popen, steps: int = 5, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while (_status(folder).get("step") or 0) < steps:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the training run did not reach step {steps}: see {folder / 'train.log'}")
        time.sleep(0.2)


def _chat_for(seconds: float, model, tokenizer) -> float:
    """Answer the prompts in turn for `seconds`, greedily (the same answers in every leg); tokens/s written."""
    from minimind import generation
    from minimind.sampling_params import SamplingParams

    tokens, start, k = 0, time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        answer = generation.chat(model, tokenizer, [{"role": "user", "content": PROMPTS[k % len(PROMPTS)]}],
                                 SamplingParams(max_new_tokens=64, temperature=0.0))
        answer.read()
        tokens, k = tokens + answer.completion_tokens, k + 1
    return tokens / (time.perf_counter() - start)


def _leg(tmp: Path, name: str, threads: int | None, chat: bool, window_s: float, env: dict, model, tokenizer) -> dict:
    """One leg: the run (None: no run) and/or the chat over one window."""
    row = {"leg": name, "run threads": "-" if threads is None else (threads or "0 (ours: gives cores up)")}
    proc = None
    if threads is not None:
        folder = tmp / name.replace(" ", "-")
        proc = _start_run(folder, threads, env)
        try:
            _wait_for_steps(folder, proc)
            before, t0 = _status(folder), time.perf_counter()
            if chat:
                row["chat tok/s"] = _chat_for(window_s, model, tokenizer)
            else:
                time.sleep(window_s)
            time.sleep(1.2)  # the status is written at most once a second: the window's end is in it
            after = _status(folder)
        finally:
            proc.terminate()
            proc.wait(timeout=120)
        seconds = after["elapsed_s"] - before["elapsed_s"]
        row["run tok/s"] = (after["tokens"] - before["tokens"]) / seconds if seconds > 0 else float("nan")
        row["window s"] = time.perf_counter() - t0
        log = (folder / "train.log").read_text(errors="replace") if (folder / "train.log").is_file() else ""
        said = [line for line in log.splitlines() if "other processes keep" in line or "cores are free" in line]
        row["threads chosen"] = ", ".join(line.split("training on ")[-1].split()[0] for line in said) or "-"
    else:
        row["chat tok/s"] = _chat_for(window_s, model, tokenizer)
        row["window s"] = window_s
    return row


def run(quick: bool = False, tiny: bool = False) -> dict:
    import torch

    from minimind.checkpoint import load_model, load_tokenizer_for

    window_s = 6.0 if tiny else (15.0 if quick else 25.0)
    rounds = 1 if (tiny or quick) else 3
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    pinned = _default_threads(env)
    model, tokenizer = load_model(SHIPPED), load_tokenizer_for(SHIPPED)
    _chat_for(2.0, model, tokenizer)  # warm-up
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows.append(_leg(tmp, "run alone", 0, False, window_s, env, model, tokenizer))
        rows.append(_leg(tmp, "chat alone", None, True, window_s, env, model, tokenizer))
        for k in range(rounds):
            rows.append(_leg(tmp, f"together {k + 1}, ours", 0, True, window_s, env, model, tokenizer))
            rows.append(_leg(tmp, f"together {k + 1}, pinned", pinned, True, window_s, env, model, tokenizer))

    def median(kind: str, figure: str) -> float:
        return statistics.median(r[figure] for r in rows if r["leg"].startswith("together") and r["leg"].endswith(kind))

    summary = {
        "run tok/s beside a chat, ours / pinned threads": median("ours", "run tok/s") / median("pinned", "run tok/s"),
        "chat tok/s beside a run, ours / pinned threads": median("ours", "chat tok/s") / median("pinned", "chat tok/s"),
        "run tok/s beside a chat / alone, ours": median("ours", "run tok/s") / rows[0]["run tok/s"],
        "chat tok/s beside a run / alone, ours": median("ours", "chat tok/s") / rows[1]["chat tok/s"],
        "run's threads alone (pinned legs)": pinned, "chat threads": torch.get_num_threads(),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()}
    return {"rows": rows, "summary": summary}


def main() -> None:
    from benchmarks._harness import standalone

    standalone(run, __doc__)


if __name__ == "__main__":
    main()

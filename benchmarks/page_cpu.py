"""What an open page costs: the CPU of the browser and of the server while the Studio's page sits
open, and the tokens/s a training run loses to it.

On a laptop (or this test machine) the browser, the server and the trainer share the same cores; on
a Space the server and the trainer do. The page watches a run by asking the server every few
seconds (webapp/tabs/train.py: every 2 s while a run trains or waits, every 10 s otherwise; each
answer sends only what changed). This benchmark measures that watch as users meet it:

- the server: `python -m webapp` in a child process on a fresh workspace holding one saved corpus
  (the shipped Tang poem sample), with the shipped models;
- the browser: Debian's Chromium, headless, through Playwright, one 1400 x 1100 page;
- the run: LoRA of the shipped MiniMind-Tang, batch 4 x 64 tokens, started through the page's API
  (/start_training), as the page's Start does; its tokens and seconds read from its status.

Legs, each a window of the same length:
- "blank page": Chromium open on about:blank (the browser's own floor);
- "Corpus tab, nothing training" and "Train tab, nothing training": the Studio open and idle;
- "run, no page" and "run, Train tab open", alternating (twice in the full run): the same run,
  with the page on about:blank, then on the Train tab watching it.

Reported per leg: CPU seconds per second of wall time (1.0 = one core busy) of the browser (all
its processes) and its renderers, of the server process, and of the trainer, and the run's
tokens/s over the window. The summary gives the run's tokens/s with the Train tab open over the
same without a page (the median of each), and the idle Train tab's browser and server CPU beside
the blank page's. Nothing else should run on the machine meanwhile.

    python -m minimind bench --only page_cpu
    python -m benchmarks.page_cpu --quick
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

NAME = "page_cpu"
DESCRIPTION = "an open Studio page: browser, server and trainer CPU, idle and while a run trains; run tok/s with it"
HEADLINE = ["run tok/s, Train tab open / no page", "browser CPU, idle Train tab (cores)",
            "server CPU, idle Train tab (cores)"]
ROOT = Path(__file__).resolve().parents[1]
POEMS = ROOT / "samples" / "tang_poems_sample.jsonl"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int | None) -> float:
    """The CPU seconds (user + system) process `pid` has used so far; 0 once it is gone."""
    if not pid:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def _browser_cpu_s() -> tuple[float, float]:
    """(all Chromium processes, its renderers) CPU seconds so far."""
    every = renderers = 0.0
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"chromium" in cmd.split(b"\0", 1)[0]:
            used = _cpu_s(int(proc.name))
            every += used
            renderers += used if b"--type=renderer" in cmd else 0.0
    return every, renderers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise RuntimeError(f"timed out waiting for {what}")


def _serve(workspace: Path, port: int, env: dict) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-m", "webapp", "--host", "127.0.0.1", "--port", str(port),
                               "--workspace", str(workspace)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)

    def up():
        if server.poll() is not None:
            raise RuntimeError(f"the server exited ({server.returncode})")
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=5).status == 200
        except OSError:
            return False
    _wait_for(up, 180, "the server")
    return server


def _start_run(url: str) -> str:
    """Queue the run through the page's API, as Start does; its id."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    choice, _ = client.predict(base="shipped:minimind-tang", mode="lora", corpus="poems", steps=100000, batch=4,
                               seq_len=64, lr=2e-4, accum=1, precision="auto", rank=8, alpha=16, eval_every=100000,
                               api_name="/start_training")
    return choice if isinstance(choice, str) else choice["value"]


def _status(run: Path) -> dict:
    try:
        return json.loads((run / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def _window(name: str, seconds: float, server: int, run: Path | None = None) -> dict:
    """CPU (cores: CPU s / wall s) of the browser, its renderers, the server and the trainer over
    `seconds`, and the run's tokens/s read from its status at both ends."""
    trainer = _status(run).get("pid") if run else None
    wall0, (every0, rend0), server0, trainer0 = time.monotonic(), _browser_cpu_s(), _cpu_s(server), _cpu_s(trainer)
    before = _status(run) if run else {}
    time.sleep(seconds)
    if run:
        time.sleep(1.2)  # the status is written at most once a second: the window's end is in it
    after = _status(run) if run else {}
    wall = time.monotonic() - wall0
    every, rend = _browser_cpu_s()
    row = {"leg": name, "window s": wall, "browser cores": (every - every0) / wall,
           "renderer cores": (rend - rend0) / wall, "server cores": (_cpu_s(server) - server0) / wall}
    if run:
        row["trainer cores"] = (_cpu_s(trainer) - trainer0) / wall
        ran = (after.get("elapsed_s") or 0) - (before.get("elapsed_s") or 0)
        row["run tok/s"] = ((after.get("tokens") or 0) - (before.get("tokens") or 0)) / ran if ran > 0 else float("nan")
    return row


def run(quick: bool = False, tiny: bool = False) -> dict:
    from playwright.sync_api import sync_playwright

    from webapp.workspace import Workspace

    window_s = 4.0 if tiny else (15.0 if quick else 30.0)
    rounds = 1 if (tiny or quick) else 2
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    rows, run_dir = [], None
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(Path(tmp) / "ws")
        ws.save_corpus("poems", [POEMS], {"kind": "auto"}, {"kind": "text"})
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        server = _serve(ws.root, port, {**env, "MINIMIND_HOME": str(ws.root)})
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1100})
                page.set_default_timeout(120_000)
                page.goto("about:blank")
                time.sleep(2)
                rows.append(_window("blank page", window_s, server.pid))
                page.goto(url)
                page.locator("#title").wait_for()
                time.sleep(3)  # the page's first answers drawn
                rows.append(_window("Corpus tab, nothing training", window_s, server.pid))
                page.get_by_role("tab", name="Train").click()
                page.locator("#runs-table").wait_for()
                time.sleep(3)
                rows.append(_window("Train tab, nothing training", window_s, server.pid))
                page.goto("about:blank")
                run_dir = ws.runs / _start_run(url)
                _wait_for(lambda: _status(run_dir).get("phase") == "training", 600, "the run's training phase")
                time.sleep(3)  # (before it: loading, compiling, measuring; its compile workers are other processes)
                for k in range(rounds):
                    page.goto("about:blank")
                    time.sleep(1)
                    rows.append(_window(f"run, no page ({k + 1})", window_s, server.pid, run_dir))
                    page.goto(url)
                    page.get_by_role("tab", name="Train").click()
                    page.locator("#run-progress").wait_for()
                    time.sleep(3)
                    rows.append(_window(f"run, Train tab open ({k + 1})", window_s, server.pid, run_dir))
                state = _status(run_dir).get("state")
                if state != "running":
                    raise RuntimeError(f"the run ended during the benchmark ({state}): see {run_dir / 'train.log'}")
                browser.close()
        finally:
            server.terminate()  # the server stops its run on the way out
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
            trainer = _status(run_dir).get("pid") if run_dir else None
            if trainer and _cpu_s(trainer):  # still there: stop it, as the page's Stop would
                os.kill(trainer, 15)
                _wait_for(lambda: not _cpu_s(trainer), 60, "the run to stop")

    def median(prefix: str, figure: str) -> float:
        return statistics.median(r[figure] for r in rows if r["leg"].startswith(prefix))

    idle, blank = rows[2], rows[0]
    summary = {
        "run tok/s, Train tab open / no page": median("run, Train tab", "run tok/s") / median("run, no page", "run tok/s"),
        "browser CPU, idle Train tab (cores)": idle["browser cores"],
        "server CPU, idle Train tab (cores)": idle["server cores"],
        "browser CPU, blank page (cores)": blank["browser cores"],
        "browser CPU, Train tab watching a run (cores)": median("run, Train tab", "browser cores"),
        "server CPU, Train tab watching a run / no page": (median("run, Train tab", "server cores")
                                                            / median("run, no page", "server cores")),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()}
    return {"rows": rows, "summary": summary}


def main() -> None:
    from benchmarks._harness import standalone

    standalone(run, __doc__)


if __name__ == "__main__":
    main()

"""Training jobs as child processes (`python -m minimind train`, or `torchrun ... -m minimind train`
for a run of several processes), watched through run folders. On a ZeroGPU Space, where a child
process never gets the GPU, a job is instead a thread of the app that trains in GPU slices
(minimind.training.slices: one `@spaces.GPU` call per slice), and Stop takes effect when the
current slice ends.

The queue is the run folders themselves: a run whose status.json says
"queued" waits; one job runs per device at a time. Because all state is on
disk, a page reload or an app restart finds running jobs again (reattach), and
a child that died without saying so (crash, kill -9, reboot) is marked failed
with its last checkpoint kept for a resume. A file lock makes the
"is anything running? then start the next one" step atomic, so two browsers
cannot start two jobs on one device.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from minimind.errors import MiniMindError
from minimind.hardware import on_zero_gpu
from minimind.training import RunDir, TrainConfig
from minimind.training.checkpoint import latest_checkpoint
from minimind.training.events import RunEvent
from minimind.training.slices import DEFAULT_SLICE_S, spaces_gpu, train_in_slices

from .workspace import Workspace, WorkspaceError

ACTIVE = ("running", "stopping", "paused")  # paused: between two GPU slices
ROOT = Path(__file__).resolve().parents[1]
# How long torchrun's agent lets its ranks finish a step and save after Stop before it kills them
# (its default, 30 s, can cut a large model's checkpoint short).
STOP_GRACE_S = 900
STAMPED = re.compile(r"(\d{8}-\d{6})(?:-|$)")  # a run id from before names: its time stamp first
STOP_FILE = "stop-requested"  # a sliced run's Stop: no further slice starts once this file is in its folder


def slice_seconds() -> float:
    """The duration each GPU slice asks ZeroGPU for (MINIMIND_SLICE_SECONDS; ZeroGPU's own default, 60)."""
    try:
        return max(1.0, float(os.environ.get("MINIMIND_SLICE_SECONDS", DEFAULT_SLICE_S)))
    except ValueError:
        return float(DEFAULT_SLICE_S)


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie or a recycled pid is not our trainer
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.split(")")[-1].split()[0] == "Z":
            return False
        return b"minimind" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True


def _processes(run: RunDir) -> int:
    """The run's process count from its config (1 when the config cannot be read: the trainer
    then reports what is wrong with it)."""
    try:
        return TrainConfig.load(run.config_file).processes
    except MiniMindError:
        return 1


def _created(run: RunDir) -> float:
    """When the run was made: status.json's `created` (written by submit), else the time stamp of an
    id made before runs had names (20261204-205959-...), else when its config was last written."""
    created = run.read_status().get("created")
    if isinstance(created, (int, float)):
        return float(created)
    stamp = STAMPED.match(run.path.name)
    if stamp:
        try:
            return time.mktime(time.strptime(stamp.group(1), "%Y%m%d-%H%M%S"))
        except (ValueError, OverflowError):
            pass
    try:
        return run.config_file.stat().st_mtime
    except OSError:
        return 0.0


def _rounded(value, digits: int = 4):
    return round(value, digits) if isinstance(value, (int, float)) else value


class JobManager:
    def __init__(self, workspace: Workspace, poll_seconds: float = 2.0, gpu_slices=None):
        """`gpu_slices`: the decorator giving one call the GPU, to train in slices (ZeroGPU: spaces.GPU,
        the default there); None elsewhere, where each run is a child process."""
        self.workspace = workspace
        self.poll_seconds = poll_seconds
        self.gpu_slices = gpu_slices if gpu_slices is not None else (spaces_gpu if on_zero_gpu() else None)
        self._sliced: dict[str, threading.Thread] = {}  # run id -> the thread driving its slices
        self._children: dict[str, subprocess.Popen] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.on_tick: list = []  # called after every scheduler pass (e.g. to refresh the API's models)

    # ---- queries ---------------------------------------------------------------

    def runs(self) -> list[RunDir]:
        """Every run folder, newest first (by when it was queued first: a run's id is its name, not a
        time)."""
        found = [RunDir(p) for p in self.workspace.runs.iterdir() if (p / "config.yaml").is_file()]
        return sorted(found, key=lambda r: (_created(r), r.path.name), reverse=True)

    def table(self) -> list[dict]:
        rows = []
        for run in self.runs():
            s = run.read_status()
            rows.append({"run": run.path.name, "state": s.get("state", "?"), "mode": s.get("mode", ""),
                         "step": f"{s.get('step') or 0}/{s.get('total') or '?'}",  # (a starting run has no total yet)
                         "val_loss": _rounded(s.get("val_loss")), "val_bpc": _rounded(s.get("val_bpc")),
                         "error": s.get("error") or "", "error_event": s.get("error_event")})
        return rows

    def queue(self) -> list[str]:
        queued = [r for r in self.runs() if r.read_status().get("state") == "queued"]
        return [r.path.name for r in sorted(queued, key=lambda r: r.read_status().get("queued_at", 0))]

    def active(self) -> RunDir | None:
        for run in self.runs():
            if run.read_status().get("state") in ACTIVE:
                return run
        return None

    def finished_models(self) -> list[tuple[str, str, Path]]:
        """(run id, label, model folder) of every finished or stopped run with a checkpoint."""
        out = []
        for run in self.runs():
            s = run.read_status()
            ckpt = latest_checkpoint(run.checkpoints)
            if s.get("state") in ("finished", "stopped") and ckpt is not None:
                out.append((run.path.name, f"run {run.path.name} ({s.get('mode', '')}, step {ckpt.name[5:]})", ckpt))
        return out

    # ---- actions ---------------------------------------------------------------

    def submit(self, config: TrainConfig, label: str = "", name: str | None = None, form: dict | None = None) -> str:
        """Queue a new run; it starts as soon as the device is free. Its id is `name` made folder-safe
        (Workspace.run_name), else "<label or mode>-<n>"; `form` (the page's values that made it) is kept
        in its status, for the page to show them again while it trains."""
        config.validate()  # before a folder is made for it
        path = self.workspace.new_run_dir(label or config.mode, name=name)
        try:
            config.run_dir = str(path)
            config.data.cache_dir = config.data.cache_dir or str(self.workspace.cache)
            config.validate()
            run = RunDir(path).create()
            config.save(run.config_file)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)  # no half-made run keeps the name
            raise
        now = time.time()
        run.write_status(state="queued", mode=config.mode, queued_at=now, created=now, step=0,
                         total=config.max_steps or None, resume=False, **({"form": form} if form else {}))
        self.pump()
        return path.name

    def stop(self, run_id: str) -> str:
        run = RunDir(self.workspace.run_dir(run_id))
        state = run.read_status().get("state")
        if state == "queued":
            run.write_status(state="stopped", error=None)
            return f"{run_id} removed from the queue"
        if state in ("running", "paused") and run.path.name in self._sliced:
            (run.path / STOP_FILE).touch()
            run.write_status(state="stopping")
            return f"{run_id} stops when its current GPU slice ends"
        if state == "running":
            pid = run.read_status().get("pid")
            if self._alive(pid):
                # the trainer, or torchrun's agent, which passes SIGTERM on to every rank (they run in
                # sessions of their own, so a signal to our child's process group would not reach them)
                os.kill(pid, signal.SIGTERM)
                run.write_status(state="stopping")
                return f"{run_id} is saving a checkpoint and stopping"
        return f"{run_id} is not running ({state})"

    def resume(self, run_id: str) -> str:
        run = RunDir(self.workspace.run_dir(run_id))
        state = run.read_status().get("state")
        if state not in ("stopped", "failed"):
            raise WorkspaceError(f"{run_id} is {state}; only a stopped or failed run can be resumed")
        run.write_status(state="queued", queued_at=time.time(), resume=True, error=None)
        self.pump()
        return f"{run_id} queued to resume"

    # ---- the scheduler -------------------------------------------------------

    def _alive(self, pid: int | None) -> bool:
        """Is the trainer with this pid running? A child we started counts as soon as it exists
        (between fork and exec its command line is still ours, not `minimind train`)."""
        if any(proc.pid == pid and proc.poll() is None for proc in self._children.values()):
            return True
        return _pid_alive(pid)

    @contextmanager
    def _lock(self):
        with open(self.workspace.root / "jobs.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def refresh(self) -> None:
        """Reap finished children and mark runs whose process vanished as failed."""
        for run_id, proc in list(self._children.items()):
            if proc.poll() is not None:
                del self._children[run_id]
        for run_id, thread in list(self._sliced.items()):
            if not thread.is_alive():
                del self._sliced[run_id]
        for run in self.runs():
            status = run.read_status()
            sliced = self._sliced.get(run.path.name)
            if sliced is not None and sliced.is_alive():
                continue  # trained in GPU slices by a thread of this process (the pid is its latest worker's)
            if status.get("state") in ACTIVE and not self._alive(status.get("pid")):
                ckpt = latest_checkpoint(run.checkpoints)
                if status.get("state") == "stopping":  # stopped before it could save (e.g. while starting)
                    run.write_status(state="stopped", error=None)
                elif status.get("error"):  # the trainer said why before it went
                    run.write_status(state="failed")
                else:
                    run.write_status(state="failed", **RunEvent("ended", checkpoint=ckpt.name if ckpt else None)
                                     .as_error())

    def pump(self) -> str | None:
        """Start the oldest queued run if nothing is running. Returns the started run's id."""
        with self._lock():
            self.refresh()
            if self.active() is not None:
                return None
            queued = self.queue()
            if not queued:
                return None
            return self._launch(RunDir(self.workspace.runs / queued[0]))

    def _launch_slices(self, run: RunDir, resume: bool) -> str:
        """Train `run` in GPU slices on a thread of this process (ZeroGPU)."""
        (run.path / STOP_FILE).unlink(missing_ok=True)

        seconds = slice_seconds()

        def drive():
            try:
                train_in_slices(run.path, seconds, gpu=self.gpu_slices, resume=resume,
                                stop_requested=(run.path / STOP_FILE).exists)
            except Exception as err:  # the run folder says why (the trainer or the driver wrote it)
                if run.read_status().get("state") in ACTIVE:
                    run.write_status(state="failed", error=getattr(err, "message", None) or str(err))

        thread = threading.Thread(target=drive, name=f"minimind-slices-{run.path.name}", daemon=True)
        self._sliced[run.path.name] = thread
        run.write_status(state="running", phase="starting", started=time.time(), slice=0, slice_s=seconds)
        thread.start()
        return run.path.name

    def _launch(self, run: RunDir) -> str:
        resume = bool(run.read_status().get("resume"))
        if self.gpu_slices is not None:
            return self._launch_slices(run, resume)
        processes = _processes(run)
        cmd = ["-m", "minimind", "train", "--run-dir", str(run.path), "--no-progress"]
        cmd += ["--resume"] if resume else ["--config", str(run.config_file)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        if processes > 1:  # torchrun of this venv; a resume starts as many processes as the run had
            cmd = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
                   f"--shutdown_timeout={STOP_GRACE_S}", *cmd]
            # each rank its share of the cores (torchrun would give each one thread)
            env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // processes)))
        cmd = [sys.executable, *cmd]
        out = open(run.path / "stdout.log", "a")
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        out.close()
        self._children[run.path.name] = proc
        run.write_status(state="running", phase="starting", pid=proc.pid, started=time.time())
        return run.path.name

    def start_background(self) -> None:
        """Keep the queue moving even when no page is open."""
        if self._thread is not None:
            return

        def loop():
            while not self._stop.wait(self.poll_seconds):
                try:
                    self.pump()
                    for callback in self.on_tick:
                        callback()
                except Exception:  # never let the scheduler thread die
                    pass

        self._thread = threading.Thread(target=loop, name="minimind-jobs", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()

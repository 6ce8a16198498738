"""A run is a folder of files; this module is the only code that knows their names.

runs/<id>/
  config.yaml       the full, resolved TrainConfig
  status.json       state, step, total, tokens/s, eta, error, pid (rewritten atomically)
  metrics.jsonl     one JSON object per logged step (and per evaluation)
  samples.jsonl     GRPO: a few held-out answers per evaluation (step, prompt, answer, reward, rewards)
  train.log         human-readable log
  checkpoints/step-N/   model folder + trainer state (see training/checkpoint.py)
  tensorboard/, trackio/   copies of metrics.jsonl for those trackers, when report_to names them (reporting.py)

The trainer writes these; the CLI, the web app and the tests only read them.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

STATES = ("queued", "running", "stopping", "stopped", "finished", "failed")


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader in another process sees the old file or the new
    one, never a half-written one (a temporary file of this process, then a rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 10000:04d}"


@dataclass
class RunDir:
    path: Path

    def __post_init__(self):
        self.path = Path(self.path)

    @property
    def config_file(self) -> Path:
        return self.path / "config.yaml"

    @property
    def status_file(self) -> Path:
        return self.path / "status.json"

    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def samples_file(self) -> Path:
        return self.path / "samples.jsonl"

    @property
    def log_file(self) -> Path:
        return self.path / "train.log"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def tensorboard_dir(self) -> Path:
        return self.path / "tensorboard"

    @property
    def trackio_dir(self) -> Path:
        return self.path / "trackio"

    def create(self) -> "RunDir":
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        return self

    # ---- status ---------------------------------------------------------

    def read_status(self) -> dict:
        try:
            return json.loads(self.status_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def write_status(self, **fields) -> dict:
        status = {**self.read_status(), **fields, "updated": time.time()}
        atomic_write(self.status_file, json.dumps(status, indent=1))
        return status

    # ---- metrics and log -----------------------------------------------

    def append_metrics(self, record: dict) -> None:
        with self.metrics_file.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    def read_metrics(self) -> list[dict]:
        return _read_jsonl(self.metrics_file)

    def append_samples(self, records: list[dict]) -> None:
        with self.samples_file.open("a", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))

    def read_samples(self) -> list[dict]:
        return _read_jsonl(self.samples_file)

    def truncate_metrics_after(self, step: int) -> None:
        """On resume: drop lines logged (and samples written) after the checkpoint we restart from."""
        kept = [r for r in self.read_metrics() if r.get("step", 0) <= step]
        atomic_write(self.metrics_file, "".join(json.dumps(r) + "\n" for r in kept))
        if self.samples_file.exists():
            kept = [r for r in self.read_samples() if r.get("step", 0) <= step]
            atomic_write(self.samples_file, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))

    def log(self, message: str) -> None:
        with self.log_file.open("a", encoding="utf-8") as fh:
            fh.write(time.strftime("%Y-%m-%d %H:%M:%S ") + message + "\n")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(encoding="utf-8").splitlines()[-lines:])
        except OSError:
            return ""


def _read_jsonl(path: Path) -> list[dict]:
    """The records of a JSON-lines file the trainer appends to (a line cut by a kill is skipped)."""
    records = []
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    continue
    except OSError:
        pass
    return records

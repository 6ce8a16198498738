"""A run is a folder of files; this module is the only code that knows their names.

runs/<id>/
  config.yaml       the full, resolved TrainConfig
  status.json       state, step, total, tokens/s, eta, error (+ error_event), pid (rewritten atomically)
  metrics.jsonl     one JSON object per logged step (and per evaluation)
  samples.jsonl     GRPO: a few held-out answers per evaluation (step, prompt, answer, reward, rewards)
  train.log         human-readable log
  events.jsonl      moments a face words its own way (events.py), each with where its line starts in train.log
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

from .events import RunEvent

STATES = ("queued", "running", "stopping", "stopped", "finished", "failed")
LOG_TIME = "%Y-%m-%d %H:%M:%S "  # what opens each line of train.log (time.strftime) ...
LOG_TIME_CHARS = len("2026-01-31 12:00:00 ")  # ... and its width


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
    def events_file(self) -> Path:
        return self.path / "events.jsonl"

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
        """Update status.json with `fields`. An `error` written without its `error_event` (see
        RunEvent.as_error) drops the event of an earlier error, which no longer says what happened."""
        if "error" in fields:
            fields.setdefault("error_event", None)
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
            fh.write(time.strftime(LOG_TIME) + message + "\n")

    def log_event(self, event: RunEvent) -> None:
        """Log `event` in the terminal's words, and keep it in events.jsonl with the byte offset
        where that line starts in train.log, so a reader knows the line without reading its words."""
        with self.log_file.open("ab") as fh:  # (append mode: tell() is the end of the file)
            at = fh.tell()
            fh.write((time.strftime(LOG_TIME) + event.cli_text() + "\n").encode("utf-8"))
        with self.events_file.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"at": at, **event.to_dict()}) + "\n")

    def log_lines(self, lines: int = 20) -> list[tuple[str, RunEvent | None]]:
        """The last `lines` lines of train.log, each with the event it says (None: plain text, or a
        run from before events). An event's line is the time it was written (LOG_TIME_CHARS) and its words."""
        try:
            data = self.log_file.read_bytes()
        except OSError:
            return []
        events = {r.get("at"): RunEvent.from_dict({k: v for k, v in r.items() if k != "at"})
                  for r in _read_jsonl(self.events_file)}
        found, at = [], 0
        for raw in data.splitlines(keepends=True):
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            event = events.get(at)
            # an offset is trusted only where the line still says the event (a log rewritten or cut
            # under a kept events.jsonl would otherwise lend its words to another line)
            found.append((text, event if event and text[LOG_TIME_CHARS:] == event.cli_text() else None))
            at += len(raw)
        return found[-lines:] if lines > 0 else []


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

"""Copies of a run's metrics where people already look at runs: TensorBoard and trackio.

metrics.jsonl stays the run's record (the page, the CLI and the tests read it); when the
config's `report_to` names a tracker, the main process also hands it every record it appends
there, under the same names (loss, lr, tokens_per_s, val_loss, val_bpc, an objective's
figures...), at the same step. Off by default; local files only, no account:

  tensorboard  event files in <run>/tensorboard/  (tensorboard --logdir <run>/tensorboard)
  trackio      a local trackio project "minimind", one run per run folder, stored in <run>/trackio/
               unless $TRACKIO_DIR says where (trackio reads it once, when first imported)

A tracker is a side channel: one that fails while the run trains is logged and dropped, never
the reason a run stops. A missing package is a ConfigError when the config is validated.
"""

from __future__ import annotations

import importlib.util
import math
import os
from dataclasses import dataclass
from typing import Callable

from ..errors import ConfigError
from .run_dir import RunDir

REPORT_TO = ("tensorboard", "trackio")
TRACKIO_PROJECT = "minimind"


@dataclass
class Sink:
    """One open tracker: where a record goes and how it is closed."""

    name: str
    write: Callable[[int, dict], None]
    close: Callable[[], None]


def check_report_to(report_to) -> None:
    """Known tracker names, each with its package installed (told how to install it)."""
    if not isinstance(report_to, list) or not all(isinstance(name, str) for name in report_to):
        raise ConfigError(f"report_to must be a list of {', '.join(REPORT_TO)} (got {report_to!r})")
    unknown = [name for name in report_to if name not in REPORT_TO]
    if unknown:
        shown = ", ".join(name[:40] + ("…" if len(name) > 40 else "") for name in unknown[:5])
        raise ConfigError(f"report_to takes {', '.join(REPORT_TO)} (unknown: {shown})")
    for name in report_to:
        if importlib.util.find_spec(name) is None:
            raise ConfigError(f"report_to names {name}, which is not installed here: pip install {name} "
                              "(or leave it out of report_to)")


def start(report_to: list, run_dir: RunDir, config: dict, log, resumed_at: int | None = None) -> list[Sink]:
    """Open the trackers `report_to` names for this run. `resumed_at` is the step a resumed run
    continues from (None for a new run): TensorBoard hides what an earlier attempt logged after it,
    and trackio continues the run of the same name."""
    sinks = []
    for name in dict.fromkeys(report_to):
        try:
            sinks.append(_OPEN[name](run_dir, config, resumed_at, log))
        except Exception as err:  # a tracker never stops a run
            log(f"report_to {name}: not reporting ({type(err).__name__}: {err})")
    return sinks


def write(sinks: list[Sink], record: dict, log) -> None:
    """Hand one metrics.jsonl record to every open tracker (a tracker that fails is closed and dropped)."""
    figures = scalars(record)
    for sink in list(sinks):
        try:
            sink.write(int(record["step"]), figures)
        except Exception as err:
            sinks.remove(sink)
            _close(sink)
            log(f"report_to {sink.name}: stopped reporting ({type(err).__name__}: {err})")


def finish(sinks: list[Sink]) -> None:
    """Flush and close every tracker (at the end of a run, however it ends)."""
    while sinks:
        _close(sinks.pop())


def scalars(record: dict) -> dict[str, float]:
    """The figures of a record a tracker plots: its finite numbers other than the step."""
    return {k: float(v) for k, v in record.items()
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def _close(sink: Sink) -> None:
    try:
        sink.close()
    except Exception:  # closing is best effort: the run's own files are already written
        pass


def _tensorboard(run_dir: RunDir, config: dict, resumed_at: int | None, log) -> Sink:
    from torch.utils.tensorboard import SummaryWriter

    folder = run_dir.tensorboard_dir
    # purge_step: events an earlier attempt wrote after the checkpoint this run resumes from are hidden
    writer = SummaryWriter(log_dir=str(folder), purge_step=None if resumed_at is None else resumed_at + 1,
                           flush_secs=10)

    def write_record(step: int, figures: dict) -> None:
        for key, value in figures.items():
            writer.add_scalar(key, value, global_step=step)

    log(f"report_to tensorboard: {folder.name}/ in the run folder")
    return Sink("tensorboard", write_record, writer.close)


def _trackio(run_dir: RunDir, config: dict, resumed_at: int | None, log) -> Sink:
    # trackio reads TRACKIO_DIR once, when first imported: a training process imports it here first
    os.environ.setdefault("TRACKIO_DIR", str(run_dir.trackio_dir))
    import trackio
    from trackio.utils import TRACKIO_DIR

    run = trackio.init(project=TRACKIO_PROJECT, name=run_dir.path.name, config=config, resume="allow",
                       embed=False, auto_log_gpu=False, auto_log_cpu=False)
    log(f"report_to trackio: project {TRACKIO_PROJECT}, run {run_dir.path.name}, stored in {TRACKIO_DIR}")
    return Sink("trackio", lambda step, figures: run.log(figures, step=step), run.finish)


_OPEN = {"tensorboard": _tensorboard, "trackio": _trackio}

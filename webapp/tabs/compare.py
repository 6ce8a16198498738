"""Compare runs (Train tab): several runs' loss curves on one plot, by step, wall-clock time or
tokens, beside a table of their final figures; and the architecture field of the new-model form.

Everything here is read from the run folders (config.yaml, status.json, metrics.jsonl, the
latest checkpoint's config.json) through RunDir; nothing is computed that the trainer did not log
but the wall-clock time and tokens of an evaluation line, read off the training lines around it.
"""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr
import numpy as np
import pandas as pd
import yaml

from minimind.training import RunDir
from minimind.training.checkpoint import latest_checkpoint

from ..context import AppContext, shown as _shown
from ..i18n import headed, t, tr
from ..workspace import WorkspaceError

MAX_RUNS = 8  # the most runs one comparison overlays
# x axis choice -> (metrics.jsonl key, i18n key of the axis title)
AXES = {"step": ("step", "cmp_x_step"), "time": ("elapsed_s", "cmp_x_time"),
        "tokens": ("tokens", "cmp_x_tokens")}
# the new-model form's architectures: choice -> what it sets in the config's model section
ARCHITECTURES = {
    "rope": {},  # the default MiniMind: rotary positions
    "alibi": {"overrides": {"position_encoding": "alibi"}},
    "sinusoidal": {"overrides": {"position_encoding": "sinusoidal"}},
    "learned": {"overrides": {"position_encoding": "learned"}},
    "none": {"overrides": {"position_encoding": "none"}},
    "lstm": {"architecture": "lstm"},
    "lstm_attention": {"architecture": "lstm", "overrides": {"use_attention": True}},
}
DEFAULT_ARCHITECTURE = "rope"
COLUMNS = ["run", "architecture", "parameters", "steps", "train_loss", "val_loss", "val_bpc", "tokens_per_s",
           "elapsed"]


# ---- the architecture field ------------------------------------------------------------------

def architecture_choices() -> list[tuple]:
    """(label, value) of the dropdown, labels translated in the browser."""
    return [(t(f"arch_{name}"), name) for name in ARCHITECTURES]


def model_settings(architecture) -> dict:
    """What `architecture` adds to a new model's config section (`model.architecture`,
    `model.overrides`); a choice the page does not offer is refused."""
    name = architecture or DEFAULT_ARCHITECTURE
    if not isinstance(name, str) or name not in ARCHITECTURES:
        raise WorkspaceError(f"architecture must be one of {', '.join(ARCHITECTURES)} (got {_shown(architecture)})")
    return json.loads(json.dumps(ARCHITECTURES[name]))  # a copy the caller may change


def _config_model(run: RunDir) -> dict:
    try:
        raw = yaml.safe_load(run.config_file.read_text(encoding="utf-8")) or {}
        model = raw.get("model") or {}
        return model if isinstance(model, dict) else {}
    except (OSError, yaml.YAMLError, AttributeError):
        return {}


def _saved_config(run: RunDir, init_from) -> dict:
    """The model config.json of the run's latest checkpoint, else of the model it started from (a
    LoRA adapter has none); {} when neither can be read."""
    for folder in (latest_checkpoint(run.checkpoints), Path(init_from) if init_from else None):
        try:
            return json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, TypeError):
            continue
    return {}


def run_architecture(run: RunDir) -> str:
    """One of ARCHITECTURES: what the run's config asks of a new model, else what its latest
    checkpoint's config says (a fine-tune keeps its base's), else the default (rotary)."""
    model = _config_model(run)
    overrides = model.get("overrides") if isinstance(model.get("overrides"), dict) else {}
    if not model.get("init_from") and (model.get("architecture") or overrides):
        lstm = model.get("architecture") == "lstm"
        attention = overrides.get("use_attention")
        encoding = overrides.get("position_encoding") or DEFAULT_ARCHITECTURE
    else:
        saved = _saved_config(run, model.get("init_from"))
        lstm = "lstm" in str(saved.get("model_type", "")).lower() or saved.get("architecture") == "lstm"
        attention = saved.get("use_attention")
        encoding = saved.get("position_encoding") or DEFAULT_ARCHITECTURE
    if lstm:
        return "lstm_attention" if attention else "lstm"
    return encoding if encoding in ARCHITECTURES else DEFAULT_ARCHITECTURE


def architecture_label(name: str) -> str:
    return tr(f"arch_{name}")


# ---- choosing runs ---------------------------------------------------------------------------

def chosen_runs(ctx: AppContext, picked) -> list[RunDir]:
    """The runs a visitor picked: names of this workspace's runs only (never a path), at most
    MAX_RUNS, each once."""
    if isinstance(picked, str):
        picked = [picked]
    if not isinstance(picked, (list, tuple)) or not picked:
        raise WorkspaceError("choose one or more runs to compare")
    if len(picked) > MAX_RUNS:
        raise WorkspaceError(f"compare at most {MAX_RUNS} runs at a time (got {len(picked)})")
    known = {r.path.name for r in ctx.jobs.runs()}
    for name in picked:
        if not isinstance(name, str) or name not in known:
            raise WorkspaceError(f"no run named {_shown(name)} in this workspace: choose runs from the list")
    runs = [RunDir(ctx.workspace.run_dir(name)) for name in dict.fromkeys(picked)]  # in order, once each
    return runs


# ---- the overlay -----------------------------------------------------------------------------

def _derived(train_rows: list[dict], key: str, step: float) -> float | None:
    """`key` (elapsed_s or tokens) at `step`, from the training lines that log it: read off the
    line of that step, between two lines, or in proportion to the step outside them."""
    known = [(r["step"], r[key]) for r in train_rows if isinstance(r.get(key), (int, float))]
    if not known:
        return None
    steps, values = np.array([s for s, _ in known], float), np.array([v for _, v in known], float)
    if step < steps[0] or step > steps[-1]:
        edge = 0 if step < steps[0] else -1
        return float(values[edge] * step / steps[edge]) if steps[edge] else None
    return float(np.interp(step, steps, values))


def run_curve(run: RunDir, axis: str = "step") -> list[dict]:
    """One run's points: {"x", "loss", "series": "<run> · train|validation"}, x by `axis`."""
    key = AXES[axis][0]
    records = run.read_metrics()
    train_rows = [r for r in records if isinstance(r.get("loss"), (int, float)) and "step" in r]
    name, points = run.path.name, []
    for r in records:
        for loss_key, series in (("loss", "cmp_train"), ("val_loss", "cmp_validation")):
            if not isinstance(r.get(loss_key), (int, float)) or "step" not in r:
                continue
            x = r.get(key) if isinstance(r.get(key), (int, float)) else _derived(train_rows, key, r["step"])
            if x is not None:
                points.append({"x": x, "loss": r[loss_key], "series": f"{name} · {tr(series)}"})
    return points


def overlay(runs: list[RunDir], axis: str = "step") -> pd.DataFrame:
    """The runs' train and validation loss on one plot's data (columns x, loss, series)."""
    if not isinstance(axis, str) or axis not in AXES:
        raise WorkspaceError(f"the x axis must be one of {', '.join(AXES)} (got {_shown(axis)})")
    rows = [point for run in runs for point in run_curve(run, axis)]
    return pd.DataFrame(rows, columns=["x", "loss", "series"])


# ---- the table -------------------------------------------------------------------------------

def _last(records: list[dict], key: str):
    values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
    return values[-1] if values else None


def _round(value, digits: int):
    return round(float(value), digits) if isinstance(value, (int, float)) else None


def _duration(seconds) -> str:
    if not isinstance(seconds, (int, float)):
        return ""
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m" if h else (f"{m}m {s:02d}s" if m else f"{s}s")


def final_metrics(run: RunDir) -> dict:
    """One row of the table: the run's final figures, from its status and metrics."""
    status, records = run.read_status(), run.read_metrics()
    elapsed, tokens = status.get("elapsed_s"), status.get("tokens")  # the training loop's seconds: its speed
    if isinstance(elapsed, (int, float)) and isinstance(tokens, (int, float)) and elapsed > 0:
        speed = tokens / elapsed  # over the whole run
    else:
        speed = status.get("tokens_per_s") or _last(records, "tokens_per_s")
    return {"run": run.path.name, "architecture": architecture_label(run_architecture(run)),
            "parameters": status.get("params"), "steps": status.get("step") or _last(records, "step"),
            "train_loss": _round(_last(records, "loss"), 4), "val_loss": _round(_last(records, "val_loss"), 4),
            "val_bpc": _round(_last(records, "val_bpc"), 4), "tokens_per_s": _round(speed, 0),
            # the run's wall time (set-up included: what it took, the user's clock), else the loop's
            "elapsed": _duration(status.get("wall_s") or (elapsed if elapsed is not None
                                                          else _last(records, "elapsed_s")))}


def metrics_table(runs: list[RunDir]) -> pd.DataFrame:
    return pd.DataFrame([final_metrics(run) for run in runs], columns=COLUMNS)


# ---- the page --------------------------------------------------------------------------------

def compare(ctx: AppContext, picked, axis="step"):
    """The plot (an update naming every series, so Gradio redraws all lines) and the table."""
    runs, axis = chosen_runs(ctx, picked), axis or "step"
    curve = overlay(runs, axis)
    series = list(dict.fromkeys(curve["series"]))
    plot = gr.update(value=curve if len(curve) else None, x_title=tr(AXES[axis][1]), y_title=tr("axis_loss"),
                     color_title=tr("cmp_legend"), colors_in_legend=series or None)
    return plot, headed(metrics_table(runs))


def empty_table() -> pd.DataFrame:
    return pd.DataFrame([], columns=COLUMNS)

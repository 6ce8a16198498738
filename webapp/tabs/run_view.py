"""Watching a run from the Train tab: its progress bar, facts, plots, log, messages and Runs table.

Everything here reads the run folder (status.json, metrics.jsonl, samples.jsonl, train.log with
its events, confusion.json) and nothing else, so a run started by the CLI reads the same. The
trainer's moments that a terminal and the page word differently ("resume with --resume" against
a Resume button) arrive as events (minimind/training/events.py) and are said here in the page's
words; the rest of the log is shown as written (on a zh request, its lines log_zh knows in Chinese),
without server paths. A zh request also gets the plots' titles, legends and series, the run states
and the run errors in Chinese (an API client, which sends no language, gets the English as before).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import gradio as gr
import pandas as pd
import yaml

from minimind.training import RunDir
from minimind.training.checkpoint import latest_checkpoint
from minimind.training.events import RunEvent
from minimind.training.run_dir import LOG_TIME_CHARS

from .. import classifiers
from ..context import AppContext, without_paths
from ..errors_zh import device_zh, error_zh
from ..i18n import EN, headed, language, tr
from ..log_zh import log_text_zh, metric_zh
from . import compare, grpo

LEGEND_TITLE = "loss on"  # the loss plot's legend title (its entries: train, validation)
RUN_COLUMNS = ["run", "state", "mode", "step", "val_loss", "val_bpc", "error"]  # the Runs table
LOG_LINES = 15  # the log lines the page shows

# Per objective: the series of its metrics plot (metrics.jsonl keys, train then validation) and the
# latest validation figures of its facts line (status.json key, label, format). "reward_{}" stands
# for one series per reward the run's config names.
OBJECTIVE_SERIES = {
    "dpo": ("accuracy", "reward_margin", "val_accuracy", "val_reward_margin", "val_kl"),
    "distill": ("ce", "kl", "val_kl"),
    "grpo": ("reward", "reward_{}", "kl", "val_reward"),
    "classify": ("accuracy", "val_accuracy", "val_macro_f1"),
}
OBJECTIVE_FACTS = {  # (status key, i18n key of its label, format)
    "dpo": (("val_accuracy", "f_val_accuracy", "{:.2f}"), ("val_reward_margin", "f_val_reward_margin", "{:.3g}"),
            ("val_kl", "f_val_kl_dpo", "{:.3g}")),
    "distill": (("val_kl", "f_val_kl_distill", "{:.3g}"), ("val_ppl", "f_val_ppl", "{:.2f}")),
    "grpo": (("val_reward", "f_val_reward", "{:.3f}"), ("val_answer_tokens", "f_val_answer_tokens", "{:.0f}")),
    "classify": (("val_accuracy", "f_val_class_accuracy", "{:.3f}"), ("val_macro_f1", "f_val_macro_f1", "{:.3f}")),
}


def changed_only(fn, outputs: int, always: tuple[int, ...] = ()):
    """`fn` as the page's watch calls it every 2 s: each output the page already shows (as this
    page was last sent it) comes back as gr.skip(), which the browser leaves as it is. Re-sent each
    tick, an unchanged plot, table and log were drawn again: a page left open on the Train tab, no
    run training, kept a third of a CPU core busy in the browser and a tenth in the server. The
    answer takes the page's `sent` State first and returns it last (what each output was sent as).
    An output that other events write too is either in `always` (sent each time) or has those events
    set `sent` to None (all sent again)."""
    def answer(sent, *args):
        values = fn(*args)
        values = tuple(values) if outputs > 1 else (values,)
        before = sent if isinstance(sent, list) and len(sent) == outputs else [None] * outputs
        marks = [_sent_as(v) for v in values]
        shown = tuple(gr.skip() if mark is not None and mark == was and i not in always else value
                      for i, (value, mark, was) in enumerate(zip(values, marks, before)))
        kept = [was if mark is None else mark for mark, was in zip(marks, before)]
        return (*shown, kept)
    return answer


def _sent_as(value) -> str | None:
    """A short fingerprint of an output's value for changed_only; None for an update that says
    nothing (the output stays as it was)."""
    def plain(v):
        if isinstance(v, pd.DataFrame):
            return ["frame", list(map(str, v.columns)), v.to_json(orient="values", date_format="iso")]
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return repr(v)

    if isinstance(value, dict) and set(value) == {"__type__"}:
        return None
    return hashlib.sha1(repr(plain(value)).encode()).hexdigest()


def run_choices(ctx: AppContext) -> list[str]:
    return [r.path.name for r in ctx.jobs.runs()]


def duration(seconds) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m" if h else (f"{m}m {s:02d}s" if m else f"{s}s")


def watch(ctx: AppContext, run_id):
    """Everything the page shows about one run, read from its folder."""
    ctx.jobs.refresh()
    runs = headed(runs_table(ctx))
    queue = ctx.jobs.queue()
    queue_md = tr("queue_line", v=", ".join(queue) if queue else tr("empty"))
    # the run picked here is selected; a run the user (or Start) selected is left as the page now
    # holds it: this answer may have been asked for before Start chose the new run, and setting
    # the older one back would watch it instead
    picked = not run_id
    if picked:
        active = ctx.jobs.active()
        run_id = active.path.name if active else (run_choices(ctx) or [None])[0]
    if not run_id:
        return "", "", loss_plot(None), "", runs, queue_md, gr.update()
    run = RunDir(ctx.workspace.run_dir(run_id))  # a run of this workspace, by id: never a path
    s = run.read_status()
    step, total = s.get("step", 0) or 0, s.get("total") or 0
    pct = 100.0 * step / total if total else 0.0
    bar = (f"<div class='mm-progress'><div style='width:{pct:.1f}%'></div></div>"
           f"<div id='run-progress' data-step='{step}' data-total='{total}'>"
           + tr("p_line", state=doing(s), step=step, total=total or "?", pct=f"{pct:.0f}",
                eta=duration(s.get("eta_s"))) + "</div>")
    device = s.get("device", "?")
    facts = [tr("f_state", v=state_word(s.get("state"))), tr("f_device", v=device_zh(device) if zh() else device),
             tr("f_architecture", v=compare.architecture_label(compare.run_architecture(run)))]
    if s.get("slice"):  # a run in ZeroGPU's GPU slices
        facts.append(tr("f_slice", k=s["slice"], s=f"{s.get('slice_s') or 0:.0f}"))
    if s.get("tokens_per_s"):
        facts.append(tr("f_tokens_s", v=f"{s['tokens_per_s']:,.0f}"))
    if s.get("wall_s"):  # the run's processes, set-up included (a resumed run's earlier ones too): the user's clock
        facts.append(wall_fact(s["wall_s"], s.get("elapsed_s")))
    if s.get("lr") is not None:
        facts.append(tr("f_lr", v=f"{s['lr']:.2e}"))
    if s.get("loss") is not None:
        facts.append(tr("f_loss", v=f"{s['loss']:.4f}"))
    if s.get("val_loss") is not None:
        facts.append(tr("f_val_loss", v=f"{s['val_loss']:.4f}")
                     + (tr("f_bpc", v=f"{s['val_bpc']:.3f}") if s.get("val_bpc") else ""))
    facts += objective_facts(s, run_objective(run, s))
    if s.get("error"):
        facts.append(tr("f_error", v=error_words(s["error"], s.get("error_event"))))
    if s.get("final_checkpoint"):
        facts.append(tr("f_model", v=f"`{Path(s['final_checkpoint']).relative_to(ctx.workspace.root)}`"))
    return (bar, " · ".join(facts), loss_plot(loss_curve(run)), log_text(run), runs, queue_md,
            gr.update(choices=run_choices(ctx), **({"value": run_id} if picked else {})))


def wall_fact(wall_s: float, loop_s: float | None) -> str:
    """The run's wall time, and the part of it in the training loop where the rest is large enough to
    see: loading, preparing data, compiling and the final save, in every process of a resumed or
    sliced run. A resumed
    run's time budget counts only the training of its earlier processes (setup.py), so such a run
    can show more wall time than its budget, and this says where the rest went."""
    if loop_s is None or wall_s - loop_s < 1:
        return tr("f_wall", v=duration(wall_s))
    return tr("f_wall_loop", v=duration(wall_s), loop=duration(loop_s))


def doing(status: dict) -> str:
    """What the run is doing: a running run's phase (preparing data, measuring speed, compiling,
    training, evaluating, saving), else its state."""
    phase, state = status.get("phase"), state_word(status.get("state"))
    if status.get("state") == "running" and f"phase_{phase}" in EN:
        return tr("state_phase", state=state, phase=tr(f"phase_{phase}"))
    return state


def state_word(state) -> str:
    """A run's state as the page says it (the state itself when it has no translation)."""
    return tr(f"state_{state}") if f"state_{state}" in EN else str(state or "?")


def zh() -> bool:
    return language() == "zh"


def runs_table(ctx: AppContext) -> pd.DataFrame:
    """Every run of the workspace, newest first; before the first run, no rows under named columns.
    Its states and errors in the request's words."""
    rows = [{**row, "state": state_word(row.get("state")), "error": error_words(row["error"], row.get("error_event"))}
            for row in ctx.jobs.table()]
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def event_words(event: RunEvent) -> str:
    """A run's event in the page's words (ev_<kind>; "ended" says whether a checkpoint is kept)."""
    key = "ev_ended_kept" if event.kind == "ended" and event.checkpoint else f"ev_{event.kind}"
    return tr(key, **event.to_dict())  # (its fields fill the text's placeholders)


def error_words(error, event) -> str:
    """A run's error as the page shows it: its event in the page's words when status.json has one
    (error_event), else the error as written; never a server path."""
    said = RunEvent.from_dict(event) if event else None
    if said:
        return without_paths(event_words(said))
    error = without_paths(error or "")
    return error_zh(error, lead=None) if error and zh() else error


def log_text(run: RunDir, lines: int = LOG_LINES) -> str:
    """The end of the run's train.log for the page: each event's line in the page's words (after
    the time it was written), every other line as written; never a server path."""
    word = log_text_zh if zh() else str  # the trainer's own lines: in Chinese on a zh request (log_zh)
    return without_paths("\n".join(text[:LOG_TIME_CHARS] + event_words(event) if event else word(text)
                                    for text, event in run.log_lines(lines)))


def run_message(ctx: AppContext, run_id) -> str:
    """The message under the buttons, from the state of the run the page shows (never older news
    such as "queued to resume" once that run has finished)."""
    if not run_id:
        return ""
    s = RunDir(ctx.workspace.run_dir(run_id)).read_status()
    state, step = s.get("state"), s.get("step") or 0
    if state == "queued":
        queue = ctx.jobs.queue()
        ahead = queue.index(run_id) if run_id in queue else 0
        ahead_text = tr("m_ahead", n=ahead) if ahead else tr("m_next")
        if s.get("resume"):
            return tr("m_queued_resume", run_id=run_id, step=step, ahead=ahead_text)
        return tr("m_queued", run_id=run_id, ahead=ahead_text)
    if state in ("running", "paused"):
        return tr("m_running_resumed" if s.get("resume") else "m_running", run_id=run_id)
    if state == "stopping":
        return tr("m_stopping", run_id=run_id)
    if state == "stopped":
        if step:
            return tr("m_stopped_at", run_id=run_id, step=step)
        return tr("m_stopped_early", run_id=run_id)
    if state == "finished":
        return tr("m_finished", run_id=run_id, step=step)
    if state == "failed":
        kept = latest_checkpoint(RunDir(ctx.workspace.run_dir(run_id)).checkpoints)
        if kept:
            return tr("m_failed_from", run_id=run_id, step=kept.name[5:])
        return tr("m_failed_restart", run_id=run_id)
    return ""


def loss_curve(run: RunDir) -> pd.DataFrame | None:
    """The loss plot's data: a train and a validation line. A line with no figure yet (validation
    before the first evaluation; train before the first logged step, when evaluations come more
    often than log lines) is one point without a value (not drawn): Gradio 6 fixes a plot's lines
    when it first draws it and leaves a line that first appears in a live update undrawn, so both
    are there from the start (and the legend names both)."""
    rows = []
    for r in run.read_metrics():
        if "loss" in r:
            rows.append({"step": r["step"], "loss": r["loss"], "series": tr("cmp_train")})
        if "val_loss" in r:
            rows.append({"step": r["step"], "loss": r["val_loss"], "series": tr("cmp_validation")})
    for series in (tr("cmp_train"), tr("cmp_validation")):
        if rows and not any(row["series"] == series for row in rows):
            rows.append({"step": rows[0]["step"], "loss": None, "series": series})
    return pd.DataFrame(rows, columns=["step", "loss", "series"]) if rows else None


def loss_plot(curve: pd.DataFrame | None):
    """The loss plot's new value; on a zh request with its axis and legend titles in Chinese (the
    plot is built with the English ones: a Gradio plot's titles are not translated in the browser)."""
    if not zh():
        return curve
    return gr.update(value=curve, x_title=tr("cmp_x_step"), y_title=tr("axis_loss"), color_title=tr("loss_legend"))


def run_objective(run: RunDir, status: dict | None = None) -> str:
    """language_model, dpo, distill or grpo: from status.json (written when the run starts), else its mode."""
    status = run.read_status() if status is None else status
    if status.get("objective"):
        return status["objective"]
    mode = status.get("mode")
    if not mode:
        try:
            mode = (yaml.safe_load(run.config_file.read_text(encoding="utf-8")) or {}).get("mode")
        except (OSError, yaml.YAMLError, AttributeError):
            mode = None
    return mode if mode in OBJECTIVE_SERIES else "language_model"


def objective_facts(status: dict, objective: str) -> list[str]:
    """The latest validation figures of a dpo, distill or grpo run, for the facts line."""
    return [tr(label, v=fmt.format(status[key])) for key, label, fmt in OBJECTIVE_FACTS.get(objective, ())
            if isinstance(status.get(key), (int, float))]


def _reward_names(run: RunDir) -> list[str]:
    """The rewards a grpo run's config names (none when its config cannot be read)."""
    try:
        raw = yaml.safe_load(run.config_file.read_text(encoding="utf-8")) or {}
        return [r["name"] for r in raw.get("grpo", {}).get("rewards", []) if isinstance(r.get("name"), str)]
    except (OSError, yaml.YAMLError, AttributeError, TypeError):
        return []


def objective_series(run: RunDir, objective: str) -> list[str]:
    """The metrics.jsonl keys of an objective's plot, with "reward_{}" made one key per reward."""
    keys = []
    for key in OBJECTIVE_SERIES.get(objective, ()):
        keys += [key.format(name) for name in _reward_names(run)] if "{}" in key else [key]
    return keys


def objective_curve(run: RunDir) -> pd.DataFrame | None:
    """The objective's own metrics by step (series named by their metrics.jsonl keys), or None
    for a plain language-model run (its loss plot says it all)."""
    series = objective_series(run, run_objective(run))
    if not series:
        return None
    rows = [{"step": r["step"], "value": r[key], "series": key}
            for r in run.read_metrics() for key in series if isinstance(r.get(key), (int, float))]
    return pd.DataFrame(rows, columns=["step", "value", "series"]) if rows else None


def watch_objective(ctx: AppContext, run_id, drawn=None):
    """The metrics plot of the run the page shows (visible for dpo, distill and grpo runs only),
    and the series it is drawn with. `drawn` (a session state) holds the series the plot was last
    drawn with: when they change (a first evaluation, another run) the update names them all as
    the legend, which makes Gradio 6 redraw the plot; a value-only update would leave a new
    series undrawn. Unchanged series update the values only, so the plot does not flicker."""
    curve = objective_curve(RunDir(ctx.workspace.run_dir(run_id))) if run_id else None
    if curve is not None and zh():  # the series by their Chinese names
        curve = curve.assign(series=curve["series"].map(metric_zh))
    series = list(dict.fromkeys(curve["series"])) if curve is not None else []
    update = gr.update(value=curve, visible=curve is not None)
    if zh():
        update.update(x_title=tr("cmp_x_step"), y_title=tr("axis_value"), color_title=tr("metric_legend"))
    if series != (drawn or []):
        update["colors_in_legend"] = series or None
    return update, series


def watch_rollouts(ctx: AppContext, run_id):
    """The held-out answers of the grpo run the page shows, with their rewards; hidden otherwise."""
    if not run_id:
        return gr.update(value=None, visible=False)
    table = grpo.rollout_table(RunDir(ctx.workspace.run_dir(run_id)))
    return gr.update(value=headed(table) if table is not None else None, visible=table is not None)


def watch_confusion(ctx: AppContext, run_id, drawn=None):
    """The confusion matrix of the classifier run the page shows, once its confusion.json is written
    (hidden before, and for other runs), with a line of its figures; `drawn` (a session state) is
    what was last drawn (run id and file time), so an unchanged matrix is not sent again each tick."""
    report, key = None, None
    if run_id:
        path = ctx.workspace.run_dir(run_id)
        report = classifiers.read_confusion(path)
        if report is not None:
            key = f"{run_id}@{(path / classifiers.CONFUSION_FILE).stat().st_mtime}"
    if key == (drawn or None):
        return gr.update(), gr.update(), drawn
    if report is None:
        return gr.update(value="", visible=False), gr.update(value=None, visible=False), None
    line = tr("confusion_line", rows=f"{int(report.get('rows') or 0):,}",
              accuracy=f"{float(report.get('accuracy') or 0):.3f}", f1=f"{float(report.get('macro_f1') or 0):.3f}")
    table = classifiers.confusion_styled(report, tr("confusion_corner"))
    return gr.update(value=line, visible=True), gr.update(value=table, visible=True), key

"""Train tab: pick a base, a mode and a corpus; see size and ETA; start, watch, stop, resume.

Training runs as a child process (`python -m minimind train`, under torchrun when the run asks
for several processes); this tab only writes a config, asks the job manager to queue it, and
reads the run folder.
Modes dpo (preference pairs), distill (a teacher's logits) and grpo (rewards for
answers the model writes; see grpo.py) show their own settings and, while a run trains, their
own metrics beside the loss; a grpo run also shows its held-out answers with their rewards.
A labelled corpus (text + label) offers the classification task (modes sft, lora, qlora): its
run shows accuracy and macro-F1 as it trains and, once finished, its confusion matrix.

This module lays the tab out and wires it; what the form means is train_form.py (TrainForm ->
TrainConfig), what a run shows is run_view.py.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import tempfile
import time

import gradio as gr
import pandas as pd
from gradio.context import get_render_context

from minimind.hardware import detect, on_one_thread_when_forked
from minimind.training import RunDir, TrainConfig
from minimind.training.config import CLASSIFY_MODES, EXTENDABLE, PRECISIONS, DistillSection, DpoSection
from minimind.training.estimate import MIN_USEFUL_STEPS
from minimind.training.reporting import REPORT_TO

from .. import work
from ..context import AppContext, user_errors, user_errors_gen
from ..imports import import_steps
from ..jobs import ACTIVE
from ..i18n import headed, t, tr
from ..workspace import WorkspaceError
from . import compare, grpo
from .run_view import (LEGEND_TITLE, changed_only, duration, run_choices, run_message, runs_table, watch,
                       watch_confusion, watch_objective, watch_rollouts)
from .train_form import (HUB_CHOICE, MAX_MINUTES, MODES, TrainForm, base_choices, corpus_choices, corpus_kind,
                         default_base, defaults_for, last_corpus, max_processes, shown_fields, teacher_choices)

FORM_FIELDS = [f.name for f in dataclasses.fields(TrainForm)]  # the estimate / start_training parameters, in order
# what /estimate and /start_training take: the form's fields by name, with TrainForm's defaults
FORM_SIGNATURE = inspect.signature(TrainForm).replace(return_annotation=inspect.Signature.empty)
ESTIMATE_GPU_S = 60  # the GPU call an estimate asks ZeroGPU for
PARALLEL = {"ddp": "DDP", "fsdp": "FSDP2"}  # config `distributed` -> what the page calls it
TRACKERS = {"tensorboard": "TensorBoard", "trackio": "trackio"}  # config `report_to` -> the page's names


def device_line() -> str:
    return tr("device_line", device=detect().describe())


def do_estimate(ctx: AppContext, form: TrainForm) -> str:
    config = form.to_config(ctx)
    ctx.workspace.cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="estimate-", dir=ctx.workspace.cache) as scratch:
        # a fresh folder (nothing of an earlier estimate is reused), in a child within the page's limits;
        # on ZeroGPU in a GPU call instead (a child process would never see the GPU it estimates for)
        if ctx.jobs.gpu_slices is not None:
            e, spelled = ctx.jobs.gpu_slices(ESTIMATE_GPU_S)(on_one_thread_when_forked(work.estimate_run))(config,
                                                                                                       scratch)
        else:
            e, spelled = ctx.bounded.run(work.estimate_run, config, scratch, what="the estimate")
    size = f"`{e.preset}`; " if e.preset else ""
    text = tr("e_estimate", params=f"{e.params:,}", size=size, trainable=f"{e.trainable:,}", device=e.device,
              tokens=f"{e.tokens_per_epoch:,}", rows=f"{e.train_rows:,}", steps=f"{e.steps:,}",
              sps=f"{e.seconds_per_step:.2f}", eta=duration(e.eta_s),
              source=tr("e_measured_before" if e.measured_before else "e_probe"),
              how=tr("e_how_minutes" if config.time_budget_s else "e_how_steps"))
    return text + budget_note(config, e) + (tr("e_memory", memory=e.memory) if e.memory else "") \
        + coverage_note(config, spelled)


def budget_note(config: TrainConfig, e) -> str:
    """For a time budget: what it buys (steps, tokens, passes), and a warning with the minutes that would
    buy MIN_USEFUL_STEPS steps when it buys fewer."""
    if not config.time_budget_s or config.max_steps:
        return ""
    note = tr("e_buys", steps=f"{e.steps:,}", tokens=f"{e.tokens:,}", passes=f"{e.passes:.2g}",
              setup=duration(e.setup_s))
    if e.useful_s:
        note += tr("e_too_short", min=MIN_USEFUL_STEPS, minutes=f"{math.ceil(e.useful_s / 30) / 2:g}")
    return note


def coverage_note(config: TrainConfig, spelled: work.CoverageFacts | None) -> str:
    """For a fine-tune: how the starting model's tokenizer spells the corpus, and what ticking
    "add the corpus's characters" would add (a mode that can grow its vocabulary, and enough of the
    corpus in byte pieces for it to matter), or that the run adds them."""
    if spelled is None:
        return ""
    if config.model.extend_vocab:  # what the run will add, whatever the share
        key, added = "e_coverage_extended", spelled.candidates
    else:
        added = spelled.worth_adding
        key = "e_coverage_extend" if added and config.mode in EXTENDABLE else "e_coverage"
    return "\n\n" + tr(key, share=f"{100 * spelled.share:.1f}", cpt=f"{spelled.chars_per_token:.2f}",
                        n=f"{added:,}")


def start(ctx: AppContext, form: TrainForm):
    name = form.run_id_name()  # a path or an unusable name is refused before anything is checked or made
    config = form.to_config(ctx)
    run_id = ctx.jobs.submit(config, label=config.mode, name=name, form=dataclasses.asdict(form))
    return gr.update(choices=run_choices(ctx), value=run_id), tr("queued", run_id=run_id)


def on_corpus(ctx: AppContext, corpus, mode, weights, task=None):
    """The classification settings, shown (task classify chosen) for a labelled corpus, hidden (task
    generate) for any other; a mode a classifier cannot train with becomes lora; the defaults follow,
    but only when the task or mode changes: picking another corpus of the same kind keeps the steps,
    rate and batch the user typed (and an answer arriving after their typing cannot undo it)."""
    labelled = corpus_kind(ctx, corpus) == "labelled"
    new_mode = "lora" if labelled and mode not in CLASSIFY_MODES else mode
    new_task = "classify" if labelled else "generate"
    if task is not None and new_task == task and new_mode == mode:
        return gr.update(visible=labelled), task, mode, gr.update(), gr.update(), gr.update()
    lr_, steps_, batch_ = defaults_for(new_mode, weights, new_task)
    return gr.update(visible=labelled), new_task, new_mode, lr_, steps_, batch_


def visibility(mode, weights, base, task) -> list:
    """The updates of the mode-dependent fields (VISIBLE, in order) for this mode, weights, start and
    task (train_form.shown_fields), the objective row first (shown when any of its fields is). A
    hidden "add the corpus's characters" is unticked: it would refuse a run the page no longer offers
    it for."""
    shown = shown_fields(mode, weights, base, task)
    updates = [gr.update(visible=any(shown[name] for name in OBJECTIVE_ROW))]
    for name in VISIBLE:
        hide_value = {"value": False} if name == "extend_vocab" and not shown[name] else {}
        updates.append(gr.update(visible=shown[name], **hide_value))
    return updates


OBJECTIVE_ROW = ("weights", "beta", "teacher", "temperature", "kl_weight")  # the dpo / distill / grpo row
VISIBLE = (*OBJECTIVE_ROW, "grpo", "rank", "alpha", "architecture", "extend_vocab", "class_weights")
# the page's watch: every 2 s while a run trains or waits in the queue, or wrote its status or log in
# the last WATCH_SETTLE_S (a stopped run's last log line comes after its state); every 10 s otherwise,
# when each tick finds nothing new (a run started elsewhere, by the API or another page, shows within 10 s)
WATCH_BUSY_S, WATCH_IDLE_S, WATCH_SETTLE_S = 2.0, 10.0, 20.0
FRESH_START_S = 6.0  # after Start, a watch asked for about another run is not shown for this long


def training_form(ctx: AppContext) -> dict | None:
    """The form values that started the run training now (else the oldest one waiting), as its status
    keeps them; None when no run trains or waits, or it was started elsewhere (the CLI, an older page)."""
    run = ctx.jobs.active()
    if run is None:
        waiting = ctx.jobs.queue()
        run = RunDir(ctx.workspace.run_dir(waiting[0])) if waiting else None
    kept = run.read_status().get("form") if run is not None else None
    return kept if isinstance(kept, dict) else None


def opened(ctx: AppContext) -> dict:
    """What the Train tab shows when a page opens: the lists as they are now; the form of the run
    that trains or waits (a reload shows the values it was started with, not an empty form); else the
    corpus saved last. Field -> its update, and "picked": whether the corpus is the user's choice."""
    kept = training_form(ctx) or {}
    updates = {name: gr.update(value=kept[name]) for name in FORM_FIELDS if name in kept and name not in NOT_RESTORED}
    updates["base"] = gr.update(choices=base_choices(ctx), **({"value": kept["base"]} if "base" in kept else {}))
    updates["teacher"] = gr.update(choices=teacher_choices(ctx), **({"value": kept["teacher"]} if kept.get("teacher")
                                                                    else {}))
    corpus = kept.get("corpus") or last_corpus(ctx)
    updates["corpus"] = gr.update(choices=corpus_choices(ctx), **({"value": corpus} if corpus else {}))
    updates["picked"] = bool(kept.get("corpus"))
    return updates


NOT_RESTORED = ("rewards",)  # filled from the reward boxes before each click: the boxes are what the page shows


def newest_corpus(ctx: AppContext, picked, current):
    """The corpus box when the Train tab is opened: the corpus saved last, unless the user chose one
    (then only the list is renewed)."""
    last = last_corpus(ctx)
    if picked or not last or last == current:
        return gr.update(choices=corpus_choices(ctx))
    return gr.update(choices=corpus_choices(ctx), value=last)


def session_id() -> str | None:
    """The page session of the request being served (None for a call without one)."""
    from gradio.context import LocalContext

    request = LocalContext.request.get(None)
    return getattr(request, "session_hash", None) if request is not None else None


def stop(ctx: AppContext, run_id) -> str:
    if not run_id:
        raise WorkspaceError("choose a run")
    return ctx.jobs.stop(run_id)


def resume(ctx: AppContext, run_id) -> str:
    if not run_id:
        raise WorkspaceError("choose a run")
    return ctx.jobs.resume(run_id)


def kept_drawn(plot, columns: list[str], series: tuple[str, ...] = ()):
    """A plot's new value, never None once drawn: a table without values instead (one point without a
    value per `series`, which a plot whose lines are fixed at its first draw needs, as the loss plot's
    (see run_view.loss_curve)). Gradio 6's plot removes its drawing when its value becomes None, but the
    size watchers it made stay and then read the removed drawing ("Cannot read properties of null
    (reading 'offsetWidth')" in the browser's console)."""
    x, y, color = columns
    empty = pd.DataFrame({x: pd.Series([0.0] * len(series), dtype=float),
                          y: pd.Series([None] * len(series), dtype=float), color: pd.Series(series, dtype=str)})
    if isinstance(plot, dict) and plot.get("value", 0) is None:
        return {**plot, "value": empty}
    return empty if plot is None else plot


LOSS_COLUMNS = ["step", "loss", "series"]
OBJECTIVE_COLUMNS = ["step", "value", "series"]


def _busy(runs, within_s: float = WATCH_SETTLE_S) -> bool:
    """Whether any of `runs` trains or waits in the queue, or wrote its status or log in the last
    `within_s` seconds: the page's watch then ticks every WATCH_BUSY_S. One pass over the runs."""
    now = time.time()
    for run in runs:
        if run.read_status().get("state") in (*ACTIVE, "queued"):
            return True
        for path in (run.status_file, run.log_file):
            try:
                if now - path.stat().st_mtime < within_s:
                    return True
            except OSError:
                pass
    return False


def build(ctx: AppContext) -> None:
    gr.Markdown(device_line)
    if not ctx.workspace.persistent:  # a Space without persistent storage: say so before anything is made
        gr.Markdown(lambda: tr("storage_note"), elem_id="storage-note")
    lr0, steps0, batch0 = defaults_for("lora")
    teachers = teacher_choices(ctx)
    base0 = default_base(ctx)
    shown0 = shown_fields("lora", "full", base0, "generate")
    # the basics: what to start from, how, on what, for how long, under which name; the rest is Advanced
    with gr.Row():
        base = gr.Dropdown(base_choices(ctx), label=t("base"), value=base0, elem_id="train-base",
                           allow_custom_value=True)
        mode = gr.Radio([(t(f"mode_{m}"), m) for m in MODES], value="lora", label=t("mode"),
                        info=t("mode_info"), elem_id="train-mode")
        corpus = gr.Dropdown(corpus_choices(ctx), label=t("corpus"), value=last_corpus(ctx), elem_id="train-corpus",
                             allow_custom_value=True)
    with gr.Row(visible=False, elem_id="train-import") as import_row:  # "a Hugging Face model" only
        hub_source = gr.Textbox(label=t("hub_source"), info=t("hub_source_info"), elem_id="train-hub-source")
        import_btn = gr.Button(t("import_model"), elem_id="import-btn", scale=0)
    import_status = gr.Markdown(elem_id="import-status")
    with gr.Row(visible=False, elem_id="train-classify") as classify_row:  # a labelled corpus only
        task = gr.Radio([(t("task_classify"), "classify"), (t("task_generate"), "generate")], value="generate",
                        label=t("task"), info=t("task_info"), elem_id="train-task")
        class_weights = gr.Radio([(t("class_weights_none"), ""), (t("class_weights_balanced"), "balanced")],
                                 value="", label=t("class_weights"), info=t("class_weights_info"),
                                 elem_id="train-class-weights", visible=shown0["class_weights"])
    with gr.Row(visible=False, elem_id="train-objective") as objective_row:  # dpo, distill and grpo only
        weights = gr.Radio([(t("weights_full"), "full"), ("LoRA", "lora"), ("QLoRA", "qlora")], value="full",
                           label=t("weights"), elem_id="train-weights", visible=False)
        beta = gr.Number(value=DpoSection.beta, label=t("dpo_beta"), info=t("dpo_beta_info"),
                         elem_id="train-beta",
                         visible=False)
        teacher = gr.Dropdown(teachers, value=teachers[0][1] if teachers else None, label=t("teacher"),
                              elem_id="train-teacher", allow_custom_value=True, visible=False)
        temperature = gr.Number(value=DistillSection.temperature, label=t("distill_temperature"),
                                elem_id="train-temperature",
                                visible=False)
        kl_weight = gr.Slider(0.0, 1.0, value=DistillSection.kl_weight, step=0.05, label=t("kl_weight"),
                              info=t("kl_weight_info"),
                              elem_id="train-kl-weight", visible=False)
    with gr.Column(visible=False, elem_id="train-grpo") as grpo_box:  # grpo only
        with gr.Row():
            group_size = gr.Number(grpo.DEFAULTS["group_size"], label=t("group_size"),
                                   info=t("group_size_info"), elem_id="train-group-size")
            grpo_beta = gr.Number(grpo.DEFAULTS["beta"], label=t("grpo_beta"), info=t("grpo_beta_info"),
                                  elem_id="train-grpo-beta")
            max_new_tokens = gr.Number(grpo.DEFAULTS["max_new_tokens"], label=t("max_new_tokens"),
                                       info=t("grpo_max_new_info"), elem_id="train-max-new-tokens")
        with gr.Accordion(t("rewards"), open=True, elem_id="train-rewards-box"):
            reward_widgets, reward_toggles = grpo.reward_inputs()
        # what start_training and estimate take: the ticked rewards as the config's list (an API
        # caller sends that list; the page fills it from the boxes above before each click)
        rewards = gr.JSON(grpo.default_spec(), label="rewards", visible=False, elem_id="train-rewards")
    with gr.Row():
        stop_after = gr.Radio([(t("stop_steps"), "steps"), (t("stop_minutes"), "minutes")], value="steps",
                              label=t("stop_after"), elem_id="train-stop-after")
        steps = gr.Number(value=steps0, label=t("max_steps"), elem_id="train-steps")
        minutes = gr.Number(value=10, label=t("minutes"), info=t("minutes_info"), minimum=0.1, maximum=MAX_MINUTES,
                            elem_id="train-minutes", visible=False)
        run_name = gr.Textbox("", label=t("run_name"), info=t("run_name_info"), max_length=200,
                              elem_id="train-run-name")
    with gr.Accordion(t("advanced"), open=False, elem_id="train-advanced"):
        with gr.Row():
            batch = gr.Number(value=batch0, label=t("batch_size"), elem_id="train-batch")
            seq_len = gr.Number(value=256, label=t("seq_len"), elem_id="train-seq-len")
            lr = gr.Number(value=lr0, label=t("lr"), elem_id="train-lr")
            accum = gr.Number(value=1, label=t("grad_accum"), elem_id="train-accum")
            eval_every = gr.Number(value=0, label=t("eval_every"), elem_id="train-eval-every")
        with gr.Row():
            precision = gr.Dropdown(list(PRECISIONS), value="auto", label=t("precision"), elem_id="train-precision")
            rank = gr.Number(value=16, label=t("lora_rank"), elem_id="train-rank", visible=shown0["rank"])
            alpha = gr.Number(value=32, label=t("lora_alpha"), elem_id="train-alpha", visible=shown0["alpha"])
            architecture = gr.Dropdown(compare.architecture_choices(), value=compare.DEFAULT_ARCHITECTURE,
                                       label=t("architecture"), info=t("architecture_info"),
                                       elem_id="train-architecture", allow_custom_value=True,
                                       visible=shown0["architecture"])  # a new model only
        with gr.Row():
            processes = gr.Number(value=1, minimum=1, maximum=max_processes(), label=t("processes"),
                                  info=t("processes_info"), elem_id="train-processes")
            parallel = gr.Radio([(name, value) for value, name in PARALLEL.items()], value="ddp",
                                label=t("parallelism"), info=t("parallelism_info"), elem_id="train-parallel")
            report_to = gr.CheckboxGroup([(TRACKERS[name], name) for name in REPORT_TO], value=[],
                                         label=t("report_to"), info=t("report_to_info"), elem_id="train-report-to")
            extend_vocab = gr.Checkbox(value=False, label=t("extend_vocab"), info=t("extend_vocab_info"),
                                       elem_id="train-extend-vocab", visible=shown0["extend_vocab"])
    # the form's controls by TrainForm field, in the field order (the API's parameter order)
    controls = {"base": base, "mode": mode, "corpus": corpus, "steps": steps, "batch": batch, "seq_len": seq_len,
                "lr": lr, "accum": accum, "precision": precision, "rank": rank, "alpha": alpha,
                "eval_every": eval_every, "weights": weights, "beta": beta, "teacher": teacher,
                "temperature": temperature, "kl_weight": kl_weight, "rewards": rewards, "group_size": group_size,
                "grpo_beta": grpo_beta, "max_new_tokens": max_new_tokens, "stop_after": stop_after,
                "minutes": minutes, "processes": processes, "parallel": parallel, "report_to": report_to,
                "extend_vocab": extend_vocab, "architecture": architecture, "task": task,
                "class_weights": class_weights, "run_name": run_name}
    inputs = [controls[name] for name in FORM_FIELDS]  # a field without its control fails here, at build
    shown_boxes = {**controls, "grpo": grpo_box}
    visible_outputs = [objective_row, *(shown_boxes[name] for name in VISIBLE)]

    def form(values) -> TrainForm:
        return TrainForm(**dict(zip(FORM_FIELDS, values, strict=True)))
    with gr.Row():
        estimate_btn = gr.Button(t("estimate"), elem_id="estimate-btn")
        start_btn = gr.Button(t("start"), variant="primary", elem_id="start-btn")
        refresh_btn = gr.Button(t("refresh"))
    estimate_md = gr.Markdown(elem_id="estimate")
    message = gr.Markdown(elem_id="train-message")
    with gr.Row():
        run_id = gr.Dropdown(run_choices(ctx), label=t("run"), value=None, elem_id="train-run",
                             allow_custom_value=True)
        stop_btn = gr.Button(t("stop"), variant="stop", elem_id="stop-btn")
        resume_btn = gr.Button(t("resume"), elem_id="resume-btn")
    progress = gr.HTML(elem_id="train-progress")
    facts = gr.Markdown(elem_id="train-facts")
    # no fixed height: a fixed one clips the legend (below the plot) and hides its names
    curve = gr.LinePlot(None, x="step", y="loss", color="series", color_title=LEGEND_TITLE, label=t("loss_curve"),
                        elem_id="loss-plot")
    # shown for dpo, distill, grpo and classifier runs; hidden, not removed, for the others (see kept_drawn)
    with gr.Column(elem_classes=["mm-hidden"], elem_id="objective-box") as objective_box:
        objective_plot = gr.LinePlot(None, x="step", y="value", color="series", color_title="metric",
                                     label=t("objective_curve"), elem_id="objective-plot")
    drawn = gr.State([])  # the series the objective plot was last drawn with (see watch_objective)
    confusion_md = gr.Markdown(visible=False, elem_id="confusion-line")
    confusion = gr.Dataframe(label=t("confusion"), interactive=False, visible=False, elem_id="confusion-table")
    confusion_drawn = gr.State(None)  # the confusion matrix last drawn (see watch_confusion)
    rollouts = gr.Dataframe(label=t("rollouts"), interactive=False, wrap=True, elem_id="rollouts-table",
                            visible=False)
    log = gr.Textbox(label=t("log"), lines=8, max_lines=15, elem_id="train-log")
    queue = gr.Markdown(elem_id="train-queue")
    runs = gr.Dataframe(lambda: headed(runs_table(ctx)), label=t("runs"), interactive=False, elem_id="runs-table")
    with gr.Accordion(t("compare_runs"), open=True, elem_id="compare-box"):
        with gr.Row():
            compared = gr.Dropdown(run_choices(ctx), value=[], multiselect=True, label=t("compare_pick"),
                                   elem_id="compare-runs", allow_custom_value=True, max_choices=compare.MAX_RUNS)
            axis = gr.Radio([(t(f"cmp_x_{name}"), name) for name in compare.AXES], value="step",
                            label=t("compare_axis"), elem_id="compare-axis")
            compare_btn = gr.Button(t("compare"), elem_id="compare-btn")
        compare_plot = gr.LinePlot(None, x="x", y="loss", color="series", color_title="",
                                   label=t("compare_curve"), elem_id="compare-plot")
        compare_table = gr.Dataframe(lambda: headed(compare.empty_table()), label=t("compare_table"),
                                     interactive=False, elem_id="compare-table")
    timer = gr.Timer(WATCH_BUSY_S)  # the watch sets it: every 2 s while a run trains or waits, else every 10 s
    sent = gr.State(None)  # what the page's watch last sent this page (see changed_only)
    picked = gr.State(False)  # whether the user chose the corpus (else the Train tab offers the one saved last)

    # the defaults of a mode follow the user's choice of it (.input), never a value the page set (a
    # reload's, a labelled corpus's): what the user typed stays; what shows follows every change
    quiet = dict(api_name=False, show_progress="hidden")
    on_shown = user_errors(lambda m, w, b, tk: visibility(m, w, b, tk))
    for box in (mode, weights, base, task):
        box.change(on_shown, [mode, weights, base, task], visible_outputs, **quiet)
    mode.input(lambda m, w, tk: defaults_for(m, w, tk), [mode, weights, task], [lr, steps, batch], api_name=False)
    weights.input(lambda m, w, tk: defaults_for(m, w, tk), [mode, weights, task], [lr, steps, batch],
                  api_name=False)
    for ticked, box in reward_toggles:
        ticked.change(lambda on: gr.update(visible=on), [ticked], [box], api_name=False)
    corpus.change(lambda c, m, w, tk: on_corpus(ctx, c, m, w, tk), [corpus, mode, weights, task],
                  [classify_row, task, mode, lr, steps, batch], api_name=False)
    corpus.input(lambda: True, None, [picked], **quiet)
    task.input(lambda m, w, tk: defaults_for(m, w, tk), [mode, weights, task], [lr, steps, batch], api_name=False)
    stop_after.change(lambda how: (gr.update(visible=how != "minutes"), gr.update(visible=how == "minutes")),
                      [stop_after], [steps, minutes], api_name=False)

    # a page opened (or reloaded) while a run trains shows the form it was started with
    restored = [*(controls[name] for name in FORM_FIELDS if name not in NOT_RESTORED), picked]

    def on_open():
        updates = opened(ctx)
        return [updates.get(name, gr.update()) for name in FORM_FIELDS if name not in NOT_RESTORED] + [
            updates["picked"]]

    root = gr.context.Context.root_block
    if root is not None:
        root.load(user_errors(on_open), None, restored, **quiet)
    tab = get_render_context()
    if isinstance(tab, gr.Tab):  # the Train tab opened: the corpus saved last meanwhile, unless one was chosen
        tab.select(user_errors(lambda p, c: newest_corpus(ctx, p, c)), [picked, corpus], [corpus], **quiet)

    # After Start the page shows the new run at once ("queued"); a watch asked for another run before the
    # new one was chosen (the timer's, in flight) is not shown then: it would show the previous run finished
    started: dict[str, tuple[str, float]] = {}  # page session -> (the run it started last, when)

    def note_start(run_id_: str | None) -> None:
        """This page pressed Start (None: its run is not made yet) or started `run_id_`."""
        now = time.time()
        for session, (_, when) in list(started.items()):
            if now - when > FRESH_START_S:
                del started[session]
        if session_id():
            started[session_id()] = (run_id_, now)

    def pressed():
        note_start(None)
        return "", None  # the previous run's bar goes at once; the new run's follows its start (all sent)

    def stale(run_id_) -> bool:
        """Is this a watch of another run than the one this page started a moment ago?"""
        latest = started.get(session_id() or "")
        return bool(latest) and latest[0] != run_id_ and time.time() - latest[1] < FRESH_START_S

    def fresh(fn, outputs: int):
        def answer(r, *rest):
            if stale(r):
                return tuple(gr.update() for _ in range(outputs)) if outputs > 1 else gr.update()
            return fn(r, *rest)
        return answer

    def starting(*values):
        """Queue the run the form describes: its run (chosen in the Run box) and the queue's message."""
        try:
            choice, said = start(ctx, form(values))
        except BaseException:
            started.pop(session_id() or "", None)  # nothing started: the watch goes on as before
            raise
        note_start(choice["value"])
        return choice, said

    def estimating(*values):
        """The size and time of the run the form describes, measured in a short probe."""
        return do_estimate(ctx, form(values))

    def stop_training(run_id):
        """Stop a run; its last checkpoint is kept."""
        return stop(ctx, run_id)

    def resume_training(run_id):
        """Resume a stopped or failed run from its last checkpoint."""
        return resume(ctx, run_id)

    def watch_run(run_id=None):
        """What the page shows of a run (without one: the runs and the queue)."""
        return watch(ctx, run_id)

    def objective_of(run_id=None, series=None):
        """The plot of a run's objective metrics."""
        return watch_objective(ctx, run_id, series)

    # /watch_run keeps its seven outputs; the objective's plot follows it, for the run it chose
    watch_outputs = [progress, facts, curve, log, runs, queue, run_id]
    spec = dict(fn=grpo.reward_spec, inputs=reward_widgets, outputs=[rewards], api_name=False, show_progress="hidden")

    def watched(r):
        bar, said, plot, text, table, waiting, choice = watch(ctx, r)
        return bar, said, kept_drawn(plot, LOSS_COLUMNS, (tr("cmp_train"), tr("cmp_validation"))), text, table, \
            waiting, choice

    def objective_watched(r, series):
        update, series = watch_objective(ctx, r, series)
        shown = update.pop("visible", False)
        return gr.update(elem_classes=[] if shown else ["mm-hidden"]), kept_drawn(update, OBJECTIVE_COLUMNS), series

    def rollouts_of(run_id=None):
        """A GRPO run's held-out answers with their rewards."""
        return watch_rollouts(ctx, run_id)

    def confusion_of(run_id=None, drawn=None):
        """A finished classifier run's confusion matrix."""
        return watch_confusion(ctx, run_id, drawn)

    for handler in (starting, estimating):  # the API names the form's fields (TrainForm's), with its defaults
        handler.__signature__ = FORM_SIGNATURE
    rollout_watcher = user_errors(rollouts_of)
    confusion_watcher = user_errors(confusion_of)
    form_help = ("The Train form's fields by name (`base`, `mode`, `corpus`, `steps`, ...; each optional one "
                 "with the page's default)")
    estimate_btn.click(**spec).success(user_errors(estimating), inputs, [estimate_md], api_name="estimate",
                                       api_description=f"{form_help}: the run's size, steps and time, measured.")
    started_run = start_btn.click(pressed, None, [progress, sent], **quiet).then(**spec).success(
        user_errors(starting), inputs, [run_id, message], api_name="start_training",
        api_description=f"{form_help}: queue the run; returns its id (in the Run box) and a message.")
    stop_btn.click(user_errors(stop_training), [run_id], [message], api_name="stop_training",
                   api_description="Stop run `run_id` (its last checkpoint is kept).")
    resumed = resume_btn.click(user_errors(resume_training), [run_id], [message], api_name="resume_training",
                     api_description="Resume run `run_id`, stopped or failed, from its last checkpoint.")
    # the API's watch endpoints answer as ever (a plot's value None, the objective plot visible False) on a
    # trigger no page shows: a page's plots get what keeps them drawn (kept_drawn), from its own watch below
    api_watch = gr.Button(visible=False, elem_id="train-api-watch")
    api_watch.click(user_errors(watch_run), [run_id], watch_outputs, api_name="watch_run", api_description=(
        "Run `run_id` as the page shows it: progress, facts, loss curve, log, the runs table, the queue and "
        "the run.")).then(
        user_errors(objective_of), [run_id, drawn], [objective_plot, drawn], api_name="watch_objective",
        api_description="The objective metrics of run `run_id` (DPO, distillation, GRPO, classifier runs).").then(
        rollout_watcher, [run_id], [rollouts], api_name="watch_rollouts",
        api_description="The held-out answers of GRPO run `run_id` with their rewards, newest first.").then(
        confusion_watcher, [run_id, confusion_drawn], [confusion_md, confusion, confusion_drawn],
        api_name="watch_confusion",
        api_description="The confusion matrix of classifier run `run_id`, once it has finished.")
    def page_watch(r, series, confusion_key):
        """All the page's watch shows, in one answer. It was five chained events a tick, and the
        browser updated itself after each: with nothing training, a page open on the Train tab used
        7.5 s of the browser's CPU in 30 s with five, 4.2 s with one (2.4 s with no watch at all).
        Its last output is the page's timer: 2 s while a run trains or waits, 10 s otherwise."""
        bar, said, plot, text, table, waiting, choice = watched(r)
        if isinstance(choice, dict) and choice.get("value"):
            r = choice["value"]  # the run this answer picked (no run chosen yet): the rest is of it
        box, objective, series = objective_watched(r, series)
        busy = _busy(ctx.jobs.runs())
        return (bar, said, plot, text, table, waiting, choice, box, objective, series, rollouts_of(r),
                run_message(ctx, r), *confusion_of(r, confusion_key), WATCH_BUSY_S if busy else WATCH_IDLE_S)

    page_outputs = [*watch_outputs, objective_box, objective_plot, drawn, rollouts, message, confusion_md, confusion,
                    confusion_drawn, timer]
    page_watcher = changed_only(fresh(user_errors(page_watch), len(page_outputs)), len(page_outputs),
                                always=(page_outputs.index(message),))  # (Stop, Resume and Start write it too)
    # the page's watch: on its timer (which it sets: WATCH_BUSY_S, WATCH_IDLE_S), on Refresh, and at once
    # after Start and Resume; each answer sends only what changed since this page's last one
    # (changed_only; Start's press sends all again)
    for event in (timer.tick, refresh_btn.click, started_run.success, resumed.success):
        event(page_watcher, [sent, run_id, drawn, confusion_drawn], [*page_outputs, sent], **quiet)

    def choices():
        return (gr.update(choices=base_choices(ctx)), gr.update(choices=corpus_choices(ctx)),
                gr.update(choices=teacher_choices(ctx)))

    refresh_btn.click(choices, None, [base, corpus, teacher], api_name=False)
    base.focus(choices, None, [base, corpus, teacher], api_name=False)
    corpus.focus(choices, None, [base, corpus, teacher], api_name=False)
    teacher.focus(choices, None, [base, corpus, teacher], api_name=False)
    base.change(lambda b: gr.update(visible=b == HUB_CHOICE), [base], [import_row], api_name=False)

    def do_import(source):
        """Import a Hugging Face model (a Hub id or, when allowed, a local folder), step by step."""
        for line, model_id in import_steps(ctx.workspace, source, ctx.local_folders):
            yield line, (gr.update() if model_id is None else gr.update(choices=base_choices(ctx), value=model_id))

    import_btn.click(user_errors_gen(do_import), [hub_source], [import_status, base], api_name="import_model",
                     api_description="Import the Llama-family model `source` (a Hub id such as "
                                     "`Qwen/Qwen2.5-0.5B`): its progress, then the Start-from choice it becomes.")

    # Gradio 6's plot draws the data of the update before the last one into a drawn plot (it reads its data
    # before recomputing it): each comparison is sent twice, so the second draws the first's data
    def compared_runs(runs, x_axis="step"):
        """Several runs' loss curves on one plot and their final figures."""
        plot, table = compare.compare(ctx, runs, x_axis)
        return kept_drawn(plot, ["x", "loss", "series"]), table

    comparer = user_errors(compared_runs)
    compare_btn.click(comparer, [compared, axis], [compare_plot, compare_table], api_name="compare_runs",
                      api_description="The train and validation loss of `runs` (up to 8 run ids) on one plot, by "
                                      "`x_axis` (step, time or tokens), and a table of their final figures.").success(
        comparer, [compared, axis], [compare_plot, compare_table], **quiet)
    on_axis = lambda picked, x: comparer(picked, x) if picked else (gr.update(), gr.update())  # noqa: E731
    axis.change(on_axis, [compared, axis], [compare_plot, compare_table], **quiet).success(
        on_axis, [compared, axis], [compare_plot, compare_table], **quiet)
    for event in (refresh_btn.click, compared.focus):
        event(lambda: gr.update(choices=run_choices(ctx)), None, [compared], **quiet)

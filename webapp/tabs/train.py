"""Train tab: pick a base, a mode and a corpus; see size and ETA; start, watch, stop, resume.

Training runs as a child process (`python -m minimind train`, under torchrun when the run asks
for several processes); this tab only writes a config, asks the job manager to queue it, and
reads the run folder.
Modes dpo (preference pairs), distill (a teacher's logits) and grpo (rewards for
answers the model writes; see grpo.py) show their own settings and, while a run trains, their
own metrics beside the loss; a grpo run also shows its held-out answers with their rewards.
A labelled corpus (text + label) offers the classification task (modes sft, lora, qlora): its
run shows accuracy and macro-F1 as it trains and, once finished, its confusion matrix.
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr
import pandas as pd
import yaml

from minimind.config import PRESETS
from minimind.training import RunDir, TrainConfig
from minimind.training.checkpoint import latest_checkpoint
from minimind.training.config import DISTRIBUTED, EXTENDABLE, MODES as TRAIN_MODES, DistillSection, DpoSection
from minimind.training.distributed import local_capacity
from minimind.training.precision import bf16_supported, describe, pick_device
from minimind.training.reporting import REPORT_TO
from minimind.training.sizing import pretrain_lr
from minimind.vocabulary import MAX_NEW_TOKENS

from .. import classifiers, work
from ..context import AppContext, shown as _shown, user_errors, without_paths
from ..i18n import EN, headed, t, tr
from ..workspace import WorkspaceError
from . import compare, grpo

MODES = list(TRAIN_MODES)  # pretrain, sft, lora, qlora, dpo, distill, grpo
WEIGHTS = {"full": "", "lora": "lora", "qlora": "qlora"}  # dpo / distill / grpo: what trains -> config adapter
ADAPTABLE = ("dpo", "distill", "grpo")  # the modes whose weights the page asks for
STOP_AFTER = ("steps", "minutes")  # how a run's length is given: max_steps, or time_budget_s (minutes × 60)
MAX_MINUTES = 24 * 60  # the longest time budget the page takes (one day)
PARALLEL = {"ddp": "DDP", "fsdp": "FSDP2"}  # config `distributed` -> what the page calls it
TRACKERS = {"tensorboard": "TensorBoard", "trackio": "trackio"}  # config `report_to` -> the page's names
LEGEND_TITLE = "loss on"  # the loss plot's legend title (its entries: train, validation)
TASKS = ("generate", "classify")  # config `task`: a language model, or a classifier (labelled corpora)
CLASSIFY_MODES = ("sft", "lora", "qlora")  # how a classifier trains: every weight, or LoRA / QLoRA + its head
CLASS_WEIGHTS = ("", "balanced")  # classify.class_weights the page offers: none, or balanced
RUN_COLUMNS = ["run", "state", "mode", "step", "val_loss", "val_bpc", "error"]  # the Runs table
# Words of the trainer's log meant for its command line, and what the page says instead
PAGE_WORDS = (("; resume with --resume", " — press Resume to continue"),
              ("(see train.log)", "(see the log below)"))

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


def device_line() -> str:
    device = pick_device()
    precision = "bf16" if bf16_supported(device) else ("fp16" if device == "cuda" else "fp32")
    return tr("device_line", device=describe(device, precision))


def base_choices(ctx: AppContext) -> list[tuple[str, str]]:
    """New models by preset, the shipped models, and finished full-model runs."""
    choices = [(tr("new_model_auto"), "new:auto")]
    choices += [(tr("new_model", name=name), f"new:{name}") for name in PRESETS]
    return choices + full_models(ctx)


def full_models(ctx: AppContext) -> list[tuple[str, str]]:
    """The offered full models (an adapter run is not a model of its own), classifiers included."""
    return [(label, model_id) for label, model_id, folder in ctx.offered_models()
            if not (folder / "adapter_config.json").is_file()]


def teacher_choices(ctx: AppContext) -> list[tuple[str, str]]:
    """Distillation teachers: the offered full models that write text (no classifier)."""
    from minimind.checkpoint import is_classifier

    return [(label, model_id) for label, model_id, folder in ctx.offered_models()
            if not (folder / "adapter_config.json").is_file() and not is_classifier(folder)]


def corpus_choices(ctx: AppContext) -> list[str]:
    return [c["name"] for c in ctx.workspace.list_corpora()]


def defaults_for(mode: str, weights: str = "full", task: str = "generate"):
    """lr, steps and batch size that suit the mode (and, for dpo/distill/grpo, its weights; for a
    classifier, its task) on this device: the trainer's own defaults. Distill with full weights is
    taken to train a new student."""
    device = pick_device()
    if task == "classify" and mode not in CLASSIFY_MODES:
        mode = "lora"
    adapter = WEIGHTS.get(weights or "full", "") if mode in ADAPTABLE else ""
    new_model = mode == "pretrain" or (mode == "distill" and not adapter)
    raw = {"mode": mode, "adapter": adapter, "max_steps": 1, "data": {"files": ["corpus"]},
           "model": {"init_from": "" if new_model else "base"}}  # fine-tunes need one to validate
    if task == "classify":
        raw["task"] = "classify"
    if mode == "distill":
        raw["distill"] = {"teacher": "teacher"}
    if mode == "grpo":
        raw["grpo"] = {"rewards": grpo.default_spec()}
    resolved = TrainConfig.from_dict(raw).resolved(device, bf16_supported(device))
    steps = 300 if new_model else 100
    return resolved.optim.lr or pretrain_lr("nano"), steps, resolved.batch_size  # auto size: lr set when chosen


def _number(value, what: str, low: float, high: float | None = None) -> float:
    """A number typed on the page: above `low`, or in [low, high] when `high` is given."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    ok = low <= number <= high if high is not None else number > low
    if not ok:  # NaN fails both
        span = f"between {low:g} and {high:g}" if high is not None else f"above {low:g}"
        raise WorkspaceError(f"{what} must be a number {span} (got {_shown(value)})")
    return number


def _whole(value, what: str, low: int, high: int) -> int:
    """A whole number typed on the page (an emptied box arrives as None), in [low, high]."""
    number = _number(value, what, low, high)
    if number != int(number):
        raise WorkspaceError(f"{what} must be a whole number (got {_shown(value)})")
    return int(number)


def _choices(**given) -> None:
    """Every dropdown and radio value is a name (text) or unset: a list or a number sent to the API
    is refused with the field's name."""
    for what, value in given.items():
        if value is not None and not isinstance(value, str):
            raise WorkspaceError(f"{what.replace('_', ' ')} must be one of the page's choices (got {_shown(value)})")


def build_config(ctx: AppContext, base, mode, corpus, steps, batch, seq_len, lr, accum, precision,
                 rank, alpha, eval_every, weights="full", beta=DpoSection.beta, teacher=None,
                 temperature=DistillSection.temperature, kl_weight=DistillSection.kl_weight,
                 rewards=None, group_size=grpo.DEFAULTS["group_size"], grpo_beta=grpo.DEFAULTS["beta"],
                 max_new_tokens=grpo.DEFAULTS["max_new_tokens"], stop_after="steps",
                 minutes=10.0, processes=1, parallel="ddp", report_to=None, extend_vocab=False,
                 architecture=compare.DEFAULT_ARCHITECTURE, task="generate", class_weights="") -> TrainConfig:
    """The run the page describes. dpo, distill and grpo read `weights` (full, lora or qlora); dpo
    reads `beta`; distill reads `teacher` (an offered full model), `temperature` and `kl_weight` (the
    next-token loss on the data weighs 1 - kl_weight); grpo reads `rewards` (grpo.rewards of the
    config, as a list or JSON text; None: the page's default), `group_size`, `grpo_beta` and
    `max_new_tokens`, within the page's bounds. Every other input of another mode is ignored.
    `stop_after` "steps" runs `steps` optimizer steps; "minutes" runs for `minutes` of wall-clock
    time (time_budget_s; max_steps 0: the trainer sizes the run from its measured steps).
    `processes` > 1 trains with that many data-parallel processes (torchrun; `batch` is per process)
    sharing the model as `parallel` says (ddp or fsdp), at most one per GPU (or CPU core, at least
    2). `report_to` lists trackers (tensorboard, trackio) that get the run's metrics too.
    `extend_vocab` adds the corpus's frequent characters that the starting model's tokenizer
    spells in byte pieces to its vocabulary (fine-tuning modes; minimind.vocabulary).
    `architecture` (compare.ARCHITECTURES: a position encoding, or an LSTM with or without
    attention) shapes a new model; starting from an existing one it is ignored.
    `task` "classify" (a labelled corpus only, and the only task it takes) trains a classifier of the
    corpus's classes with mode sft (every weight), lora or qlora (+ the head), from the shipped
    model or a finished run; `class_weights` "balanced" weighs every class alike in the loss."""
    _choices(start_from=base, mode=mode, corpus=corpus, precision=precision, weights=weights, teacher=teacher,
             stop_after=stop_after, parallelism=parallel, task=task,
             class_weights=class_weights)
    if mode not in MODES:
        raise WorkspaceError(f"mode must be one of {', '.join(MODES)}")
    if not corpus:
        raise WorkspaceError("choose a corpus (save one on the Corpus tab first)")
    meta = ctx.workspace.corpus(corpus)
    settings = meta.get("settings", {})
    kind = meta.get("summary", {}).get("kind")
    if mode == "dpo" and kind and kind != "preference":
        raise WorkspaceError(f"dpo learns from preference pairs (prompt, chosen, rejected); corpus {corpus!r} "
                             f"is {kind}: save a preference corpus on the Corpus tab")
    if mode != "dpo" and kind == "preference":
        raise WorkspaceError(f"corpus {corpus!r} holds preference pairs: train on it with mode dpo")
    if mode == "grpo" and kind and kind != "prompts":
        raise WorkspaceError(f"grpo learns from prompts the model answers; corpus {corpus!r} is {kind}: save a "
                             "prompts corpus on the Corpus tab (e.g. the Tang poem prompts sample)")
    if mode != "grpo" and kind == "prompts":
        raise WorkspaceError(f"corpus {corpus!r} holds prompts without answers: train on it with mode grpo")
    task = task or "generate"
    if task not in TASKS:
        raise WorkspaceError(f"task must be one of {', '.join(TASKS)} (got {_shown(task)})")
    if (class_weights or "") not in CLASS_WEIGHTS:
        raise WorkspaceError(f"class weights must be none or balanced (got {_shown(class_weights)})")
    if kind == "labelled" and task != "classify":
        raise WorkspaceError(f"corpus {corpus!r} holds labelled text: train a classifier on it (task classify)")
    if task == "classify":
        if kind and kind != "labelled":
            raise WorkspaceError(f"a classifier learns from labelled text (a text and a label field); corpus "
                                 f"{corpus!r} is {kind}: save a labelled corpus (e.g. a CSV with text and label "
                                 "columns) on the Corpus tab")
        if mode not in CLASSIFY_MODES:
            raise WorkspaceError(f"a classifier trains with mode sft (every weight), lora or qlora (got {mode})")
    if (stop_after or "steps") not in STOP_AFTER:
        raise WorkspaceError(f"stop after must be one of {', '.join(STOP_AFTER)} (got {_shown(stop_after)})")
    timed = stop_after == "minutes"
    budget_s = round(_number(minutes, "minutes", 0.1, MAX_MINUTES) * 60, 3) if timed else 0.0
    count = _number(processes if processes is not None else 1, "processes", 1, max_processes())
    if count != int(count):
        raise WorkspaceError(f"processes must be a whole number (got {_shown(processes)})")
    if (parallel or "ddp") not in DISTRIBUTED:
        raise WorkspaceError(f"parallelism must be one of {', '.join(DISTRIBUTED)} (got {_shown(parallel)})")
    if extend_vocab not in (True, False, None):
        raise WorkspaceError(f"add the corpus's characters must be true or false (got {_shown(extend_vocab)})")
    adapter = ""
    if mode in ADAPTABLE:
        if (weights or "full") not in WEIGHTS:
            raise WorkspaceError(f"weights must be one of {', '.join(WEIGHTS)} (got {_shown(weights)})")
        adapter = WEIGHTS[weights or "full"]
    if report_to is not None and not isinstance(report_to, (str, list)):
        raise WorkspaceError(f"trackers must be a list of names (got {_shown(report_to)})")
    raw = {"mode": mode, "adapter": adapter, "max_steps": 0 if timed else _whole(steps, "steps", 1, 10**9),
           "time_budget_s": budget_s, "processes": int(count), "distributed": parallel or "ddp",
           "report_to": [report_to] if isinstance(report_to, str) else list(report_to or []),
           "batch_size": _whole(batch, "batch size", 1, 4096),
           "grad_accum": _whole(accum, "gradient accumulation", 1, 1024), "precision": precision,
           "eval_every": _whole(eval_every or 0, "evaluate every", 0, 10**9),
           "optim": {"lr": _number(lr, "learning rate", 0, 1)},
           "lora": {"rank": _whole(rank, "LoRA rank", 1, 256), "alpha": _whole(alpha, "LoRA alpha", 1, 100_000)},
           "data": {"files": meta["paths"], "kind": settings.get("kind", "auto"),
                    "text_field": settings.get("text_field"), "split": settings.get("split", "paragraph"),
                    "strict": settings.get("strict", False), "seq_len": _whole(seq_len, "sequence length", 8, 65536),
                    "cache_dir": str(ctx.workspace.cache)}}
    if settings.get("label_field"):
        raw["data"]["label_field"] = settings["label_field"]
    if task == "classify":
        raw["task"] = "classify"
        raw["classify"] = {"class_weights": class_weights or ""}
    if mode == "dpo":
        raw["dpo"] = {"beta": _number(beta, "beta", 0)}
    if mode == "distill":
        if teacher not in {v for _, v in teacher_choices(ctx)}:
            raise WorkspaceError("choose a teacher: the shipped model or a finished full-model run")
        kl = _number(kl_weight, "KL weight", 0, 1)
        raw["distill"] = {"teacher": str(ctx.model_folder(teacher)), "kl_weight": kl, "ce_weight": round(1.0 - kl, 6),
                          "temperature": _number(temperature, "temperature", 0)}
    if mode == "grpo":
        raw["grpo"] = grpo.grpo_section(grpo.default_spec() if rewards is None else rewards, group_size,
                                        grpo_beta, max_new_tokens)
    if base not in {v for _, v in base_choices(ctx)}:
        raise WorkspaceError("choose what to start from: a new model, the shipped model or a finished run")
    if base.startswith("new:"):
        if task == "classify":
            raise WorkspaceError("a classifier fine-tunes an existing model: start from the shipped model or a "
                                 "finished run")
        if mode not in ("pretrain", "distill"):
            raise WorkspaceError(f"{mode} fine-tunes an existing model: start from the shipped model or a "
                                 "finished run, or choose pretrain")
        if adapter:
            raise WorkspaceError(f"{adapter} weights adapt an existing model: start the student from the shipped "
                                 "model or a finished run, or train full weights for a new student")
        raw["model"] = {"preset": base[4:], **compare.model_settings(architecture)}
        tok = ctx.workspace.corpora / meta["name"] / "tokenizer"
        if mode == "pretrain" and (tok / "tokenizer.json").is_file():  # a distilled student takes the teacher's
            raw["model"]["tokenizer"] = str(tok)
    else:
        raw["model"] = {"init_from": str(ctx.model_folder(base))}
    if extend_vocab:
        if base.startswith("new:") or mode not in EXTENDABLE:
            raise WorkspaceError("adding the corpus's characters to the vocabulary is for fine-tuning an existing "
                                 "model (modes pretrain, sft, lora, qlora); a new model learns its own tokenizer")
        raw["model"]["extend_vocab"] = MAX_NEW_TOKENS
    config = TrainConfig.from_dict(raw)
    config.validate()
    return config


def max_processes() -> int:
    """The most processes the page starts for one run on this machine's device."""
    return local_capacity(pick_device())


def do_estimate(ctx: AppContext, *args) -> str:
    import tempfile

    config = build_config(ctx, *args)
    ctx.workspace.cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="estimate-", dir=ctx.workspace.cache) as scratch:
        # a fresh folder (nothing of an earlier estimate is reused), in a child within the page's limits
        e, spelled = ctx.bounded.run(work.estimate_run, config, scratch, what="the estimate")
    size = f"`{e.preset}`; " if e.preset else ""
    text = tr("e_estimate", params=f"{e.params:,}", size=size, trainable=f"{e.trainable:,}", device=e.device,
              tokens=f"{e.tokens_per_epoch:,}", rows=f"{e.train_rows:,}", steps=f"{e.steps:,}",
              sps=f"{e.seconds_per_step:.2f}", eta=_duration(e.eta_s),
              how=tr("e_how_minutes" if config.time_budget_s else "e_how_steps"))
    return text + coverage_note(config, spelled)


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


def start(ctx: AppContext, *args):
    config = build_config(ctx, *args)
    run_id = ctx.jobs.submit(config, label=config.mode)
    return gr.update(choices=run_choices(ctx), value=run_id), tr("queued", run_id=run_id)


def run_choices(ctx: AppContext) -> list[str]:
    return [r.path.name for r in ctx.jobs.runs()]


def _duration(seconds) -> str:
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
        return "", "", None, "", runs, queue_md, gr.update()
    run = RunDir(ctx.workspace.run_dir(run_id))  # a run of this workspace, by id: never a path
    s = run.read_status()
    step, total = s.get("step", 0) or 0, s.get("total") or 0
    pct = 100.0 * step / total if total else 0.0
    bar = (f"<div class='mm-progress'><div style='width:{pct:.1f}%'></div></div>"
           f"<div id='run-progress' data-step='{step}' data-total='{total}'>"
           + tr("p_line", state=state_word(s.get("state")), step=step, total=total or "?", pct=f"{pct:.0f}",
                eta=_duration(s.get("eta_s"))) + "</div>")
    facts = [tr("f_state", v=state_word(s.get("state"))), tr("f_device", v=s.get("device", "?")),
             tr("f_architecture", v=compare.architecture_label(compare.run_architecture(run)))]
    if s.get("tokens_per_s"):
        facts.append(tr("f_tokens_s", v=f"{s['tokens_per_s']:,.0f}"))
    if s.get("lr") is not None:
        facts.append(tr("f_lr", v=f"{s['lr']:.2e}"))
    if s.get("loss") is not None:
        facts.append(tr("f_loss", v=f"{s['loss']:.4f}"))
    if s.get("val_loss") is not None:
        facts.append(tr("f_val_loss", v=f"{s['val_loss']:.4f}")
                     + (tr("f_bpc", v=f"{s['val_bpc']:.3f}") if s.get("val_bpc") else ""))
    facts += objective_facts(s, run_objective(run, s))
    if s.get("error"):
        facts.append(tr("f_error", v=page_words(without_paths(s["error"]))))
    if s.get("final_checkpoint"):
        facts.append(tr("f_model", v=f"`{Path(s['final_checkpoint']).relative_to(ctx.workspace.root)}`"))
    return (bar, " · ".join(facts), _curve(run), page_words(without_paths(run.log_tail(15))), runs, queue_md,
            gr.update(choices=run_choices(ctx), **({"value": run_id} if picked else {})))


def state_word(state) -> str:
    """A run's state as the page says it (the state itself when it has no translation)."""
    return tr(f"state_{state}") if f"state_{state}" in EN else str(state or "?")


def runs_table(ctx: AppContext) -> pd.DataFrame:
    """Every run of the workspace, newest first; before the first run, no rows under named columns."""
    rows = [{**row, "error": page_words(without_paths(row["error"]))} for row in ctx.jobs.table()]
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def page_words(text: str) -> str:
    """The trainer's log and errors as the page shows them: no command-line hints."""
    for cli, page in PAGE_WORDS:
        text = text.replace(cli, page)
    return text


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
    if state == "running":
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


def _curve(run: RunDir) -> pd.DataFrame | None:
    """The loss plot's data: a train and a validation line. A line with no figure yet (validation
    before the first evaluation; train before the first logged step, when evaluations come more
    often than log lines) is one point without a value (not drawn): Gradio 6 fixes a plot's lines
    when it first draws it and leaves a line that first appears in a live update undrawn, so both
    are there from the start (and the legend names both)."""
    rows = []
    for r in run.read_metrics():
        if "loss" in r:
            rows.append({"step": r["step"], "loss": r["loss"], "series": "train"})
        if "val_loss" in r:
            rows.append({"step": r["step"], "loss": r["val_loss"], "series": "validation"})
    for series in ("train", "validation"):
        if rows and not any(row["series"] == series for row in rows):
            rows.append({"step": rows[0]["step"], "loss": None, "series": series})
    return pd.DataFrame(rows, columns=["step", "loss", "series"]) if rows else None


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
    series = list(dict.fromkeys(curve["series"])) if curve is not None else []
    update = gr.update(value=curve, visible=curve is not None)
    if series != (drawn or []):
        update["colors_in_legend"] = series or None
    return update, series


def watch_rollouts(ctx: AppContext, run_id):
    """The held-out answers of the grpo run the page shows, with their rewards; hidden otherwise."""
    if not run_id:
        return gr.update(value=None, visible=False)
    table = grpo.rollout_table(RunDir(ctx.workspace.run_dir(run_id)))
    return gr.update(value=table, visible=table is not None)


def corpus_kind(ctx: AppContext, corpus) -> str | None:
    """The kind a saved corpus was found to be (None for an unknown name or none chosen)."""
    if not isinstance(corpus, str) or not corpus:
        return None
    try:
        return ctx.workspace.corpus(corpus).get("summary", {}).get("kind")
    except (WorkspaceError, OSError, ValueError):
        return None


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


def stop(ctx: AppContext, run_id) -> str:
    if not run_id:
        raise WorkspaceError("choose a run")
    return ctx.jobs.stop(run_id)


def resume(ctx: AppContext, run_id) -> str:
    if not run_id:
        raise WorkspaceError("choose a run")
    return ctx.jobs.resume(run_id)


def build(ctx: AppContext) -> None:
    gr.Markdown(device_line)
    lr0, steps0, batch0 = defaults_for("lora")
    teachers = teacher_choices(ctx)
    with gr.Row():
        base = gr.Dropdown(base_choices(ctx), label=t("base"), value=None, elem_id="train-base",
                           allow_custom_value=True)
        mode = gr.Radio([(t(f"mode_{m}"), m) for m in MODES], value="lora", label=t("mode"),
                        info=t("mode_info"), elem_id="train-mode")
        corpus = gr.Dropdown(corpus_choices(ctx), label=t("corpus"), value=None, elem_id="train-corpus",
                             allow_custom_value=True)
    with gr.Row(visible=False, elem_id="train-classify") as classify_row:  # a labelled corpus only
        task = gr.Radio([(t("task_classify"), "classify"), (t("task_generate"), "generate")], value="generate",
                        label=t("task"), info=t("task_info"), elem_id="train-task")
        class_weights = gr.Radio([(t("class_weights_none"), ""), (t("class_weights_balanced"), "balanced")],
                                 value="", label=t("class_weights"), info=t("class_weights_info"),
                                 elem_id="train-class-weights")
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
        batch = gr.Number(value=batch0, label=t("batch_size"))
        seq_len = gr.Number(value=256, label=t("seq_len"))
        lr = gr.Number(value=lr0, label=t("lr"))
        accum = gr.Number(value=1, label=t("grad_accum"))
    with gr.Row():
        precision = gr.Dropdown(["auto", "bf16", "fp16", "fp32"], value="auto", label=t("precision"))
        rank = gr.Number(value=16, label=t("lora_rank"))
        alpha = gr.Number(value=32, label=t("lora_alpha"))
        eval_every = gr.Number(value=0, label=t("eval_every"))
    with gr.Row():
        processes = gr.Number(value=1, minimum=1, maximum=max_processes(), label=t("processes"),
                              info=t("processes_info"), elem_id="train-processes")
        parallel = gr.Radio([(name, value) for value, name in PARALLEL.items()], value="ddp",
                            label=t("parallelism"), info=t("parallelism_info"), elem_id="train-parallel")
        report_to = gr.CheckboxGroup([(TRACKERS[name], name) for name in REPORT_TO], value=[],
                                     label=t("report_to"), info=t("report_to_info"), elem_id="train-report-to")
        extend_vocab = gr.Checkbox(value=False, label=t("extend_vocab"), info=t("extend_vocab_info"),
                                   elem_id="train-extend-vocab")
        architecture = gr.Dropdown(compare.architecture_choices(), value=compare.DEFAULT_ARCHITECTURE,
                                   label=t("architecture"), info=t("architecture_info"), elem_id="train-architecture",
                                   allow_custom_value=True, visible=False)  # a new model only (see on_base)
    # the new inputs go last: a client that sends the first twelve gets the defaults of the rest
    inputs = [base, mode, corpus, steps, batch, seq_len, lr, accum, precision, rank, alpha, eval_every,
              weights, beta, teacher, temperature, kl_weight, rewards, group_size, grpo_beta, max_new_tokens,
              stop_after, minutes, processes, parallel, report_to, extend_vocab, architecture, task, class_weights]
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
    objective_plot = gr.LinePlot(None, x="step", y="value", color="series", color_title="metric",
                                 label=t("objective_curve"), elem_id="objective-plot", visible=False)
    drawn = gr.State([])  # the series the objective plot was last drawn with (see watch_objective)
    confusion_md = gr.Markdown(visible=False, elem_id="confusion-line")
    confusion = gr.Dataframe(label=t("confusion"), interactive=False, visible=False, elem_id="confusion-table")
    confusion_drawn = gr.State(None)  # the confusion matrix last drawn (see watch_confusion)
    rollouts = gr.Dataframe(label=t("rollouts"), interactive=False, wrap=True, elem_id="rollouts-table",
                            visible=False)
    log = gr.Textbox(label=t("log"), lines=8, max_lines=15, elem_id="train-log")
    queue = gr.Markdown()
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
    timer = gr.Timer(2.0)

    def on_mode(m, w, tk):
        lr_, steps_, batch_ = defaults_for(m, w, tk)
        dpo, distill, adaptable = m == "dpo", m == "distill", m in ADAPTABLE
        shown = [adaptable, adaptable, dpo, distill, distill, distill, m == "grpo"]
        return (lr_, steps_, batch_, *(gr.update(visible=v) for v in shown))

    mode.change(on_mode, [mode, weights, task], [lr, steps, batch, objective_row, weights, beta, teacher, temperature,
                                           kl_weight, grpo_box], api_name=False)
    for ticked, box in reward_toggles:
        ticked.change(lambda on: gr.update(visible=on), [ticked], [box], api_name=False)
    weights.change(lambda m, w: defaults_for(m, w), [mode, weights], [lr, steps, batch], api_name=False)
    corpus.change(lambda c, m, w, tk: on_corpus(ctx, c, m, w, tk), [corpus, mode, weights, task],
                  [classify_row, task, mode, lr, steps, batch], api_name=False)
    task.input(lambda m, w, tk: defaults_for(m, w, tk), [mode, weights, task], [lr, steps, batch], api_name=False)
    stop_after.change(lambda how: (gr.update(visible=how != "minutes"), gr.update(visible=how == "minutes")),
                      [stop_after], [steps, minutes], api_name=False)
    # /watch_run keeps its seven outputs; the objective's plot follows it, for the run it chose
    watch_outputs = [progress, facts, curve, log, runs, queue, run_id]
    spec = dict(fn=grpo.reward_spec, inputs=reward_widgets, outputs=[rewards], api_name=False, show_progress="hidden")
    estimate_btn.click(**spec).success(user_errors(lambda *a: do_estimate(ctx, *a)), inputs, [estimate_md],
                                       api_name="estimate")
    start_btn.click(**spec).success(user_errors(lambda *a: start(ctx, *a)), inputs, [run_id, message],
                                    api_name="start_training")
    stop_btn.click(user_errors(lambda r: stop(ctx, r)), [run_id], [message], api_name="stop_training")
    resume_btn.click(user_errors(lambda r: resume(ctx, r)), [run_id], [message], api_name="resume_training")
    watcher = user_errors(lambda r: watch(ctx, r))
    objective_watcher = user_errors(lambda r, series: watch_objective(ctx, r, series))
    rollout_watcher = user_errors(lambda r: watch_rollouts(ctx, r))
    message_watcher = user_errors(lambda r: run_message(ctx, r))
    confusion_watcher = user_errors(lambda r, d: watch_confusion(ctx, r, d))
    quiet = dict(api_name=False, show_progress="hidden")
    refresh_btn.click(watcher, [run_id], watch_outputs, api_name="watch_run").then(
        objective_watcher, [run_id, drawn], [objective_plot, drawn], api_name="watch_objective").then(
        rollout_watcher, [run_id], [rollouts], api_name="watch_rollouts").then(
        message_watcher, [run_id], [message], **quiet).then(
        confusion_watcher, [run_id, confusion_drawn], [confusion_md, confusion, confusion_drawn],
        api_name="watch_confusion")
    timer.tick(watcher, [run_id], watch_outputs, **quiet).then(
        objective_watcher, [run_id, drawn], [objective_plot, drawn], **quiet).then(
        rollout_watcher, [run_id], [rollouts], **quiet).then(
        message_watcher, [run_id], [message], **quiet).then(
        confusion_watcher, [run_id, confusion_drawn], [confusion_md, confusion, confusion_drawn], **quiet)

    def choices():
        return (gr.update(choices=base_choices(ctx)), gr.update(choices=corpus_choices(ctx)),
                gr.update(choices=teacher_choices(ctx)))

    refresh_btn.click(choices, None, [base, corpus, teacher], api_name=False)
    base.focus(choices, None, [base, corpus, teacher], api_name=False)
    corpus.focus(choices, None, [base, corpus, teacher], api_name=False)
    teacher.focus(choices, None, [base, corpus, teacher], api_name=False)
    base.change(lambda b: gr.update(visible=isinstance(b, str) and b.startswith("new:")), [base], [architecture],
                api_name=False)

    # Gradio 6's plot draws the data of the update before the last one into a drawn plot (it reads its data
    # before recomputing it): each comparison is sent twice, so the second draws the first's data
    comparer = user_errors(lambda picked, x: compare.compare(ctx, picked, x))
    compare_btn.click(comparer, [compared, axis], [compare_plot, compare_table], api_name="compare_runs").success(
        comparer, [compared, axis], [compare_plot, compare_table], **quiet)
    on_axis = lambda picked, x: comparer(picked, x) if picked else (gr.update(), gr.update())  # noqa: E731
    axis.change(on_axis, [compared, axis], [compare_plot, compare_table], **quiet).success(
        on_axis, [compared, axis], [compare_plot, compare_table], **quiet)
    for event in (refresh_btn.click, compared.focus):
        event(lambda: gr.update(choices=run_choices(ctx)), None, [compared], **quiet)

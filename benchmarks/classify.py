"""Classification, measured on a real task: who wrote this Tang poem? MiniMind-Tang fine-tuned as a
classifier (LoRA and full) against a TF-IDF + logistic-regression baseline, same split, same scorer.

Two tasks (TASKS), each its own split, fine-tunes and baseline: the poems of the five most prolific
named poets of the Tang corpus (../shared/corpora/tang_poems.jsonl, POETS; "不詳", unknown, is not a
poet and is skipped), and of three of the best known (李白, 杜甫, 白居易: an outside check of issue 46
used three poets it did not name).
Texts that occur more than once among these poems are dropped (a copy on each side of the split
would be a poem trained on and held out at once). The split is by poem, stratified by poet,
seed SEED: HELD_OUT of each poet's poems are held out and never trained on, by any of the three.

- Ours: `minimind.training.train` with `task: classify` from the shipped checkpoints/minimind-tang,
  on the training poems written as a labelled corpus (.cache/classify/train.jsonl: text + label),
  (a) mode lora, (b) mode sft (every weight), each for the same wall-clock budget
  (`time_budget_s`, BUDGET_S; the whole train() call, data preparation and saves included) and
  the trainer's defaults otherwise (learning rate by mode, batch, sequence length, precision; the
  trainer holds 5 % of the training poems out for its own evaluations, so it trains on 95 % of
  them). The final checkpoint is loaded as the library loads it (`checkpoint.load_model`: a LoRA
  run's adapter on its base, made a classifier of the classes saved beside it, merged) and
  predicts the held-out poems with `minimind.classifier.predict`.
- Baseline: scikit-learn TfidfVectorizer over character 1-3-grams (the poems are Chinese: a
  character is a word) + LogisticRegression, fitted on exactly the training poems (all of them).
  scikit-learn is a benchmark-only dependency (requirements-test.txt).

All three are scored by one evaluator (`score`): the confusion matrix of minimind's classify
objective and its accuracy / macro-F1 (the figures a classify run logs), checked against
scikit-learn's. Train s is the wall time of train() / fit (CPU s: process CPU time over the same
span, all threads); predict s covers every held-out poem. Target (issue 18): our fine-tune's
macro-F1 >= the baseline's; issue 46: by at least 3 points on both tasks.

Budget: 4 minutes per fine-tune, so the benchmark takes about 20 minutes at 2 threads (two runs a
task, their prediction passes, baselines of seconds); `--tasks "5 poets"` runs one task, `--quick`
gives each run 1 minute; `--tiny` (a smoke run) 2 poets, 150 poems each, 10 seconds.

  python -m minimind bench --only classify
  python -m benchmarks.classify --tiny
  python -m benchmarks.classify --adapters full --set optim.lr=5e-4      # a sweep (benchmarks/NOTES.md)
  python -m benchmarks.classify --adapters full --tasks "3 poets" --set classify.pooling=mean
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

NAME = "classify"
DESCRIPTION = "Tang author attribution (5 poets, 3 poets): fine-tuned MiniMind-Tang (LoRA, full) vs TF-IDF + logistic regression"
HEADLINE = [f"{task}: {figure}" for task in ("5 poets", "3 poets")
            for figure in ("macro-F1 ours full", "macro-F1 ours LoRA", "macro-F1 TF-IDF baseline",
                           "ours full - baseline macro-F1 (points)")]
ROOT = Path(__file__).resolve().parents[1]
START = ROOT / "checkpoints" / "minimind-tang"
CACHE = ROOT / ".cache" / "classify"
# The five named poets with the most poems in tang_poems.jsonl (56,448 poems), counted once:
# 白居易 2,951, 杜甫 1,459, 李白 1,187, 元稹 897, 劉禹錫 869 (next: 不詳 "unknown" 863, 齊己 811).
POETS = ("白居易", "杜甫", "李白", "元稹", "劉禹錫")
HELD_OUT = 0.2           # share of each poet's poems held out
SEED = 0                 # the split's shuffle
BUDGET_S = 240.0         # each fine-tune's time_budget_s (quick: QUICK_BUDGET_S, tiny: TINY_BUDGET_S)
QUICK_BUDGET_S = 60.0
TINY_BUDGET_S = 10.0
TINY_POETS, TINY_POEMS = 2, 150  # tiny: the first 2 poets, 150 poems of each
# The tasks: the suite's five poets, and three of the best known (an outside check of the issue that
# asked for 3 points over the baseline on both named no poets; these are our reading of it)
TASKS = {"5 poets": POETS, "3 poets": ("李白", "杜甫", "白居易")}


def poems(poets=POETS, per_poet: int | None = None) -> dict[str, list[str]]:
    """{poet: texts} of `poets` in file order, texts seen more than once among them dropped."""
    from scripts.corpora import TANG, tang_records

    if not TANG.is_file():
        raise FileNotFoundError(f"the classify benchmark needs the Tang corpus at {TANG} (../shared/corpora, "
                                f"beside the repository); it is not there")
    by_poet: dict[str, list[str]] = {p: [] for p in poets}
    seen: dict[str, int] = {}
    for record in tang_records(TANG):
        text = (record.get("text") or "").strip()
        if record.get("author") in by_poet and text:
            by_poet[record["author"]].append(text)
            seen[text] = seen.get(text, 0) + 1
    out = {p: [t for t in texts if seen[t] == 1] for p, texts in by_poet.items()}
    if per_poet:
        out = {p: texts[:per_poet] for p, texts in out.items()}
    return out


def split(by_poet: dict[str, list[str]], fraction: float = HELD_OUT, seed: int = SEED):
    """(train, held out): lists of (text, poet), stratified: `fraction` of each poet's poems held out."""
    rng = random.Random(seed)
    train, held = [], []
    for poet in sorted(by_poet):
        texts = list(by_poet[poet])
        rng.shuffle(texts)
        k = round(len(texts) * fraction)
        held += [(t, poet) for t in texts[:k]]
        train += [(t, poet) for t in texts[k:]]
    rng.shuffle(train)
    return train, held


def write_corpus(rows, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for text, label in rows:
            fh.write(json.dumps({"text": text, "label": label}, ensure_ascii=False) + "\n")
    return path


def score(true: list[str], predicted: list[str], classes: list[str]) -> dict:
    """The one evaluator: minimind's confusion matrix, accuracy and macro-F1, cross-checked
    against scikit-learn's on the same labels."""
    import torch
    from sklearn.metrics import accuracy_score, f1_score

    from minimind.training.objectives.classify import accuracy, confusion, macro_f1

    index = {c: i for i, c in enumerate(classes)}
    matrix = confusion(torch.tensor([index[t] for t in true]), torch.tensor([index[p] for p in predicted]),
                       len(classes))
    figures = {"accuracy": accuracy(matrix), "macro-F1": macro_f1(matrix), "matrix": matrix.tolist()}
    reference = f1_score(true, predicted, labels=classes, average="macro", zero_division=0)
    assert abs(figures["macro-F1"] - reference) < 1e-9, (figures["macro-F1"], reference)
    assert abs(figures["accuracy"] - accuracy_score(true, predicted)) < 1e-9
    return figures


class Timer:
    """Wall and process-CPU seconds of a block."""

    def __enter__(self):
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall0, time.process_time() - self.cpu0


def fine_tune(mode: str, corpus: Path, seconds: float, held, classes: list[str], overrides=()) -> dict:
    from benchmarks._harness import bench_device, last_step_weights
    from minimind.checkpoint import load_model, load_tokenizer_for
    from minimind.classifier import predict
    from minimind.training import TrainConfig, train

    run_dir = CACHE / "runs" / mode
    shutil.rmtree(run_dir, ignore_errors=True)
    raw = {"task": "classify", "mode": mode, "model": {"init_from": str(START)},
           "data": {"files": [str(corpus)], "cache_dir": str(CACHE / "data")},
           "time_budget_s": seconds, "run_dir": str(run_dir), "device": bench_device()}
    with Timer() as training:
        status = train(TrainConfig.from_dict(raw).with_overrides(list(overrides)))
    resolved = TrainConfig.load(run_dir / "config.yaml")
    final = status["final_checkpoint"]
    model, tokenizer = load_model(final, merge=True), load_tokenizer_for(final)
    with Timer() as predicting:
        probabilities = predict(model, tokenizer, [t for t, _ in held], max_tokens=resolved.data.seq_len)
    predicted = [max(p, key=p.get) for p in probabilities]
    figures = score([label for _, label in held], predicted, classes)
    last_step = None  # the run's last step, without the weight average its folder holds (optim.ema)
    unmerged = load_model(final)  # (an adapter's weights keep the names the run trained them under)
    if last_step_weights(unmerged, final):
        last = predict(unmerged, tokenizer, [t for t, _ in held], max_tokens=resolved.data.seq_len)
        last_step = score([label for _, label in held], [max(p, key=p.get) for p in last], classes)["macro-F1"]
    label = "ours LoRA" if mode == "lora" else "ours full"
    settings = (f"{mode}, {status.get('step')} steps x {resolved.batch_size} rows, lr {resolved.optim.lr:g}, "
                f"seq {resolved.data.seq_len}, {resolved.precision}"
                + (f", rank {resolved.lora.rank}" if mode == "lora" else "")
                + f"; run's own val macro-F1 {status.get('val_macro_f1', float('nan')):.3f}"
                + (f"; {' '.join(overrides)}" if overrides else ""))
    budget = f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
    return {"model": f"{label} ({budget})", "accuracy": figures["accuracy"],
            "macro-F1": figures["macro-F1"], "train s": training.wall, "train CPU s": training.cpu,
            "predict s": predicting.wall, "predict CPU s": predicting.cpu,
            "parameters trained": status.get("trainable_params"), "settings": settings,
            "macro-F1, last step's weights (no average)": last_step,
            "confusion": figures["matrix"]}


def baseline(train_rows, held, classes: list[str]) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    pipeline = make_pipeline(TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True),
                             LogisticRegression(max_iter=5000, C=10.0))
    with Timer() as training:
        pipeline.fit([t for t, _ in train_rows], [label for _, label in train_rows])
    with Timer() as predicting:
        predicted = list(pipeline.predict([t for t, _ in held]))
    figures = score([label for _, label in held], predicted, classes)
    vectorizer, logistic = pipeline.steps[0][1], pipeline.steps[1][1]
    return {"model": "TF-IDF + logistic regression", "accuracy": figures["accuracy"],
            "macro-F1": figures["macro-F1"], "train s": training.wall, "train CPU s": training.cpu,
            "predict s": predicting.wall, "predict CPU s": predicting.cpu,
            "parameters trained": int(logistic.coef_.size + logistic.intercept_.size),
            "settings": f"char 1-3-grams ({len(vectorizer.vocabulary_):,} features, sublinear tf), "
                        f"LogisticRegression C 10, lbfgs, max_iter 5000 ({int(logistic.n_iter_.max())} used)",
            "confusion": figures["matrix"]}


def run(quick: bool = False, tiny: bool = False, minutes: float | None = None, adapters=("lora", ""),
        overrides=(), tasks: str | None = None) -> dict:
    """`adapters`: "lora" and/or "" (full fine-tune), as for the other fine-tune benchmarks; `tasks`:
    names of TASKS, comma-separated (default all; --tiny: one tiny task of its own)."""
    import torch

    chosen = {"tiny": POETS[:TINY_POETS]} if tiny else {
        name: TASKS[name] for name in (tasks.split(",") if tasks else TASKS)}
    seconds = 60 * minutes if minutes else TINY_BUDGET_S if tiny else QUICK_BUDGET_S if quick else BUDGET_S
    rows, summary = [], {}
    for name, poets in chosen.items():
        task_rows, task_summary = run_task(name, poets, tiny, seconds, adapters, overrides)
        rows += task_rows
        summary.update(task_summary)
    summary.update({"budget s (each fine-tune)": seconds, "threads": torch.get_num_threads()})
    return {"rows": rows, "summary": summary}


def run_task(name: str, poets, tiny: bool, seconds: float, adapters, overrides) -> tuple[list[dict], dict]:
    """(the rows, the summary) of one task: who among `poets` wrote each held-out poem."""
    by_poet = poems(poets, TINY_POEMS if tiny else None)
    classes = sorted(by_poet)
    train_rows, held = split(by_poet)
    corpus = write_corpus(train_rows, CACHE / "train.jsonl")
    tuned = {a: fine_tune(a or "sft", corpus, seconds, held, classes, overrides) for a in adapters}
    base = baseline(train_rows, held, classes)
    rows = [*tuned.values(), base]
    summary = {f"{name}: macro-F1 TF-IDF baseline": base["macro-F1"]}
    for adapter, row in tuned.items():
        label = "LoRA" if adapter == "lora" else "full"
        summary[f"{name}: macro-F1 ours {label}"] = row["macro-F1"]
        summary[f"{name}: ours {label} - baseline macro-F1 (points)"] = round(100 * (row["macro-F1"] - base["macro-F1"]), 1)
        if row["macro-F1, last step's weights (no average)"] is not None:  # optim.ema: the same run without it
            summary[f"{name}: ours {label}, weight average - last step macro-F1 (points)"] = round(
                100 * (row["macro-F1"] - row["macro-F1, last step's weights (no average)"]), 1)
    counts = {p: len(t) for p, t in by_poet.items()}
    summary.update({f"{name}: accuracy {row['model']}": row["accuracy"] for row in rows})
    summary.update({
        f"{name}: majority-class accuracy": max(sum(label == c for _, label in held) for c in classes) / len(held),
        f"{name}: poets (poems kept)": ", ".join(f"{p} {counts[p]}" for p in poets),
        f"{name}: train / held-out poems": f"{len(train_rows)} / {len(held)}",
        f"{name}: confusion classes (rows true, columns predicted)": ", ".join(classes)})
    for row in rows:  # the matrices go to the summary (the table keeps one line a model)
        summary[f"{name}: confusion {row['model']}"] = json.dumps(row.pop("confusion"))
        row["model"] = f"{name}: {row['model']}"
    return rows, summary


def main() -> None:
    from benchmarks._harness import fine_tune_main

    fine_tune_main(run, __doc__, "budget of each fine-tune (default 4; 1 with --quick)", "lora,full",
                   {"tasks": {"help": f"which tasks, comma-separated (default all: {', '.join(TASKS)})"}})


if __name__ == "__main__":
    main()

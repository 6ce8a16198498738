"""Quality per compute: held-out bits per character after a fixed wall-clock budget of pretraining.

For each corpus, a model is pretrained from scratch through the real trainer
(`minimind.training.train` with `time_budget_s`) with our default settings for
this device: no preset, batch, sequence length, learning rate, precision or
compile setting is given, so the trainer picks them as `minimind train` would
(the model size from the budget and the speed it measures: training/sizing.py).
The only inputs are the training text and the tokenizer `minimind tokenizer train`
builds on that text with its defaults (6400 entries; its training time is outside
the budget and reported apart, with its byte-fallback share on the held-out text). The budget is the whole `train()` call: data
preparation, size probes, compilation, evaluations and the final save are in it.

- Tang: the poems held out by poem exactly as the trainer splits the file
  (`scripts.corpora.tang_split`: 2 %, seed 1234); the tokenizer sees the training
  poems only.
- Shakespeare: whole plays held out (`scripts.corpora.write_shakespeare_split`);
  the trainer and the tokenizer see the other plays only, read as `minimind train` reads a .txt
  file by default: in sections of running text (blank lines kept; `split: section`).

BPC is computed afterwards by `minimind.evaluate.evaluate_documents` on the
held-out documents (Tang: each poem; Shakespeare: each held-out play as running text, and
beside it, as before 2026-12-05, paragraph by paragraph, each paragraph's end an EOS), in
windows of the training sequence length, not the trainer's own validation estimate.

The reference runs in the same benchmark, one after the other with the same
threads and the same CPU allocator setting (training/allocator.py): a character-level
GPT with nanoGPT's CPU recipe (benchmarks/char_gpt.py),
trained for the same wall-clock budget on the same training texts and scored by the
same `evaluate_documents` on the same held-out documents (in windows of its block, 64).
Ours trains in a child process with an empty compile cache of its own for each leg, so every
leg pays the compilation a first run on a machine pays (24-46 s of a one-thread run:
benchmarks/NOTES.md; the reference does not compile); before, the first leg on a machine paid it and later legs with the
same shapes found the machine's cache warm. Each ours row gives what it paid (`compile + warm-up s`).
Target (the quality issue): at least 10 % lower held-out BPC than the reference, at budgets
of 10 and 60 minutes (`BUDGETS`; the whole suite then takes about 4.7 hours at 2 threads).
`QUALITY_BUDGETS=600 python -m minimind bench --only quality` runs the 10-minute leg alone.

Side by side (`QUALITY_SIDE_BY_SIDE=1`, or `--side-by-side`): ours and the reference train at
the same time, each in its own process pinned to its own half of the cores with as many
threads (one each on 2 cores). They share one wall-clock window of one machine, so a machine
that slows down or speeds up (here +-10 % between runs) does so for both, and the suite takes
half as long (about 2.3 hours on 2 cores, past `bench`'s 2-hour default timeout:
`QUALITY_SIDE_BY_SIDE=1 python -m minimind bench --only quality --timeout 10800`). Each row
says its threads.

  python -m benchmarks.quality --budget 300 --corpus tang --set model.preset=mini --set batch_size=32
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

NAME = "quality"
DESCRIPTION = "held-out bits per character after a fixed wall-clock budget of pretraining (Tang, Shakespeare)"
HEADLINE = ["tang BPC ours / reference (10 min)", "shakespeare BPC ours / reference (10 min)",
            "tang BPC ours / reference (60 min)", "shakespeare BPC ours / reference (60 min)"]
BUDGETS = (600.0, 3600.0)
ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("QUALITY_CACHE") or ROOT / ".cache" / "quality")  # (tests: a temporary folder)
TARGET = 0.9   # ours / reference held-out BPC


def corpus_files(name: str, held_out_chars: int | None = None) -> tuple[Path, dict, list[str], list[str]]:
    """(training file, data settings, training texts for the tokenizer, held-out documents: their
    first `held_out_chars` characters in all where given, see `first_characters`)."""
    from minimind.data import DataConfig, iter_texts
    from scripts.corpora import TANG, shakespeare_split, tang_split, write_shakespeare_split

    if name == "tang":
        train, held = tang_split(cache_dir=str(CACHE / "data"))
        # the trainer gets the whole file: its own 2 % split (seed 1234) is exactly `held`
        return TANG, {"text_field": "text", "val_fraction": 0.02, "seed": 1234}, train, first_characters(
            held, held_out_chars)
    train_file, held_file = write_shakespeare_split(CACHE / "shakespeare")
    held = [body for _, body in shakespeare_split()[1]]  # each play whole: running text
    train = list(iter_texts([str(train_file)], config=DataConfig()))  # the sections the trainer reads
    return train_file, {}, train, first_characters(held, held_out_chars)


def first_characters(documents: list[str], limit: int | None) -> list[str]:
    """The documents in order, the last one cut, up to `limit` characters in all (None: all of them).
    A smoke run scores a few pages instead of every held-out play, the slowest part of a short run
    (scoring 340,000 characters took 10 s a protocol on one core); a headline scores them all."""
    if not limit:
        return documents
    kept, left = [], limit
    for doc in documents:
        if left <= 0:
            break
        kept.append(doc[:left])
        left -= len(kept[-1])
    return kept


def paragraphs_of(held: list[str]) -> list[str]:
    """The held-out documents paragraph by paragraph (the Shakespeare protocol until 2026-12-05)."""
    return [p.strip("\n") for doc in held for p in doc.split("\n\n") if p.strip()]


def tokenizer_for(name: str, texts: list[str], vocab_size: int = 6400) -> tuple[Path, float]:
    """The default tokenizer (or one of `vocab_size` entries) trained on the training texts, cached;
    (folder, seconds it took)."""
    from minimind.tokenizer import MIN_CHAR_COUNT, build_tokenizer, save_tokenizer

    digest = hashlib.sha1("\x00".join(texts).encode("utf-8")).hexdigest()[:8]  # the texts changed: a new one
    folder = CACHE / "tokenizers" / f"{name}-{vocab_size}-chars{MIN_CHAR_COUNT}-{digest}"
    if (folder / "tokenizer.json").is_file():
        meta = json.loads((folder / "seconds.json").read_text())
        return folder, meta["seconds"]
    start = time.perf_counter()
    tokenizer = build_tokenizer(texts, vocab_size=vocab_size)
    seconds = time.perf_counter() - start
    save_tokenizer(tokenizer, folder)
    (folder / "seconds.json").write_text(json.dumps({"seconds": seconds}))
    return folder, seconds


def vocab_size_of(overrides: list[str]) -> int:
    """The tokenizer size the overrides ask for: `--set model.vocab_size=N` (a sweep) gets a
    tokenizer of N entries, trained outside the budget as always."""
    from minimind.training import TrainConfig

    return TrainConfig.from_dict({"data": {"files": ["x"]}}).with_overrides(overrides).model.vocab_size


def train_and_score(name: str, budget: float, overrides: list[str], tag: str = "default",
                    held_out_chars: int | None = None) -> dict:
    """Pretrain on `name` for `budget` seconds with the trainer's defaults (+ `overrides`), then score."""
    import torch

    from benchmarks._harness import bench_device, last_step_weights
    from minimind.checkpoint import load_model
    from minimind.evaluate import evaluate_documents
    from minimind.tokenizer import load_tokenizer, measure
    from minimind.training import TrainConfig, train
    from minimind.training.precision import pick_device

    train_file, data, train_texts, held = corpus_files(name, held_out_chars)
    tok_dir, tok_seconds = tokenizer_for(name, train_texts, vocab_size_of(overrides))
    run_dir = CACHE / "runs" / f"{name}-{tag}"
    shutil.rmtree(run_dir, ignore_errors=True)
    config = TrainConfig.from_dict({
        "mode": "pretrain", "model": {"tokenizer": str(tok_dir)},
        "data": {"files": [str(train_file)], "cache_dir": str(CACHE / "data"), **data},
        "time_budget_s": budget, "run_dir": str(run_dir), "device": bench_device()}).with_overrides(overrides)
    device = pick_device(config.device)
    start = time.perf_counter()
    status = train(config)
    train_seconds = time.perf_counter() - start
    resolved = TrainConfig.load(run_dir / "config.yaml")  # as the trainer filled and chose it
    model = load_model(status["final_checkpoint"], device=device)
    tokenizer = load_tokenizer(tok_dir)
    start = time.perf_counter()
    result = evaluate_documents(model, tokenizer, held, context=resolved.data.seq_len)
    per_paragraph = evaluate_documents(model, tokenizer, paragraphs_of(held), context=resolved.data.seq_len)
    eval_seconds = time.perf_counter() - start
    # the same run's last step, without the weight average the model folder holds (optim.ema)
    last_step = (evaluate_documents(model, tokenizer, held, context=resolved.data.seq_len).bpc
                 if last_step_weights(model, status["final_checkpoint"]) else None)
    characters, _, fallback = measure(tokenizer, held)
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    speeds = [m["tokens_per_s"] for m in metrics if "tokens_per_s" in m]
    return {
        "corpus": name, "BPC": result.bpc, "BPC per paragraph": per_paragraph.bpc,
        "BPC, last step's weights (no average)": last_step,
        "held-out characters": result.characters,
        "parameters": sum(p.numel() for p in model.parameters()), "vocabulary": len(tokenizer),
        "byte-fallback share (held-out)": fallback / max(characters, 1),
        "settings": (f"{resolved.model.preset}, batch {resolved.batch_size} x {resolved.data.seq_len}, "
                     f"lr {resolved.optim.lr:g}, {resolved.precision}, compile {resolved.compile}"
                     + (f"; {' '.join(overrides)}" if overrides else "")),
        "steps": status.get("step"), "tokens seen": status.get("tokens"),
        "train tok/s (median)": sorted(speeds)[len(speeds) // 2] if speeds else 0.0,
        "trainer val BPC": status.get("val_bpc"), "train() wall s": train_seconds,
        "compile + warm-up s": startup_seconds(metrics),
        "eval s": eval_seconds, "tokenizer s (outside budget)": tok_seconds,
        "threads": torch.get_num_threads(), "device": device,
    }


def startup_seconds(metrics: list[dict]) -> float:
    """Seconds the training loop spent before its first logged step beyond those steps' share at the
    run's median step time: compilation (about 45 s on one core with a cold inductor cache, under
    10 s with a warm one: benchmarks/NOTES.md) and first-step warm-up. 0 when too few steps logged."""
    logged = [m for m in metrics if "elapsed_s" in m and "step" in m]
    per_step = [(b["elapsed_s"] - a["elapsed_s"]) / (b["step"] - a["step"])
                for a, b in zip(logged, logged[1:]) if b["step"] > a["step"]]
    if not per_step:
        return 0.0
    first = logged[0]
    return max(0.0, first["elapsed_s"] - first["step"] * statistics.median(per_step))


def reference_and_score(name: str, budget: float, held_out_chars: int | None = None) -> dict:
    """The char-level nanoGPT-recipe GPT, trained for `budget` seconds on the same training texts
    and scored like ours."""
    import torch

    from benchmarks.char_gpt import BLOCK, train_char_gpt
    from minimind.evaluate import evaluate_documents
    from minimind.training.allocator import retain_freed_memory

    _, _, train_texts, held = corpus_files(name, held_out_chars)
    retain_freed_memory()  # like-for-like: the process setting our trainer makes (a process keeps it anyway)
    start = time.perf_counter()
    model, tokenizer, info = train_char_gpt(train_texts, budget)
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    result = evaluate_documents(model, tokenizer, held, context=BLOCK)
    per_paragraph = evaluate_documents(model, tokenizer, paragraphs_of(held), context=BLOCK)
    return {"BPC": result.bpc, "BPC per paragraph": per_paragraph.bpc, "held-out characters": result.characters,
            "settings": f"char-level, 4 x 128, block 64, batch 12, lr 1e-3, {info['vocabulary']} characters",
            "steps": info["steps"], "tokens seen": info["tokens seen"], "train() wall s": train_seconds,
            "eval s": time.perf_counter() - start, "threads": torch.get_num_threads(), "device": "cpu"}


def side_by_side(name: str, budget: float, overrides: list[str], tag: str,
                 held_out_chars: int | None = None) -> tuple[dict, dict]:
    """(ours, reference) trained at once: each a child process (`--part`) pinned to its own half
    of this process's cores with that many threads. The corpus split and the tokenizer are made
    first (outside the budget, as always) so that both start training together."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        raise RuntimeError("side by side needs at least 2 cores (this process may use "
                           f"{len(cores)}): run ours and the reference one after the other instead")
    _, _, train_texts, _ = corpus_files(name)
    tokenizer_for(name, train_texts, vocab_size_of(overrides))
    half = len(cores) // 2
    children = [(part, *start_part(part, name, budget, overrides, tag, part_cores, held_out_chars))
                for part, part_cores in (("ours", cores[:half]), ("reference", cores[half:2 * half]))]
    ours, ref = finished_parts(children, f"{name} side by side")
    return ours, ref


def start_part(part: str, name: str, budget: float, overrides: list[str], tag: str,
               cores: list[int] | None = None, held_out_chars: int | None = None) -> tuple[Path, subprocess.Popen]:
    """(its result file, the process): `part` of a leg in a child process, pinned to `cores` with a
    thread each, or with this process's threads. Ours compiles into a compile cache of its own,
    emptied first (`compile_cache`), so that every leg pays what a first run on a machine pays."""
    import torch

    out = CACHE / "parts" / f"{name}-{tag}-{part}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    command = [sys.executable, "-m", "benchmarks.quality", "--part", part, "--budget", str(budget),
               "--corpus", name, "--tag", tag, "--json", str(out)]
    command += ["--cores", ",".join(map(str, cores))] if cores else ["--threads", str(torch.get_num_threads())]
    command += ["--held-out-chars", str(held_out_chars)] if held_out_chars else []
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(compile_cache(name, tag))} if part == "ours" else None
    return out, subprocess.Popen(command + [a for o in overrides for a in ("--set", o)], cwd=ROOT, env=env)


def compile_cache(name: str, tag: str) -> Path:
    """An empty inductor cache folder for ours on `name` (with the machine's shared cache, a leg's
    figure depended on which legs had run before it on that machine)."""
    folder = CACHE / "compile-cache" / f"{name}-{tag}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def finished_parts(children: list[tuple[str, Path, subprocess.Popen]], what: str) -> list[dict]:
    """The results of (part, result file, process) children once all have exited; an error naming
    those that failed (their own output, above, says why)."""
    codes = {part: child.wait() for part, _, child in children}
    failed = [f"{part} (exit {code})" for part, code in codes.items() if code != 0]
    if failed:
        raise RuntimeError(f"{what}: {', '.join(failed)} failed; its output is above")
    return [json.loads(out.read_text(encoding="utf-8")) for _, out, _ in children]


def ours_alone(name: str, budget: float, overrides: list[str], tag: str, held_out_chars: int | None = None) -> dict:
    """Ours on `name`, in a child process (`start_part`) while this one waits."""
    (ours,) = finished_parts([("ours", *start_part("ours", name, budget, overrides, tag, None, held_out_chars))],
                             name)
    return ours


def budgets_to_run(quick: bool, budget: float | None) -> tuple[float, ...]:
    """--budget, else $QUALITY_BUDGETS (comma-separated seconds), else 2 minutes (quick) or BUDGETS."""
    if budget:
        return (budget,)
    if os.environ.get("QUALITY_BUDGETS"):
        return tuple(float(b) for b in os.environ["QUALITY_BUDGETS"].split(","))
    return (120.0,) if quick else BUDGETS


def run(quick: bool = False, budget: float | None = None, corpora: tuple = ("tang", "shakespeare"),
        overrides: list[str] | None = None, tag: str = "default", reference: bool = True,
        together: bool | None = None, held_out_chars: int | None = None) -> dict:
    """`together` (default: $QUALITY_SIDE_BY_SIDE): ours and the reference side by side.
    `held_out_chars`: score the first that many held-out characters only (smoke runs)."""
    together = reference and (os.environ.get("QUALITY_SIDE_BY_SIDE", "") not in ("", "0")
                              if together is None else together)
    rows, summary = [], {}
    for seconds in budgets_to_run(quick, budget):
        label = f"{seconds / 60:g} min"
        for name in corpora:
            if together:
                ours, ref = side_by_side(name, seconds, list(overrides or []), tag, held_out_chars)
            else:
                ours = ours_alone(name, seconds, list(overrides or []), tag, held_out_chars)
            rows.append({"budget": label, "corpus": name, "model": "ours (trainer defaults)",
                         **{k: v for k, v in ours.items() if k != "corpus"}})
            summary[f"{name} BPC ours ({label})"] = ours["BPC"]
            if ours["BPC, last step's weights (no average)"] is not None:  # optim.ema: the same run without it
                summary[f"{name} BPC ours, weight average / last step ({label})"] = (
                    ours["BPC"] / ours["BPC, last step's weights (no average)"])
            summary[f"{name} budget overrun % ({label})"] = 100 * (ours["train() wall s"] / seconds - 1)
            summary[f"{name} settings ({label})"] = ours["settings"]
            if not reference:
                continue
            if not together:
                ref = reference_and_score(name, seconds, held_out_chars)
            rows.append({"budget": label, "corpus": name, "model": "reference: char-level GPT, nanoGPT CPU recipe",
                         **ref})
            ratio = ours["BPC"] / ref["BPC"]
            summary[f"{name} BPC ours / reference ({label})"] = ratio
            summary[f"{name} BPC reference ({label})"] = ref["BPC"]
            summary[f"{name} at least 10 % lower ({label})"] = ratio <= TARGET
            if name == "shakespeare":  # the old protocol beside it: each held-out paragraph, ended by EOS
                summary[f"{name} BPC per paragraph ours / reference ({label})"] = (
                    ours["BPC per paragraph"] / ref["BPC per paragraph"])
    result = {"rows": rows, "summary": summary}
    if together:  # the section's thread count is each side's, not this process's
        threads = rows[0]["threads"]
        result["threads"] = f"{threads} each, ours and the reference side by side on their own cores"
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a 2-minute budget instead of 10")
    parser.add_argument("--budget", type=float, default=None, help="seconds of training per corpus")
    parser.add_argument("--corpus", choices=["tang", "shakespeare", "both"], default="both")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="TrainConfig override, as for `minimind train --set` (for sweeps)")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--tag", default="default", help="run folder suffix under .cache/quality/runs")
    parser.add_argument("--no-reference", action="store_true",
                        help="train and score ours only (size and setting sweeps: benchmarks/NOTES.md)")
    parser.add_argument("--side-by-side", action="store_true",
                        help="ours and the reference at once, each on its own half of the cores")
    parser.add_argument("--part", choices=["ours", "reference"], help=argparse.SUPPRESS)  # a side-by-side child
    parser.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cores", help=argparse.SUPPRESS)
    parser.add_argument("--held-out-chars", type=int, default=None,
                        help="score the first N held-out characters only (smoke runs; a headline scores them all)")
    args = parser.parse_args()

    import torch

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    if args.cores:  # pinned to them, with one thread per core
        cores = {int(c) for c in args.cores.split(",")}
        os.sched_setaffinity(0, cores)
        torch.set_num_threads(len(cores))
    elif args.threads:
        torch.set_num_threads(args.threads)
    if args.part:
        name = "tang" if args.corpus == "both" else args.corpus
        result = (train_and_score(name, args.budget, args.overrides, args.tag, args.held_out_chars)
                  if args.part == "ours" else reference_and_score(name, args.budget, args.held_out_chars))
        args.json.write_text(json.dumps(result, default=str, ensure_ascii=False), encoding="utf-8")
        return
    from benchmarks._harness import table

    corpora = ("tang", "shakespeare") if args.corpus == "both" else (args.corpus,)
    result = run(args.quick, args.budget, corpora, args.overrides, args.tag, reference=not args.no_reference,
                 together=args.side_by_side or None, held_out_chars=args.held_out_chars)
    print(table(result["rows"]))
    print(json.dumps(result["summary"], indent=1, ensure_ascii=False, default=str))


if __name__ == "__main__":
    main()

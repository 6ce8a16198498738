"""Turn a training run into a shipped checkpoint: bf16 weights, tokenizer, a held-out sample,
measured quality and samples, and a Hugging Face model card (README.md).

  python -m scripts.finalize tang --model work/tang/sft/checkpoints/step-N --pretrain-run work/tang/pretrain \\
      --sft-run work/tang/sft --out checkpoints/minimind-tang
  python -m scripts.finalize shakespeare --model ... --pretrain-run work/shakespeare/pretrain \\
      --out checkpoints/minimind-shakespeare
  python -m scripts.finalize tang --model work/tang/grpo/checkpoints/step-N --grpo-run work/tang/grpo \\
      --before checkpoints/minimind-tang --out checkpoints/minimind-tang

A stage whose run folder is not given keeps its section of the card already in --out (so
a GRPO stage can be added to a shipped model without its pretraining runs at hand).

  python -m scripts.finalize tang --out checkpoints/minimind-tang --header-only

rewrites only the card's front matter (huggingface_hub's ModelCardData) from its own figures.

The card's YAML header holds the held-out figures (model-index) that
tests/models/test_shipped_models.py checks against a fresh measurement.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import torch
import yaml
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from minimind.checkpoint import load_model, load_tokenizer_for
from minimind.data import iter_texts
from minimind.evaluate import evaluate_documents
from minimind.generation import chat, complete
from minimind.sampling_params import SamplingParams
from minimind.training import RunDir
from scripts.corpora import TANG, shakespeare_split, tang_records, tang_split
from minimind.training.rewards.poems import form_of, rhymes

# the corpus's Hub license id and its license file (copied beside the weights); LICENSE.shakespeare's
# texts are CC-BY 2.5 (its code, which the model never saw, MIT)
CORPUS_LICENSE = {"tang": ("mit", "LICENSE.chinese-poetry"), "shakespeare": ("cc-by-2.5", "LICENSE.shakespeare")}
SAMPLE_PARAMS = dict(temperature=0.8, top_p=0.9, top_k=40, repetition_penalty=1.1, max_new_tokens=96)
SHAKESPEARE_TOKENS = 160  # a continuation long enough to show the next speech
EVAL_CONTEXT = 256
TANG_PROMPTS = ["以《春夜》为题写一首五言绝句", "写一首李白风格的诗", "续写：床前明月光",
                "以《秋思》为题写一首七言绝句", "模仿杜甫写一首五言律诗"]
SHAKESPEARE_PROMPTS = ["ROMEO:", "JULIET.\n", "HAMLET.\nTo be, or not to be", "KING.\n",
                       "MIRANDA.\nIf by your art, my dearest father, you have\n"]


def save_bf16(model_dir: Path, out: Path) -> None:
    """bf16 weights (half the size; the card's figures are measured on these), tokenizer, generation config."""
    model = load_model(model_dir)
    tokenizer = load_tokenizer_for(model_dir)
    if out.exists():
        shutil.rmtree(out)
    model.to(torch.bfloat16).save_pretrained(out)
    tokenizer.save_pretrained(out, save_jinja_files=False)
    gen = model_dir / "generation_config.json"
    if gen.is_file():
        shutil.copyfile(gen, out / "generation_config.json")


def keep_recipe(out: Path, command: str, **runs: Path | None) -> None:
    """training/: each run's config.yaml (as the trainer filled and chose it) and the command that
    rebuilds the model, so the checkpoint says how it was made."""
    folder = out / "training"
    folder.mkdir(parents=True, exist_ok=True)
    for name, run in runs.items():
        if run is not None:
            shutil.copyfile(RunDir(run).config_file, folder / f"{name}.yaml")
    if command:
        (folder / "command.txt").write_text(command + "\n", encoding="utf-8")


def heldout_sample(kind: str, out: Path) -> tuple[Path, list[str], list[str]]:
    """A small fixed held-out slice shipped with the model (for the fast test) and the full held-out set."""
    if kind == "tang":
        _, held = tang_split()
        by_text = {r["text"]: r for r in tang_records(TANG)}
        sample = held[:100]
        path = out / "heldout_sample.jsonl"
        path.write_text("".join(json.dumps({"title": by_text.get(t, {}).get("title", ""),
                                            "author": by_text.get(t, {}).get("author", ""), "text": t},
                                           ensure_ascii=False) + "\n" for t in sample), encoding="utf-8")
        shutil.copyfile(TANG.parent / CORPUS_LICENSE["tang"][1], out / CORPUS_LICENSE["tang"][1])
        return path, sample, held
    held = [body for _, body in shakespeare_split()[1]]  # each held-out play whole: running text
    paragraphs, chars = [], 0
    for paragraph in held[0].split("\n\n"):  # the first held-out play's opening, to a paragraph end
        if chars > 20_000:
            break
        paragraphs.append(paragraph)
        chars += len(paragraph) + 2
    path = out / "heldout_sample.txt"
    path.write_text("\n\n".join(paragraphs).strip("\n") + "\n", encoding="utf-8")
    sample = sample_documents(path)
    shutil.copyfile(TANG.parent / CORPUS_LICENSE["shakespeare"][1], out / CORPUS_LICENSE["shakespeare"][1])
    return path, sample, held


def sample_documents(path: Path) -> list[str]:
    """The shipped held-out slice read back exactly as the test reads it: a poem a document, or
    the play's opening as one document of running text (as the model is trained and scored)."""
    if path.suffix == ".txt":
        return [path.read_text(encoding="utf-8").strip("\n")]
    return list(iter_texts([str(path)], text_field="text"))


# how the card names a run's optimizer (config.yaml's resolved optim.name)
OPTIMIZER_WORDS = {"muon": "Muon on the decoder's matrices + AdamW on the rest", "adamw": "AdamW"}


def run_summary(run_dir: Path | None) -> dict:
    if not run_dir:
        return {}
    run = RunDir(run_dir)
    status, metrics = run.read_status(), run.read_metrics()
    train = [m for m in metrics if "loss" in m]
    evals = [m for m in metrics if "val_loss" in m]
    config = yaml.safe_load(run.config_file.read_text())
    return {"preset": config["model"]["preset"], "steps": status.get("step"), "tokens": status.get("tokens"), "wall_s": status.get("elapsed_s"),
            "device": status.get("device"), "batch": config["batch_size"], "seq_len": config["data"]["seq_len"],
            "lr": config["optim"]["lr"], "optimizer": OPTIMIZER_WORDS[config["optim"].get("name", "adamw")],
            "first_loss": train[0]["loss"] if train else None,
            "last_loss": train[-1]["loss"] if train else None, "tokens_per_s": status.get("tokens_per_s"),
            "evals": [(e["step"], round(e["val_loss"], 4), round(e.get("val_bpc") or 0, 4)) for e in evals]}


def context_windows(model, tokenizer, documents: list[str], trained: int,
                    at_trained: float | None = None) -> list[tuple[int, float]]:
    """(window, held-out BPC) at the training row length and at 2x and 4x it: what the card's
    "context" claim rests on (tests/studio/test_context.py re-checks the declared one). `at_trained`:
    the BPC at the training length when the caller has it already."""
    def bpc(window: int) -> float:
        if window == trained and at_trained is not None:
            return at_trained
        return evaluate_documents(model, tokenizer, documents, context=window).bpc

    return [(window, bpc(window)) for window in (trained, 2 * trained, 4 * trained)]


def context_lines(config, windows: list[tuple[int, float]], sample_name: str) -> list[str]:
    trained, base = windows[0]
    longer = ", ".join(f"{w} tokens {b:.3f} ({100 * (b / base - 1):+.0f} %)" for w, b in windows[1:])
    return [f"**Context: {config.max_position_embeddings} tokens**, the length of its pretraining rows "
            f"(`max_position_embeddings` in config.json). Held-out BPC of `{sample_name}` scored in windows of "
            f"{trained} tokens: {base:.3f}; in longer windows, which it never saw in training: {longer}. "
            "A chat that outgrows the context drops its oldest turns; a longer prompt is refused.", ""]


def form_requests(sample: Path, n: int = 30) -> list[tuple[str, str]]:
    """(request, form) for the first `n` regulated poems with a title in the shipped held-out
    sample, so the check needs nothing beyond the checkpoint folder (tests re-run it)."""
    requests = []
    for line in sample.open(encoding="utf-8"):
        record = json.loads(line)
        form, title = form_of(record["text"]), record.get("title", "").split(" ")[0]
        if form and title:
            requests.append((f"以《{title}》为题写一首{form}", form))
        if len(requests) == n:
            break
    return requests


def form_accuracy(model, tokenizer, sample: Path, n: int = 30) -> tuple[int, int, int]:
    """(answers in the requested form, of those the ones that also rhyme, requests): one seeded
    answer to each held-out title request, sampled as the card's samples are."""
    right = rhymed = 0
    requests = form_requests(sample, n)
    for i, (request, form) in enumerate(requests):
        params = SamplingParams(**{**SAMPLE_PARAMS, "max_new_tokens": 128}, seed=i)
        answer = chat(model, tokenizer, [{"role": "user", "content": request}], params).read().strip()
        ok = form_of(answer) == form
        right += ok
        rhymed += ok and rhymes(answer)
    return right, rhymed, len(requests)


def grpo_summary(run_dir: Path | None) -> dict:
    """What the card says about a GRPO stage: its settings, time, and reward curve."""
    if not run_dir:
        return {}
    run = RunDir(run_dir)
    status, metrics = run.read_status(), run.read_metrics()
    config = yaml.safe_load(run.config_file.read_text())
    train = [m for m in metrics if "reward" in m]
    head, tail = train[:5], train[-5:]

    def mean(rows, key):
        return sum(r.get(key, 0.0) for r in rows) / max(len(rows), 1)

    g = config["grpo"]
    names = [r["name"] for r in g["rewards"]]  # each reward's own mean, as the run logged it
    return {"steps": status.get("step"), "wall_s": status.get("elapsed_s"), "device": status.get("device"),
            "lr": config["optim"]["lr"], "prompts": config["batch_size"] * config["grad_accum"],
            "group": g["group_size"], "beta": g["beta"], "updates": g["updates"],
            "rewards": ", ".join(f"{r['name']} × {r.get('weight', 1.0):g}" for r in g["rewards"]),
            "names": names,
            "first": (mean(head, "reward"), *(mean(head, f"reward_{n}") for n in names)),
            "last": (mean(tail, "reward"), *(mean(tail, f"reward_{n}") for n in names)),
            "evals": [(e["step"], e["val_reward"], *(e.get(f"val_reward_{n}", 0.0) for n in names))
                      for e in metrics if "val_reward" in e]}


def preset_of(config) -> str:
    """The preset whose sizes the model has (when its pretraining run is not at hand); the context is
    the training rows' length, not the preset's."""
    from minimind.config import PRESETS

    for name, sizes in PRESETS.items():
        if all(getattr(config, key, None) == value for key, value in sizes.items()
               if key != "max_position_embeddings"):
            return name
    return "custom"


def previous_stages(card: Path) -> str:
    """The pretraining and chat fine-tune paragraphs of an existing card (kept when their runs are
    not given), without any GRPO paragraph a previous finalize wrote."""
    if not card.is_file():
        return ""
    text = card.read_text(encoding="utf-8")
    if "## Training" not in text:
        return ""
    section = text.split("## Training", 1)[1].split("\n## ", 1)[0]
    return section.split("**reinforcement (GRPO)**", 1)[0].strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["tang", "shakespeare"])
    parser.add_argument("--model", type=Path, help="the checkpoint to ship (not with --header-only)")
    parser.add_argument("--pretrain-run", type=Path)
    parser.add_argument("--sft-run", type=Path)
    parser.add_argument("--grpo-run", type=Path)
    parser.add_argument("--before", type=Path, help="the model before the last stage: the card compares it")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--command", default="", help="the command that rebuilds the model (kept with it)")
    parser.add_argument("--header-only", action="store_true",
                        help="only rewrite --out's card front matter from its own figures (nothing re-measured)")
    args = parser.parse_args()
    if args.header_only:
        refresh_header(args.out, args.kind)
        return
    if args.model is None:
        parser.error("--model is required (unless --header-only)")

    start = time.perf_counter()
    kept = previous_stages(args.out / "README.md") if not (args.pretrain_run or args.sft_run) else ""
    # loaded now: save_bf16 replaces --out, which --before may name (the model being improved)
    earlier = (load_model(args.before).eval(), load_tokenizer_for(args.before)) if args.before else None
    before = None
    save_bf16(args.model, args.out)
    keep_recipe(args.out, args.command, pretrain=args.pretrain_run, sft=args.sft_run, grpo=args.grpo_run)
    sample_path, _, held = heldout_sample(args.kind, args.out)
    model, tokenizer = load_model(args.out), load_tokenizer_for(args.out)
    full = evaluate_documents(model, tokenizer, held, context=EVAL_CONTEXT)
    fast = evaluate_documents(model, tokenizer, sample_documents(sample_path), context=EVAL_CONTEXT)
    windows = context_windows(model, tokenizer, sample_documents(sample_path), EVAL_CONTEXT, at_trained=fast.bpc)
    pre = run_summary(args.pretrain_run)
    sft = run_summary(args.sft_run)
    if args.kind == "tang":
        samples = [(p, chat(model, tokenizer, [{"role": "user", "content": p}],
                            SamplingParams(**SAMPLE_PARAMS, seed=i)).read().strip())
                   for i, p in enumerate(TANG_PROMPTS)]
        right, rhymed, total = form_accuracy(model, tokenizer, sample_path)
        if earlier is not None:
            b_right, b_rhymed, _ = form_accuracy(*earlier, sample_path)
            before = {"right": b_right, "rhymed": b_rhymed,
                      "bpc": evaluate_documents(*earlier, held, context=EVAL_CONTEXT).bpc}
    else:
        samples = [(p, complete(model, tokenizer, p, SamplingParams(**{**SAMPLE_PARAMS, "max_new_tokens": SHAKESPEARE_TOKENS},
                                                                     seed=i)).read())
                   for i, p in enumerate(SHAKESPEARE_PROMPTS)]
        right = rhymed = total = None
    size_mb = (args.out / "model.safetensors").stat().st_size / 2**20
    params = sum(p.numel() for p in model.parameters())
    card = render_card(args.kind, args, model.config, params, size_mb, len(tokenizer), full, fast, sample_path.name,
                       pre, sft, samples, (right, rhymed, total), windows, grpo_summary(args.grpo_run), kept, before)
    (args.out / "README.md").write_text(card, encoding="utf-8")
    print(json.dumps({"out": str(args.out), "size_mb": round(size_mb, 2), "heldout_bpc": full.bpc,
                      "sample_bpc": fast.bpc, "form_accuracy": [right, rhymed, total],
                      "seconds": round(time.perf_counter() - start)}, ensure_ascii=False))


def render_card(kind, args, config, params, size_mb, vocab, full, fast, sample_name, pre, sft, samples,
                form_check, windows, grpo=None, kept="", before=None) -> str:
    right, rhymed, total = form_check
    tang = kind == "tang"
    name = "MiniMind-Tang" if tang else "MiniMind-Shakespeare"
    results = eval_results(tang, full, fast, sample_name)
    lines = [f"# {name}", ""]
    if tang:
        lines += [f"A {params / 1e6:.1f}M-parameter Llama-shaped model that writes classical Chinese poems, pretrained on the "
                  "Complete Tang Poems and then fine-tuned to answer requests such as 以《春夜》为题写一首五言绝句, "
                  "写一首李白风格的诗 or 续写：床前明月光. It is the model MiniMind Studio chats with at first launch.", ""]
    else:
        lines += [f"A {params / 1e6:.1f}M-parameter Llama-shaped model pretrained on 36 of Shakespeare's plays and poems "
                  "(four held out). Give it a speaker's name and it continues in verse.", ""]
    lines += ["## Use", "", "```python", "import minimind  # registers the model type",
              "from transformers import AutoModelForCausalLM, AutoTokenizer",
              f"model = AutoModelForCausalLM.from_pretrained('checkpoints/{args.out.name}')",
              f"tokenizer = AutoTokenizer.from_pretrained('checkpoints/{args.out.name}')", "```", "",
              f"or `python -m minimind chat --model checkpoints/{args.out.name}`"
              + ("" if tang else " (better: `minimind.generation.complete` for plain continuation)") + ".", "",
              "## Model", "",
              "| preset | parameters | layers | width | heads (q/kv) | FFN | context | vocabulary | weights |",
              "|---|---|---|---|---|---|---|---|---|",
              f"| `{pre.get('preset') or preset_of(config)}` | {params / 1e6:.1f}M | {config.num_hidden_layers} | {config.hidden_size} | "
              f"{config.num_attention_heads}/{config.num_key_value_heads} | {config.intermediate_size} | "
              f"{config.max_position_embeddings} | {vocab:,} (byte-level BPE trained on the corpus) | "
              f"bf16, {size_mb:.1f} MB |", "",
              "## Data and license", ""]
    if tang:
        lines += ["`tang_poems.jsonl`: 56,448 poems of the Complete Tang Poems (traditional characters) from the "
                  "`chinese-poetry` dataset, MIT license (LICENSE.chinese-poetry here). 2% of the poems (seeded, "
                  "by poem) are held out of both pretraining and the chat set. The chat set "
                  "(`scripts/make_tang_chat.py`) turns each training poem into two requests: a title and the form "
                  "measured from the poem, an author's style, or its first verse to continue.", ""]
    else:
        lines += ["`shakespeare.txt`: 40 plays and poems from Project Gutenberg (public-domain text; packaging "
                  "CC-BY 2.5, Open Knowledge Foundation, see LICENSE.shakespeare). Held out entirely: "
                  "Cymbeline, Julius Caesar, The Passionate Pilgrim, Titus Andronicus. The training plays are read "
                  "as running text (`split: section`: speeches with the blank lines between them, in sections "
                  "of up to 16,000 characters cut at scene breaks), so the model writes the next speech too.", ""]
    lines += ["## Training", ""]
    if kept:
        lines += [kept, ""]
    for label, run in (("pretraining", pre), ("chat fine-tune", sft)):
        if not run:
            continue
        lines += [f"**{label}**: {run['steps']:,} steps of {run['batch']} × {run['seq_len']} tokens, "
                  f"{run['tokens']:,} tokens seen, {run['optimizer']}, peak lr {run['lr']}, {run['wall_s'] / 60:.0f} min on "
                  f"{run['device']}; train loss {run['first_loss']:.3f} → {run['last_loss']:.3f}.", ""]
        if run["evals"]:
            lines += ["| step | validation loss | validation BPC |", "|---|---|---|"]
            lines += [f"| {s} | {l:.4f} | {b:.4f} |" for s, l, b in run["evals"]]
            lines.append("")
    if grpo:
        f, l = grpo["first"], grpo["last"]
        lines += [f"**reinforcement (GRPO)**: {grpo['steps']:,} steps of {grpo['prompts']} title prompts "
                  f"(samples/tang_prompts.jsonl) × {grpo['group']} sampled answers, rewards {grpo['rewards']} "
                  f"(`minimind/training/rewards/`), peak lr {grpo['lr']}, KL penalty {grpo['beta']}, "
                  f"{grpo['updates']} updates per batch of answers, {grpo['wall_s'] / 60:.0f} min on {grpo['device']}; "
                  f"mean train reward ({' / '.join(['total', *grpo['names']])}) "
                  f"{' / '.join(f'{v:.3f}' for v in f)} over the first 5 steps → "
                  f"{' / '.join(f'{v:.3f}' for v in l)} over the last 5.", ""]
        if grpo["evals"]:
            lines += ["| " + " | ".join(["step", "held-out reward", *grpo["names"]]) + " |",
                      "|---" * (2 + len(grpo["names"])) + "|"]
            lines += ["| " + " | ".join([str(e[0]), *(f"{v:.3f}" for v in e[1:])]) + " |" for e in grpo["evals"]]
            lines.append("")
    lines += ["## Held-out quality", "",
              f"Measured on the shipped bf16 weights (loaded as float32), documents scored in windows of "
              f"{EVAL_CONTEXT} tokens, BPC = total NLL in bits ÷ characters"
              + ("." if tang else "; each held-out play is one document of running text, blank lines "
                                  "included.") + "", "",
              "| text | characters | loss (nats/token) | perplexity | bits per character |", "|---|---|---|---|---|",
              f"| all held-out {'poems' if tang else 'plays'} | {full.characters:,} | {full.loss:.4f} | "
              f"{full.perplexity:.2f} | **{full.bpc:.4f}** |",
              f"| `{sample_name}` (shipped, used by the test) | {fast.characters:,} | {fast.loss:.4f} | "
              f"{fast.perplexity:.2f} | {fast.bpc:.4f} |", ""]
    lines += context_lines(config, windows, sample_name)
    if tang and total:
        lines += [f"Form check: asked for a named form (五言/七言 绝句/律诗) with {total} held-out titles "
                  f"(`{sample_name}`), {right} answers had exactly that form ({100 * right / total:.0f}%) and "
                  f"{rhymed} of them also rhymed ({100 * rhymed / total:.0f}% of all; even verses ending in one "
                  "rhyme class of modern readings, `minimind.training.rewards`).", ""]
        if before:
            lines += ["Before → after the GRPO stage (the same checks, the same seeds):", "",
                      "| | form | form + rhyme | held-out BPC |", "|---|---|---|---|",
                      f"| before | {before['right']}/{total} | {before['rhymed']}/{total} | {before['bpc']:.4f} |",
                      f"| after | {right}/{total} | {rhymed}/{total} | {full.bpc:.4f} |", "",
                      "On 200 held-out title prompts × 2 answers: `python -m minimind bench --only grpo` "
                      "(benchmarks/RESULTS.md).", ""]
    shown = SAMPLE_PARAMS if tang else {**SAMPLE_PARAMS, "max_new_tokens": SHAKESPEARE_TOKENS}
    settings = ", ".join(f"{k}={v}" for k, v in shown.items())
    lines += ["## Samples", "", f"Sampling: {settings}, seed = prompt index.", ""]
    for prompt, answer in samples:
        lines += [f"**{prompt.strip()}**", "", "```", answer.strip() or "(empty)", "```", ""]
    rhyme = ("Tonal rules are not enforced, and rhyme only as far as a modern-reading proxy rewards it; "
             if grpo or kept and "reinforcement" in kept else "Rhyme and tonal rules are not enforced; ")
    lines += ["## Limitations", "",
              f"A {params / 1e6:.1f}M-parameter model trained on a CPU: it imitates form and "
              "vocabulary, not meaning. Lines are often grammatical but incoherent and it knows nothing outside "
              "its corpus. " + (rhyme + "it invents poems and its 'style of' an "
                                "author is loose at best. Requests in other phrasings or in English are poorly "
                                "understood; answers use traditional characters." if tang else
                                "Speaker names and stage directions are invented freely; it writes Early Modern "
                                "English only and cannot follow instructions."),
              "", "## Reproduce", "", f"`bash scripts/train_{kind}.sh` (see README.md, *Shipped models*).", ""]
    return with_header(card_data(kind, results), "\n".join(lines))


def eval_results(tang: bool, full, fast, sample_name: str) -> list[EvalResult]:
    """The card's held-out figures as the Hub's model-index holds them (tests re-measure them)."""
    task = dict(task_type="text-generation", task_name="Language modelling",
                dataset_name="held-out poems (2% by poem)" if tang else "held-out plays (4 of 40)",
                dataset_type="tang_poems" if tang else "shakespeare")
    return [EvalResult(**task, metric_type="bits_per_character", metric_value=round(full.bpc, 4),
                       metric_name="held-out BPC"),
            EvalResult(**task, metric_type="perplexity", metric_value=round(full.perplexity, 3),
                       metric_name="held-out perplexity (per token)"),
            EvalResult(**task, metric_type="loss", metric_value=round(full.loss, 4),
                       metric_name="held-out loss (nats/token)"),
            EvalResult(**task, metric_type="bits_per_character", metric_value=round(fast.bpc, 4),
                       metric_name=f"held-out sample BPC ({sample_name})")]


def card_data(kind: str, results: list[EvalResult]) -> ModelCardData:
    """The shipped card's front matter, built by huggingface_hub so the Hub reads it: the license of
    the corpus (its file ships beside the weights), the language it writes, the figures."""
    tang = kind == "tang"
    return ModelCardData(
        language=["zh"] if tang else ["en"],
        license=CORPUS_LICENSE[kind][0], library_name="transformers", pipeline_tag="text-generation",
        tags=["minimind", "llama", "tiny", "poetry" if tang else "shakespeare"],
        model_name="MiniMind-Tang" if tang else "MiniMind-Shakespeare", eval_results=results)


def with_header(data: ModelCardData, body: str) -> str:
    """The card: front matter and body, parsed back by huggingface_hub's ModelCard (a header the Hub
    could not read raises here, before anything is written)."""
    return str(ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}"))


def refresh_header(folder: Path, kind: str) -> None:
    """Rewrite a shipped card's front matter from its own figures, the body unchanged (the header's
    fields changed; nothing is re-measured)."""
    card = ModelCard.load(folder / "README.md")
    (folder / "README.md").write_text(with_header(card_data(kind, card.data.eval_results), card.text.lstrip("\n")),
                                      encoding="utf-8")


if __name__ == "__main__":
    main()

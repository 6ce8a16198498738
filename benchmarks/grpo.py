"""GRPO from the shipped MiniMind-Tang chat model with the form and rhyme rewards, for a fixed
CPU budget: what the rewards teach, what it costs the model, and how fast rollouts are.

Training prompts: samples/tang_prompts.jsonl (2,000 titles of training-split poems, 500 per
form, scripts/make_tang_prompts.py). Every figure below is measured on what GRPO never
trained on, by the same code before and after:

- requested form / form + rhyme: each of the 200 held-out title prompts
  (samples/tang_prompts_heldout.jsonl, titles of held-out poems, 50 per form) is answered
  ANSWERS_PER_PROMPT times through the chat path (minimind.generation.chat, the model's saved
  sampling defaults, seeded) -- what the Chat tab and the API give a user. An answer is in
  form when its verses match the requested form exactly; it rhymes when its even verses end
  in one rhyme class (minimind.training.rewards: pypinyin finals of modern readings, tone
  ignored, 13 classes: a proxy, not the classical rhyme books). The same rule applied to real
  poems (the regulated poems of the held-out split) gives the rate a real poet reaches.
- what the rewards can be gamed into, for the answers and for those real poems: the commonest
  rhyme class's share of the rhyming ones, the classes used, distinct rhyme characters per rhyme
  position, and the share that uses a character of its title; for real poems also that share with
  the titles shuffled among poems of one form (`title_use_by_chance`: what title use reads for a
  writer who ignores the title).
- held-out poem BPC: checkpoints/minimind-tang/heldout_sample.jsonl (poems neither the
  pretraining nor the chat set saw), minimind.evaluate.
Since the GRPO-tuned model became the shipped MiniMind-Tang (scripts/tang_grpo.yaml), a rerun
starts from it and measures a second round. The first-round figures in RESULTS.md were measured
at 3576431, whose MiniMind-Tang is the chat model before GRPO (in git history:
`git show 3576431:checkpoints/minimind-tang/model.safetensors`).

`--compare-models BEFORE,AFTER[,AFTER...]` measures saved models with the same code and trains
nothing: what a recipe's GRPO stage did (scripts/train_tang.sh: its chat fine-tune, then the model it
ships), or several GRPO runs from one start, e.g. `python -m benchmarks.grpo --compare-models work/tang/sft/checkpoints/step-1164,checkpoints/minimind-tang`.

- rollout speed: 8 held-out prompts x 8 answers sampled as GRPO samples them (temperature 1,
  no top-k/top-p, up to 96 tokens), by the batched engine (RolloutPolicy.sample) and by
  transformers' `model.generate` one answer at a time (the reference), tokens per second of
  each, in the same process.
"""

from __future__ import annotations

import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

NAME = "grpo"
DESCRIPTION = ("GRPO from MiniMind-Tang with form + rhyme (spread over the classes) + title rewards: held-out form, "
               "rhyme, rhyme variety, title use, poem BPC, rollout speed")
HEADLINE = ["requested form share after", "form + rhyme share after", "poem BPC after / before",
            "rollout tokens/s engine / generate"]
ROOT = Path(__file__).resolve().parents[1]
START = ROOT / "checkpoints" / "minimind-tang"
PROMPTS = ROOT / "samples" / "tang_prompts.jsonl"
HELD_OUT = ROOT / "samples" / "tang_prompts_heldout.jsonl"
CACHE = ROOT / ".cache" / "grpo"
MINUTES = 15.0            # the budget
ANSWERS_PER_PROMPT = 2
REWARDS = [{"name": "form", "weight": 1.0}, {"name": "rhyme", "weight": 1.0}, {"name": "title", "weight": 0.5}]
SPEED_PROMPTS, SPEED_GROUP = 8, 8
CHANCE = "uses a title character by chance (titles shuffled within a form)"
SEED = 0                  # the shuffles of title_use_by_chance
VARIETY = ("commonest rhyme class share", "commonest rhyme class", "rhyme classes used",
           "distinct rhyme characters per rhyme", "uses a title character")
REAL = (*VARIETY, CHANCE)  # the figures given for real poems


def held_out_prompts(limit: int | None = None) -> list[dict]:
    rows = [json.loads(line) for line in HELD_OUT.open(encoding="utf-8") if line.strip()]
    return rows[:limit] if limit else rows


def answer_all(model, tokenizer, prompts: list[dict]) -> list[tuple[dict, str]]:
    """ANSWERS_PER_PROMPT answers to each prompt through the chat path; the requests run
    concurrently, so the engine batches them as it batches a server's."""
    from minimind.generation import chat
    from minimind.sampling_params import SamplingParams

    defaults = SamplingParams.from_model(START)

    def one(job):
        i, sample, record = job
        params = defaults.replace(seed=i * 100 + sample, max_new_tokens=160)
        return record, "".join(chat(model, tokenizer, [{"role": "user", "content": record["prompt"]}], params))

    jobs = [(i, s, r) for i, r in enumerate(prompts) for s in range(ANSWERS_PER_PROMPT)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(one, jobs))


def form_figures(answers: list[tuple[dict, str]]) -> dict:
    from minimind.training.rewards.poems import form_of, rhymes, title_characters

    in_form = [form_of(text) == record["form"] for record, text in answers]
    both = [ok and rhymes(text) for ok, (_, text) in zip(in_form, answers)]
    return {"requested form share": sum(in_form) / len(answers), "form + rhyme share": sum(both) / len(answers),
            "rhyme share of answers in form": sum(both) / max(sum(in_form), 1), "answers": len(answers),
            **variety([text for _, text in answers], [title_characters(r["prompt"]) for r, _ in answers])}


def variety(texts: list[str], titles: list[set[str]]) -> dict:
    """What a reward can be gamed into, beside the score: how the rhyming texts spread over the
    rhyme classes (the commonest class's share of them; distinct rhyme characters per rhyme
    position over all of them), and the share of texts that use a character of their title."""
    from collections import Counter

    from minimind.training.rewards.poems import han_characters, rhyme_of

    found = [f for f in map(rhyme_of, texts) if f]
    classes = Counter(name for name, _ in found)
    common, held = classes.most_common(1)[0] if classes else ("", 0)
    positions = sum(len(chars) for _, chars in found)
    distinct = len(set().union(*(chars for _, chars in found))) if found else 0
    titled = [(t, title) for t, title in zip(texts, titles) if title]
    return {"commonest rhyme class share": held / max(len(found), 1), "commonest rhyme class": common,
            "rhyme classes used": len(classes),
            "distinct rhyme characters per rhyme": distinct / max(positions, 1),
            "uses a title character": sum(bool(title & han_characters(t)) for t, title in titled)
            / max(len(titled), 1)}


def real_poems(limit: int | None = None) -> dict:
    """The same figures on real held-out regulated poems: the full held-out split (2 % of the corpus,
    ../shared/corpora) when it is at hand, else the shipped sample; their rhyme share under the
    same rule, and the variety figures."""
    from minimind.training.rewards.poems import form_of, han_characters, rhymes

    try:
        from scripts.corpora import TANG, tang_records, tang_split

        held = set(tang_split(cache_dir=str(CACHE / "data"))[1])
        records = [r for r in tang_records(TANG) if r["text"] in held]
        source = "the held-out 2 % of the Tang corpus"
    except (FileNotFoundError, OSError):
        records = [json.loads(line) for line in (START / "heldout_sample.jsonl").open(encoding="utf-8")]
        source = "the shipped held-out sample"
    regulated = [(r, form) for r in records if (form := form_of(r["text"]))][:limit]
    texts = [r["text"] for r, _ in regulated]
    titles = [han_characters(r.get("title", "")) for r, _ in regulated]
    return {"rhyme share": sum(map(rhymes, texts)) / max(len(texts), 1), "poems": len(texts), "source": source,
            **variety(texts, titles), CHANCE: title_use_by_chance(texts, titles, [form for _, form in regulated])}


def real_row(real: dict) -> dict:
    """The real poems' row of a results table, beside the models' rows."""
    return {"model": f"real regulated poems ({real['source']})", "answers": real["poems"],
            "form + rhyme share": real["rhyme share"], **{k: real[k] for k in REAL}}


def title_use_by_chance(texts: list[str], titles: list[set[str]], forms: list, shuffles: int = 20) -> float:
    """The share of real poems that use a character of ANOTHER poem's title of the same form (titles
    shuffled within each form so that none keeps its own, `shuffles` seeded rounds, mean): what
    "uses a title character" reads for a writer who ignores the title. A model's title use means
    something only above this."""
    import random

    by_form: dict = {}
    for i, form in enumerate(forms):
        by_form.setdefault(form, []).append(i)
    rng, shares = random.Random(SEED), []
    for _ in range(shuffles):
        drawn = list(titles)
        for members in by_form.values():
            order = rng.sample(members, len(members))   # a random cycle: each poem takes the next one's title
            for k, i in enumerate(order):
                drawn[i] = titles[order[(k + 1) % len(order)]]
        shares.append(variety(texts, drawn)["uses a title character"])
    return sum(shares) / max(len(shares), 1)


def poem_bpc(model, tokenizer) -> float:
    from minimind.evaluate import evaluate_documents

    poems = [json.loads(line)["text"] for line in (START / "heldout_sample.jsonl").open(encoding="utf-8")]
    return evaluate_documents(model, tokenizer, poems, context=model.config.max_position_embeddings).bpc


def measure(model, tokenizer, prompts, label: str, extra: dict) -> dict:
    model.eval()
    start = time.perf_counter()
    figures = form_figures(answer_all(model, tokenizer, prompts))
    return {"model": label, **figures, "poem BPC": poem_bpc(model, tokenizer),
            "answering s": time.perf_counter() - start, **extra}


def rollout_speed(model, tokenizer, prompts: list[dict]) -> dict:
    """Tokens/s of GRPO's rollouts: the batched engine vs transformers' generate, one answer at a time."""
    import torch

    from minimind.chat_format import encode_chat
    from minimind.training.objectives.rollouts import RolloutPolicy

    policy = RolloutPolicy(model, tokenizer)
    ids = [encode_chat(tokenizer, [{"role": "user", "content": r["prompt"]}]) for r in prompts[:SPEED_PROMPTS]]
    batch = [p for p in ids for _ in range(SPEED_GROUP)]
    policy.sample(batch[:8], list(range(8)), 16, 1.0, 0, 1.0)  # warm-up (prepared weights, packed matrices)
    rolled = policy.sample(batch, list(range(len(batch))), 96, 1.0, 0, 1.0)
    reference = policy.model
    torch.manual_seed(0)
    tokens, start = 0, time.perf_counter()
    with torch.no_grad():
        for prompt in batch[:2 * SPEED_GROUP]:  # two prompts' groups: enough for a stable rate
            out = reference.generate(torch.tensor([prompt]), do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                     max_new_tokens=96, eos_token_id=policy.stop_ids, pad_token_id=0)
            tokens += out.shape[1] - len(prompt)
    generate_s = time.perf_counter() - start
    engine_rate, generate_rate = rolled.tokens / rolled.seconds, tokens / generate_s
    return {"engine tokens/s": engine_rate, "generate tokens/s": generate_rate,
            "engine answers": len(batch), "generate answers": 2 * SPEED_GROUP,
            "ratio": engine_rate / generate_rate}


def train_grpo(seconds: float, adapter: str, overrides: list[str]) -> tuple[dict, Path, float]:
    from benchmarks._harness import bench_device
    from minimind.training import TrainConfig, train

    run_dir = CACHE / "runs" / (adapter or "full")
    shutil.rmtree(run_dir, ignore_errors=True)
    raw = {"mode": "grpo", "adapter": adapter, "model": {"init_from": str(START)},
           "data": {"files": [str(PROMPTS)], "kind": "prompts", "cache_dir": str(CACHE / "data")},
           "grpo": {"rewards": REWARDS}, "time_budget_s": seconds, "run_dir": str(run_dir),
           "device": bench_device()}
    start = time.perf_counter()
    status = train(TrainConfig.from_dict(raw).with_overrides(overrides))
    return status, run_dir, time.perf_counter() - start


def reward_curve(run_dir: Path, points: int = 6) -> str:
    """The train reward (total; form; rhyme) at a few evenly spaced logged steps."""
    from minimind.training import RunDir

    rows = [r for r in RunDir(run_dir).read_metrics() if "reward" in r]
    if not rows:
        return ""
    picks = list({id(r): r for r in (rows[round(i * (len(rows) - 1) / (points - 1))] for i in range(points))}.values())
    return "; ".join(f"{r['step']}: {r['reward']:.2f} ({r.get('reward_form', 0):.2f}/{r.get('reward_rhyme', 0):.2f})"
                     for r in picks)


def compare(before: Path, *afters: Path, tiny: bool = False) -> dict:
    """The same figures for saved models, with no training: a recipe's model before its GRPO stage
    and after it (scripts/train_tang.sh's chat fine-tune and the model it ships), or one start and
    several GRPO runs from it (settings compared), beside real poems. Each model answers with its
    own tokenizer and the shipped sampling defaults. The summary compares the start with the last."""
    import torch

    from minimind.checkpoint import load_model, load_tokenizer_for

    prompts = held_out_prompts(12 if tiny else None)
    real = real_poems()
    labels = ["before GRPO"] + (["after GRPO"] if len(afters) == 1 else [f"after GRPO, {i + 1}" for i in range(len(afters))])
    rows = [measure(load_model(path, merge=True), load_tokenizer_for(path), prompts, f"{label} ({path})", {})
            for label, path in zip(labels, (before, *afters))]
    rows.insert(1, real_row(real))
    first, last = rows[0], rows[-1]
    summary = {"requested form share before": first["requested form share"],
               "requested form share after": last["requested form share"],
               "form + rhyme share before": first["form + rhyme share"],
               "form + rhyme share after": last["form + rhyme share"],
               "real regulated poems that rhyme (same rule)": real["rhyme share"],
               "poem BPC before": first["poem BPC"], "poem BPC after": last["poem BPC"],
               "poem BPC after / before": last["poem BPC"] / first["poem BPC"],
               **{f"{k} before": first[k] for k in VARIETY}, **{f"{k} after": last[k] for k in VARIETY},
               **{f"{k}, real poems": real[k] for k in REAL},
               "threads": torch.get_num_threads(), "held-out prompts": len(prompts),
               "answers per prompt": ANSWERS_PER_PROMPT}
    return {"rows": rows, "summary": summary}


def run(quick: bool = False, tiny: bool = False, minutes: float | None = None, adapters=("",),
        overrides: tuple = (), compare_models: str | None = None) -> dict:
    import torch

    from minimind.checkpoint import load_model, load_tokenizer_for
    from minimind.training import RunDir, TrainConfig

    if compare_models:
        paths = [Path(p.strip()) for p in compare_models.split(",")]
        if len(paths) < 2 or not all(p.is_dir() for p in paths):
            raise SystemExit(f"--compare-models takes two or more saved model folders, BEFORE,AFTER[,AFTER...]: "
                             f"got {compare_models!r}")
        return compare(*paths, tiny=tiny)
    seconds = 60.0 * (minutes or (0.3 if tiny else 3.0 if quick else MINUTES))
    tokenizer = load_tokenizer_for(START)
    prompts = held_out_prompts(12 if tiny else None)
    speed = rollout_speed(load_model(START), tokenizer, prompts)
    real = real_poems()
    before = measure(load_model(START), tokenizer, prompts, "MiniMind-Tang (start)", {})
    rows, summary = [before, real_row(real)], {}
    for adapter in adapters:
        status, run_dir, wall = train_grpo(seconds, adapter, list(overrides))
        resolved = TrainConfig.load(run_dir / "config.yaml")
        g = resolved.grpo
        metrics = [r for r in RunDir(run_dir).read_metrics() if "rollout_tokens_per_s" in r]
        after = measure(load_model(status["final_checkpoint"], merge=True), tokenizer, prompts,
                        f"after GRPO ({adapter or 'full'}, {seconds / 60:g} min)",
                        {"steps": status.get("step"), "train() wall s": wall,
                         "settings": f"group {g.group_size}, {resolved.batch_size} prompts/step, lr "
                                     f"{resolved.optim.lr:g}, beta {g.beta:g}, {g.updates} updates, "
                                     f"{resolved.precision}",
                         "rollout tokens/s in training": sum(r["rollout_tokens_per_s"] for r in metrics)
                         / max(len(metrics), 1),
                         "train reward curve (step: total (form/rhyme))": reward_curve(run_dir)})
        rows.append(after)
        tag = adapter or "full"
        summary[f"requested form share after ({tag})"] = after["requested form share"]
        summary[f"form + rhyme share after ({tag})"] = after["form + rhyme share"]
        summary[f"poem BPC after / before ({tag})"] = after["poem BPC"] / before["poem BPC"]
        summary.update({f"{k} after ({tag})": after[k] for k in VARIETY})
        summary[f"final run ({tag})"] = str(run_dir)
    summary.update({"requested form share before": before["requested form share"],
                    "form + rhyme share before": before["form + rhyme share"],
                    **{f"{k} before": before[k] for k in VARIETY},
                    "real regulated poems that rhyme (same rule)": real["rhyme share"],
                    "real poems checked": real["poems"],
                    **{f"{k}, real poems": real[k] for k in REAL},
                    "rollout tokens/s engine": speed["engine tokens/s"],
                    "rollout tokens/s generate (one at a time)": speed["generate tokens/s"],
                    "rollout tokens/s engine / generate": speed["ratio"],
                    "budget s (each run)": seconds, "threads": torch.get_num_threads(),
                    "held-out prompts": len(prompts), "answers per prompt": ANSWERS_PER_PROMPT})
    return {"rows": rows, "summary": summary}


def main() -> None:
    from benchmarks._harness import fine_tune_main

    fine_tune_main(run, __doc__, "budget of each GRPO run (default 15; 3 with --quick)", "full",
                   {"compare-models": {"metavar": "BEFORE,AFTER[,AFTER...]",
                                       "help": "measure saved models (a recipe's GRPO stage: its start and its "
                                               "result; or one start and several runs from it) instead of training"}})


if __name__ == "__main__":
    main()

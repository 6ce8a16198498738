"""DPO from the shipped MiniMind-Tang chat model on the Tang preference sample, for a fixed
wall-clock budget: what the preference pairs teach, and what it costs the model.

The preference pairs (samples/tang_preference.jsonl, scripts/make_tang_preference.py) ask for a
poem of one form on a title; the chosen answer is a real poem of that form, the rejected one
a real poem of another form. The trainer holds out 10 % of the pairs (seeded, by pair); every
figure is measured on those held-out pairs or on text the model never trained on, by the
same code before and after:

- preference accuracy: the share of held-out pairs whose chosen answer gets the higher DPO
  reward (beta x log-ratio to the starting model; a tie, as for the starting model itself,
  counts one half), and the reward margin and per-token KL to the starting model;
- likelihood preference: the share where the model itself gives the chosen answer the higher
  mean log-probability per token (no reference needed);
- held-out poem BPC: checkpoints/minimind-tang/heldout_sample.jsonl (poems neither the
  pretraining nor the chat set saw), minimind.evaluate;
- requested form: each held-out request is answered SAMPLES_PER_REQUEST times through the chat
  engine (temperature 0.7, top-p 0.9, seeded) and each answer's form (verse length x verse
  count) compared with the one asked for.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

NAME = "dpo"
DESCRIPTION = "DPO from MiniMind-Tang on the Tang preference sample: held-out preference accuracy, poem BPC, form"
HEADLINE = ["held-out preference accuracy after", "poem BPC after / before", "requested form share after - before"]
ROOT = Path(__file__).resolve().parents[1]
START = ROOT / "checkpoints" / "minimind-tang"
PAIRS = ROOT / "samples" / "tang_preference.jsonl"
CACHE = ROOT / ".cache" / "dpo"
SEQ, VAL_FRACTION, SEED = 256, 0.1, 1234
MINUTES = 5.0      # the target asks for its figures within 10 CPU-minutes
SAMPLES_PER_REQUEST = 4


def data_config():
    from minimind.data import DataConfig

    return DataConfig(kind="preference", seq_len=SEQ, val_fraction=VAL_FRACTION, seed=SEED,
                      cache_dir=str(CACHE / "data"))


def held_out_requests() -> list[list[dict]]:
    """The prompts (message lists) of the held-out pairs, split exactly as the trainer splits them."""
    from minimind.data import read_documents, split_indices

    docs = read_documents([str(PAIRS)], data_config()).dataset
    _, val = split_indices(len(docs), VAL_FRACTION, SEED)
    return [docs[int(i)]["prompt"] for i in val]


def requested(messages: list[dict]) -> str | None:
    """The form a request asks for (五言绝句 ...), as scripts/make_tang_chat.py phrases it."""
    from scripts.make_tang_chat import FORMS

    asked = re.search("|".join(FORMS.values()), messages[-1]["content"])
    return asked.group(0) if asked else None


def form_share(model, tokenizer, requests: list[list[dict]]) -> tuple[float, int]:
    from minimind.generation import chat
    from minimind.sampling_params import SamplingParams
    from scripts.make_tang_chat import form_of

    hits = total = 0
    for i, messages in enumerate(requests):
        want = requested(messages)
        if want is None:
            continue
        for sample in range(SAMPLES_PER_REQUEST):
            params = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=160, seed=i * 100 + sample)
            hits += form_of("".join(chat(model, tokenizer, messages, params))) == want
            total += 1
    return hits / max(total, 1), total


def pair_figures(policy, reference, tokenizer, beta: float) -> dict:
    """DPO's held-out figures (objectives/dpo.py, the trainer's own evaluation) plus the
    reference-free likelihood preference."""
    import torch

    from minimind.data import prepare_corpus
    from minimind.evaluate import token_logprobs
    from minimind.training.batches import eval_batches
    from minimind.training.objectives.dpo import Dpo
    from minimind.training.precision import Precision

    corpus = prepare_corpus([str(PAIRS)], tokenizer, data_config())
    batches = list(eval_batches(corpus.validation, 8, 0, tokenizer.pad_token_id))
    figures = Dpo(None, reference, beta, 0.0, Precision("fp32", "cpu"), None).evaluate(policy, batches)
    wins = pairs = 0
    with torch.no_grad():
        for batch in batches:
            logps, mask = token_logprobs(policy(input_ids=batch["input_ids"],
                                                attention_mask=batch["attention_mask"]).logits, batch["labels"])
            mean = logps.sum(-1) / mask.sum(-1).clamp(min=1)
            half = len(mean) // 2
            wins += int((mean[:half] > mean[half:]).sum())
            pairs += half
    return {**figures, "likelihood preference": wins / max(pairs, 1), "pairs": pairs}


def poem_bpc(model, tokenizer) -> float:
    from minimind.evaluate import evaluate_documents

    poems = [json.loads(line)["text"] for line in (START / "heldout_sample.jsonl").open(encoding="utf-8")]
    return evaluate_documents(model, tokenizer, poems, context=model.config.max_position_embeddings).bpc


def measure(model, reference, tokenizer, requests, label: str, extra: dict, beta: float) -> dict:
    model.eval()
    pairs = pair_figures(model, reference, tokenizer, beta)
    share, asked = form_share(model, tokenizer, requests)
    return {"model": label, "preference accuracy": pairs["accuracy"], "reward margin": pairs["reward_margin"],
            "KL to start (per token)": pairs["kl"], "likelihood preference": pairs["likelihood preference"],
            "poem BPC": poem_bpc(model, tokenizer), "requested form share": share, "held-out pairs": pairs["pairs"],
            "answers": asked, **extra}


def train_dpo(seconds: float, adapter: str, overrides: list[str]) -> tuple[dict, Path, float]:
    from benchmarks._harness import bench_device
    from minimind.training import TrainConfig, train

    run_dir = CACHE / "runs" / (adapter or "full")
    shutil.rmtree(run_dir, ignore_errors=True)
    raw = {"mode": "dpo", "adapter": adapter, "model": {"init_from": str(START)},
           "data": {"files": [str(PAIRS)], "kind": "preference", "seq_len": SEQ, "val_fraction": VAL_FRACTION,
                    "seed": SEED, "cache_dir": str(CACHE / "data")},
           "time_budget_s": seconds, "run_dir": str(run_dir), "device": bench_device()}
    start = time.perf_counter()
    status = train(TrainConfig.from_dict(raw).with_overrides(overrides))
    return status, run_dir, time.perf_counter() - start


def run(quick: bool = False, tiny: bool = False, minutes: float | None = None, adapters=("", "lora"),
        overrides: tuple = ()) -> dict:
    import torch

    from minimind.checkpoint import load_model, load_tokenizer_for
    from minimind.training import TrainConfig

    seconds = 60.0 * (minutes or (0.3 if tiny else 2.0 if quick else MINUTES))
    tokenizer = load_tokenizer_for(START)
    requests = held_out_requests()[: 8 if tiny else None]
    reference = load_model(START).eval()
    default_beta = TrainConfig().dpo.beta
    before = measure(load_model(START), reference, tokenizer, requests, "MiniMind-Tang (start)", {}, default_beta)
    rows, summary = [before], {}
    for adapter in adapters:
        status, run_dir, wall = train_dpo(seconds, adapter, list(overrides))
        resolved = TrainConfig.load(run_dir / "config.yaml")
        after = measure(load_model(status["final_checkpoint"], merge=True), reference, tokenizer, requests,
                        f"after DPO ({adapter or 'full'}, {seconds / 60:g} min)",
                        {"steps": status.get("step"), "settings": f"beta {resolved.dpo.beta:g}, sft weight "
                         f"{resolved.dpo.sft_weight:g}, lr {resolved.optim.lr:g}, "
                         f"batch {resolved.batch_size} pairs, {resolved.precision}", "train() wall s": wall},
                        resolved.dpo.beta)
        rows.append(after)
        tag = adapter or "full"
        summary[f"held-out preference accuracy after ({tag})"] = after["preference accuracy"]
        summary[f"poem BPC after / before ({tag})"] = after["poem BPC"] / before["poem BPC"]
        summary[f"requested form share after - before ({tag})"] = after["requested form share"] - before["requested form share"]
    summary.update({"budget s (each run)": seconds, "threads": torch.get_num_threads(),
                    "held-out pairs": before["held-out pairs"], "answers (form share)": before["answers"]})
    return {"rows": rows, "summary": summary}


def main() -> None:
    from benchmarks._harness import fine_tune_main

    fine_tune_main(run, __doc__, "budget of each DPO run (default 5; 2 with --quick)", "full,lora")


if __name__ == "__main__":
    main()

"""Vocabulary extension: LoRA-fine-tune the shipped MiniMind-Tang on Song ci, with and without
the corpus's missing characters added as tokens, for the same wall-clock budget.

MiniMind-Tang's tokenizer learnt traditional characters; the Song ci sample
(samples/songci_sample.jsonl, simplified characters, scripts/make_songci_sample.py) costs it
about 0.8 characters per token, a quarter of its characters written in byte pieces. Both runs
are the trainer's defaults for a LoRA fine-tune (mode lora, `train()` given the corpus and a
`time_budget_s`); the second also sets `model.extend_vocab` (minimind/vocabulary.py: up to
1,000 characters seen at least 3 times become tokens; their rows train beside the adapter).

Every figure is measured by the same code on samples/songci_heldout.jsonl, 150 ci that neither
run trained on: held-out bits per character (minimind.evaluate; per character, so the two
tokenizers compare), characters per token and the share of characters written in byte pieces
(minimind.vocabulary.coverage). Each model also answers ANSWERS requests "以《TUNE》为题写一首词"
(tunes of held-out ci) through the chat engine (the page's and the API's decoder, seeded): how
many answers carry U+FFFD, and the share of answer characters that never occur in the Tang
sample (mostly simplified forms; the held-out ci's own share is in the summary).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

NAME = "vocabulary"
DESCRIPTION = "Song ci LoRA from MiniMind-Tang, with and without vocabulary extension: held-out BPC, chars/token"
HEADLINE = ["held-out BPC extended / plain", "held-out chars/token extended", "held-out chars/token plain"]
ROOT = Path(__file__).resolve().parents[1]
START = ROOT / "checkpoints" / "minimind-tang"
TRAIN = ROOT / "samples" / "songci_sample.jsonl"
HELDOUT = ROOT / "samples" / "songci_heldout.jsonl"
CACHE = ROOT / ".cache" / "vocabulary"
MINUTES = 5.0
ANSWERS = 24  # sampled answers per model ("以《TUNE》为题写一首词", tunes of held-out ci)


def heldout_texts() -> list[str]:
    return [json.loads(line)["text"] for line in HELDOUT.open(encoding="utf-8")]


def tunes() -> list[str]:
    seen = []
    for line in HELDOUT.open(encoding="utf-8"):
        tune = json.loads(line)["title"]
        if tune and tune not in seen:
            seen.append(tune)
    return seen


def simplified_only(tang_characters: set[str], text: str) -> float:
    """Share of the CJK characters of `text` that never occur in the Tang corpus sample the
    start model's tokenizer came from (mostly simplified forms)."""
    cjk = [c for c in text if "\u4e00" <= c <= "\u9fff"]
    return sum(c not in tang_characters for c in cjk) / max(len(cjk), 1)


def measure(model, tokenizer, label: str, tang_characters: set[str], extra: dict) -> dict:
    from minimind.evaluate import evaluate_documents
    from minimind.generation import chat
    from minimind.sampling_params import SamplingParams
    from minimind.vocabulary import coverage

    texts = heldout_texts()
    model.eval()
    bpc = evaluate_documents(model, tokenizer, texts, context=model.config.max_position_embeddings).bpc
    spelled = coverage(tokenizer, texts)
    answers = []
    for i, tune in enumerate(tunes()[:ANSWERS]):
        params = SamplingParams(temperature=0.8, top_k=40, top_p=0.9, max_new_tokens=96, seed=i)
        answers.append("".join(chat(model, tokenizer, [{"role": "user", "content": f"以《{tune}》为题写一首词"}], params)))
    joined = "".join(answers)
    return {"model": label, "held-out BPC": bpc, "held-out chars/token": spelled.chars_per_token,
            "byte-fallback share (held-out)": spelled.byte_fallback_share, "vocabulary": len(tokenizer),
            "answers with U+FFFD": sum("\ufffd" in a for a in answers), "answers": len(answers),
            "simplified-only share of answer characters": simplified_only(tang_characters, joined), **extra}


def train_lora(seconds: float, extend: int, overrides: list[str]) -> tuple[dict, Path, float]:
    from benchmarks._harness import bench_device
    from minimind.training import TrainConfig, train

    run_dir = CACHE / "runs" / ("extended" if extend else "plain")
    shutil.rmtree(run_dir, ignore_errors=True)
    raw = {"mode": "lora", "model": {"init_from": str(START), "extend_vocab": extend},
           "data": {"files": [str(TRAIN)], "cache_dir": str(CACHE / "data")},
           "time_budget_s": seconds, "run_dir": str(run_dir), "device": bench_device()}
    start = time.perf_counter()
    status = train(TrainConfig.from_dict(raw).with_overrides(overrides))
    return status, run_dir, time.perf_counter() - start


def run(quick: bool = False, tiny: bool = False, minutes: float | None = None, adapters=("lora",),
        overrides: tuple = ()) -> dict:
    import torch

    from minimind.checkpoint import load_model, load_tokenizer_for
    from minimind.training import TrainConfig

    global ANSWERS
    if tiny:
        ANSWERS = 4
    seconds = 60.0 * (minutes or (0.3 if tiny else 2.0 if quick else MINUTES))
    tang_characters = set()
    for line in (ROOT / "samples" / "tang_poems_sample.jsonl").open(encoding="utf-8"):
        tang_characters.update(json.loads(line)["text"])
    rows = [measure(load_model(START), load_tokenizer_for(START), "MiniMind-Tang (start)", tang_characters, {})]
    after = {}
    for extend in (0, 1000):
        status, run_dir, wall = train_lora(seconds, extend, list(overrides))
        resolved = TrainConfig.load(run_dir / "config.yaml")
        added = json.loads((run_dir / "vocabulary.json").read_text())["added_tokens"] if extend else 0
        final = status["final_checkpoint"]
        label = f"LoRA {seconds / 60:g} min, " + (f"vocabulary extended (+{added} tokens)" if extend else "plain")
        after[extend] = measure(load_model(final, merge=True), load_tokenizer_for(final), label, tang_characters,
                                {"steps": status.get("step"), "tokens seen": status.get("tokens"),
                                 "settings": f"lr {resolved.optim.lr:g}, batch {resolved.batch_size} x "
                                             f"{resolved.data.seq_len}, rank {resolved.lora.rank}, {resolved.precision}",
                                 "train() wall s": wall})
        rows.append(after[extend])
    plain, extended = after[0], after[1000]
    summary = {"held-out BPC extended / plain": extended["held-out BPC"] / plain["held-out BPC"],
               "held-out BPC plain": plain["held-out BPC"], "held-out BPC extended": extended["held-out BPC"],
               "held-out BPC start": rows[0]["held-out BPC"],
               "held-out chars/token plain": plain["held-out chars/token"],
               "held-out chars/token extended": extended["held-out chars/token"],
               "simplified-only share, held-out text": simplified_only(tang_characters, "".join(heldout_texts())),
               "budget s (each run)": seconds, "threads": torch.get_num_threads()}
    return {"rows": rows, "summary": summary}


def main() -> None:
    from benchmarks._harness import fine_tune_main

    fine_tune_main(run, __doc__, "budget of each LoRA run (default 5; 2 with --quick)", "lora")


if __name__ == "__main__":
    main()

"""Export quality: every export format of one model, by size, held-out perplexity and decode speed.

The model is the shipped MiniMind-Tang (checkpoints/minimind-tang), scored on the
held-out poems that ship beside it (heldout_sample.jsonl: poems it never trained on,
cut to 20k characters), so the deltas are those of a trained model users export.
`--model DIR` exports another folder (held-out text: its heldout_sample.jsonl when it
has one, else the last 300 poems of ../shared's Tang corpus); `--stand-in` exports the
`small`-shape model of decode_throughput instead (build_stand_in: 25.8M parameters, a
6400-token BPE on 20k Tang poems, 300 steps of 4 x 128 tokens; --steps N to change, 30
with --quick), cached in `.cache/export_quality/`.
Decode speed is greedy, batch 1, 64 new tokens after a 9-token prompt, the
median of 5 runs (1 with --quick) taken in turn across all decoders so that
load from other processes hits them alike: our PyTorch path is `model.generate` on the model as
reloaded from the export (GGUF rows: transformers' dequantized load); llama.cpp
is llama-cpp-python on the GGUF file, with as many threads as torch uses. The
`llama.cpp greedy` column counts how many of the first 32 greedy tokens
llama.cpp picks identically to the float32 source in PyTorch.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

NAME = "export_quality"
DESCRIPTION = "export formats: size, held-out perplexity and decode tokens/s (PyTorch vs llama.cpp)"
HEADLINE = ["int8 ppl delta %", "gguf-q8_0 ppl delta %", "llama.cpp q8_0 / PyTorch float32 decode speed"]

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "export_quality"
CORPUS = ROOT.parent / "shared" / "corpora" / "tang_poems.jsonl"
FORMATS = ["hf", "llama", "int8", "bnb-8bit", "bnb-nf4", "gguf-f16", "gguf-q8_0"]
NEW_TOKENS = 64


def _poems() -> list[str]:
    with CORPUS.open(encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


def build_stand_in(steps: int) -> Path:
    """Train (once) the small-shape stand-in model described in the module docstring."""
    import torch

    from minimind import MiniMindConfig, MiniMindForCausalLM
    from minimind.tokenizer import build_tokenizer, save_tokenizer

    folder = CACHE / f"small-tang-{steps}steps"
    if (folder / "model.safetensors").is_file():
        return folder
    poems = _poems()[:20000]
    tokenizer = build_tokenizer(poems, vocab_size=6400)
    ids: list[int] = []
    for doc in tokenizer(poems, add_special_tokens=False)["input_ids"]:
        ids += [tokenizer.eos_token_id] + doc
    data = torch.tensor(ids)
    torch.manual_seed(0)
    model = MiniMindForCausalLM(MiniMindConfig.from_preset("small", vocab_size=len(tokenizer)))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.1, betas=(0.9, 0.95))
    warmup = max(steps // 10, 1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warmup, 0.5 * (
        1 + math.cos(math.pi * min(s / steps, 1.0)))))
    start = time.perf_counter()
    for step in range(steps):
        starts = torch.randint(0, len(data) - 129, (4,))
        batch = torch.stack([data[s:s + 128] for s in starts])
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 20 == 0 or step == steps - 1:
            print(f"  stand-in step {step + 1}/{steps} loss {loss.item():.3f} "
                  f"({time.perf_counter() - start:.0f}s)", flush=True)
    model.eval().save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    return folder


SHIPPED = ROOT / "checkpoints" / "minimind-tang"


def held_out(folder: Path | None = None, limit: int = 20000) -> list[str]:
    """Held-out documents, cut to `limit` characters: the folder's shipped held-out sample when
    it has one, else the last 300 poems of the shared Tang corpus."""
    sample = folder / "heldout_sample.jsonl" if folder is not None else None
    if sample is not None and sample.is_file():
        poems = [json.loads(line)["text"] for line in sample.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        poems = _poems()[-300:]
    docs, total = [], 0
    for poem in poems:
        docs.append(poem[:limit - total])
        total += len(docs[-1])
        if total >= limit:
            break
    return docs


def pytorch_decoder(model, prompt: list[int]):
    """A call that greedy-decodes NEW_TOKENS with `model.generate` (EOS masked so each run is full length)."""
    import warnings

    import torch

    ids = torch.tensor([prompt])

    def once() -> None:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # bitsandbytes warns on each matmul that it casts to float16
            model.generate(ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                           pad_token_id=0)

    return once


def llama_cpp_greedy_match(path: Path, prompt: list[int], reference: list[int]) -> int:
    """How many leading greedy tokens llama.cpp picks as the float32 source does in PyTorch."""
    import numpy as np
    import torch
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=256, n_threads=torch.get_num_threads(), logits_all=True, verbose=False)
    try:
        llm.eval(prompt)
        picks = []
        for _ in range(len(reference)):
            picks.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
            llm.eval([picks[-1]])
    finally:
        llm.close()
    return next((i for i, (a, b) in enumerate(zip(picks, reference)) if a != b), len(reference))


def llama_cpp_decoder(llm, prompt: list[int]):
    """A call that greedy-decodes NEW_TOKENS with llama.cpp's own sampler loop."""
    def once() -> None:
        for n, _ in enumerate(llm.generate(prompt, temp=0.0, top_k=1, repeat_penalty=1.0, reset=True), 1):
            if n == NEW_TOKENS:
                break

    return once


def run(quick: bool = False, model: str | None = None, steps: int | None = None, stand_in: bool = False) -> dict:
    import torch
    from transformers.utils import logging as hf_logging

    from benchmarks._harness import interleaved_medians
    from minimind.export import export_many, load_source
    from minimind.export.verify import load_export, make_reference

    hf_logging.disable_progress_bar()
    try:
        from llama_cpp import Llama
    except ImportError:
        Llama = None
    steps = steps or (30 if quick else 300)
    folder = build_stand_in(steps) if stand_in else Path(model) if model else SHIPPED
    eval_docs = held_out(folder)
    eval_name = ("the held-out sample shipped with the model" if (folder / "heldout_sample.jsonl").is_file()
                 else "300 held-out Tang poems")
    src = load_source(folder)
    reference = make_reference(src.model, src.tokenizer, eval_docs)
    start = time.perf_counter()
    results = export_many(folder, FORMATS, CACHE / "exports" / folder.name, eval_text=eval_docs,
                          eval_name=eval_name, overwrite=True)
    export_seconds = time.perf_counter() - start

    source_mb = sum(p.stat().st_size for p in folder.glob("*.safetensors")) / 2**20
    rows = [{"format": "source (float32)", "size MB": source_mb, "perplexity": reference.eval.perplexity,
             "ppl delta %": 0.0, "greedy": "32/32", "PyTorch tok/s": "-", "llama.cpp tok/s": "-",
             "llama.cpp greedy": "-", "export+verify s": "-"}]
    decoders = {"source (float32)": pytorch_decoder(src.model, reference.prompt)}
    engines = []
    for r in results:
        row = {key: "-" for key in rows[0]}
        row["format"] = r.format
        rows.append(row)
        if r.error:
            row["greedy"] = f"FAILED: {r.error}"
            continue
        row.update({"size MB": r.size_bytes / 2**20, "perplexity": r.perplexity, "ppl delta %": 100 * r.delta,
                    "greedy": f"{r.greedy_match}/{r.greedy_tokens}",
                    "export+verify s": r.seconds + r.verify_seconds})
        decoders[r.format] = pytorch_decoder(load_export(r.format, r.path)[0], reference.prompt)
        if r.format.startswith("gguf"):
            if Llama is None:
                row["llama.cpp tok/s"] = "not installed"
                continue
            row["llama.cpp greedy"] = f"{llama_cpp_greedy_match(r.path, reference.prompt, reference.greedy)}/32"
            threads = torch.get_num_threads()
            engines.append(Llama(model_path=str(r.path), n_ctx=256, n_threads=threads, n_threads_batch=threads,
                                 verbose=False))
            decoders["llama.cpp " + r.format] = llama_cpp_decoder(engines[-1], reference.prompt)
    try:  # every decoder in turn, repeatedly, so that load from other processes hits all alike
        seconds = interleaved_medians(decoders, repeats=1 if quick else 5)
    finally:
        for engine in engines:
            engine.close()
    for row in rows:
        if row["format"] in seconds:
            row["PyTorch tok/s"] = NEW_TOKENS / seconds[row["format"]]
        if "llama.cpp " + row["format"] in seconds:
            row["llama.cpp tok/s"] = NEW_TOKENS / seconds["llama.cpp " + row["format"]]

    by = {row["format"]: row for row in rows}
    shown = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder.name
    summary = {"model": str(shown), "held-out text": eval_name, "threads": torch.get_num_threads(),
               "export+verify seconds": export_seconds, "source perplexity": reference.eval.perplexity}
    for fmt in ("int8", "bnb-8bit", "bnb-nf4", "gguf-q8_0"):
        if isinstance(by.get(fmt, {}).get("ppl delta %"), float):
            summary[f"{fmt} ppl delta %"] = by[fmt]["ppl delta %"]
    if isinstance(by.get("gguf-q8_0", {}).get("llama.cpp tok/s"), float):
        summary["llama.cpp q8_0 / PyTorch float32 decode speed"] = (by["gguf-q8_0"]["llama.cpp tok/s"]
                                                                    / by["source (float32)"]["PyTorch tok/s"])
    return {"rows": rows, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one timing run (and a 30-step stand-in)")
    parser.add_argument("--model", default=None, help="MiniMind model folder to export instead of MiniMind-Tang")
    parser.add_argument("--stand-in", action="store_true", help="export the small-shape stand-in instead")
    parser.add_argument("--steps", type=int, default=None, help="train the stand-in this many steps (default 300)")
    args = parser.parse_args()
    from benchmarks._harness import print_result

    result = run(args.quick, args.model, args.steps, args.stand_in)
    print_result(result)


if __name__ == "__main__":
    main()

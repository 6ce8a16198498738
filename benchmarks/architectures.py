"""The architecture lab, measured: each position encoding and the LSTM, trained from scratch for
the same CPU budget on the same data with the same tokenizer, scored by the same code.

Variants (`VARIANTS`): the transformer with rotary (our default), ALiBi, sinusoidal, learned
and no positions (NoPE), the LSTM, and the LSTM with causal self-attention over its outputs.
Each is pretrained through the real trainer (`benchmarks.quality.train_and_score`: `train()`
given the corpus and the cached default tokenizer trained on the training texts) with the
trainer's defaults for everything but the architecture option and the amount of training:

- the five transformers train the same `pico` model (what the trainer's defaults choose for a
  3-minute budget here) for the same `STEPS` steps of 4 x 256 tokens: about what a rotary run
  does in 3 minutes on this machine. Their steps cost the same to within a few per cent (the
  position encoding is a small fraction of a step), so equal steps is equal compute, and unlike
  a wall-clock budget it does not hand a variant fewer steps because the shared machine was busy
  during its run (the first version of this table did: 1,190 to 3,112 steps in the same 3 minutes).
- the two LSTMs train for the same 3-minute wall-clock budget (`MINUTES`), their sizes chosen by
  the trainer's defaults: an LSTM step costs several times a transformer step on a CPU (a
  sequential scan), and the comparison the issue asks is at the same CPU budget. So they see
  fewer tokens; the "steps" and "train() wall s" columns say how many and how long.

Columns: parameters, training tokens/s (median of the logged steps), held-out BPC (Tang:
held-out poems; Shakespeare: held-out plays; benchmarks/quality.py splits them) in windows of
the training row length L, of 2L and of 4L — the held-out documents read as one stream, each
after an end-of-text token, as they are trained, so a longer window gives each token more
context *if* the model can use positions it never saw (ALiBi's claim; a learned table cannot
reach them at all: "—") — and decode tokens/s through the inference engine (the path chat and
the API run: `minimind.generation.complete`, greedy, `DECODE_TOKENS` tokens, best of 3).

    python -m minimind bench --only architectures        # both corpora (about 50 minutes)
    python -m benchmarks.architectures --steps 300 --minutes 1 --corpus tang --variant rope --variant lstm
"""

from __future__ import annotations

import argparse
import json
import time

NAME = "architectures"
DESCRIPTION = "position encodings and the LSTM: held-out BPC at 1x/2x/4x the training length, same budget"
HEADLINE = ["tang best BPC (variant)", "shakespeare best BPC (variant)",
            "tang alibi BPC 4L / L", "tang rope BPC 4L / L", "shakespeare alibi BPC 4L / L",
            "shakespeare rope BPC 4L / L"]
MINUTES = 3.0
STEPS = 2400
DECODE_TOKENS = 128
VARIANTS: dict[str, list[str]] = {
    "rope": ["model.overrides.position_encoding=rope"],
    "alibi": ["model.overrides.position_encoding=alibi"],
    "sinusoidal": ["model.overrides.position_encoding=sinusoidal"],
    "learned": ["model.overrides.position_encoding=learned"],
    "none (NoPE)": ["model.overrides.position_encoding=none"],
    "lstm": ["model.architecture=lstm"],
    "lstm + attention": ["model.architecture=lstm", "model.overrides.use_attention=true"],
}
TRANSFORMER = ["model.preset=pico", "batch_size=4", "data.seq_len=256"]  # what the defaults chose for 3 min


def longer_windows(name: str, run: dict) -> dict:
    """Held-out BPC of the trained model in windows of 2x and 4x its training row length (None
    where the model cannot read that far: a learned position table ends at L)."""
    from benchmarks.quality import corpus_files
    from minimind.checkpoint import load_model, load_tokenizer_for
    from minimind.evaluate import evaluate_documents

    _, _, _, held = corpus_files(name)
    model = load_model(run["checkpoint"])
    tokenizer = load_tokenizer_for(run["checkpoint"])
    out = {}
    for factor in (2, 4):
        try:
            out[f"BPC {factor}L"] = evaluate_documents(model, tokenizer, held, context=factor * run["L"]).bpc
        except ValueError as err:  # learned positions: past the table
            out[f"BPC {factor}L"] = None
            out["note"] = str(err).split(":")[0]
    return out


def decode_speed(checkpoint: str, prompt: str) -> float:
    """Greedy tokens per second through the engine (what chat and the API run), best of 3."""
    from minimind.checkpoint import load_model, load_tokenizer_for
    from minimind.generation import complete
    from minimind.sampling_params import SamplingParams

    model, tokenizer = load_model(checkpoint), load_tokenizer_for(checkpoint)
    params = SamplingParams(temperature=0.0, max_new_tokens=DECODE_TOKENS, stop=())
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        generation = complete(model, tokenizer, prompt, params)
        for _piece in generation:
            pass
        seconds = time.perf_counter() - start
        best = max(best, generation.completion_tokens / seconds)
    return best


def measure(name: str, variant: str, minutes: float, steps: int) -> dict:
    """Train one variant (transformers: `steps` steps; LSTMs: `minutes` of wall clock) and score it."""
    import yaml

    from benchmarks.quality import CACHE, train_and_score

    tag = "arch-" + variant.replace(" ", "").replace("+", "-").replace("(", "").replace(")", "")
    overrides = list(VARIANTS[variant])
    if "model.architecture=lstm" not in overrides:
        overrides += TRANSFORMER + ["time_budget_s=0", f"max_steps={steps}"]
    scored = train_and_score(name, minutes * 60, overrides, tag=tag)
    run_dir = CACHE / "runs" / f"{name}-{tag}"
    resolved = yaml.safe_load((run_dir / "config.yaml").read_text())
    status = json.loads((run_dir / "status.json").read_text())
    run = {"checkpoint": status["final_checkpoint"], "L": resolved["data"]["seq_len"]}
    longer = longer_windows(name, run)
    prompt = "春" if name == "tang" else "The king"
    return {
        "corpus": name, "variant": variant, "parameters": scored["parameters"],
        "train tok/s": scored["train tok/s (median)"], "steps": scored["steps"], "L": run["L"],
        "BPC L": scored["BPC"], "BPC 2L": longer["BPC 2L"], "BPC 4L": longer["BPC 4L"],
        "decode tok/s": decode_speed(run["checkpoint"], prompt),
        "settings": scored["settings"], "train() wall s": scored["train() wall s"],
        "threads": scored["threads"],
    }


def run(quick: bool = False, minutes: float | None = None, corpora: tuple = ("tang", "shakespeare"),
        variants: tuple | None = None, steps: int | None = None) -> dict:
    minutes = minutes or (1.0 if quick else MINUTES)
    steps = steps or (STEPS // 3 if quick else STEPS)
    rows, summary = [], {}
    for name in corpora:
        measured = [measure(name, variant, minutes, steps) for variant in (variants or VARIANTS)]
        rows += measured
        best = min(measured, key=lambda r: r["BPC L"])
        summary[f"{name} best BPC (variant)"] = f"{best['BPC L']:.3f} ({best['variant']})"
        for r in measured:
            summary[f"{name} {r['variant']} BPC"] = r["BPC L"]
            if r["BPC 4L"] is not None:
                summary[f"{name} {r['variant']} BPC 4L / L"] = r["BPC 4L"] / r["BPC L"]
    summary["transformer steps (4 x 256 tokens)"] = steps
    summary["LSTM minutes"] = minutes
    return {"rows": rows, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=None, help=f"LSTM budget (default {MINUTES:g})")
    parser.add_argument("--steps", type=int, default=None, help=f"transformer steps (default {STEPS})")
    parser.add_argument("--corpus", choices=["tang", "shakespeare", "both"], default="both")
    parser.add_argument("--variant", action="append", choices=list(VARIANTS), help="only these (repeatable)")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    corpora = ("tang", "shakespeare") if args.corpus == "both" else (args.corpus,)
    result = run(minutes=args.minutes, corpora=corpora, variants=tuple(args.variant) if args.variant else None,
                 steps=args.steps)
    for row in result["rows"]:
        print(row)
    for key, value in result["summary"].items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()

"""Training throughput: our `small` preset vs transformers.LlamaForCausalLM of the same shape.

Shape d=512, 8 layers, 8/2 heads, FFN 1408, vocab 6400; batch 4 × 256 tokens;
each step is forward + backward + AdamW step. Both models start from the same
weights; steps are interleaved and medians reported, in fp32 and in each side's
default precision on this device (ours: what the trainer picks; the reference:
bf16 autocast where the device has bf16, as a user would set in HF Trainer).
MFU is against a bf16 / fp32 matmul peak measured in this same run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile

NAME = "train_throughput"
DESCRIPTION = "training tokens/s of the small preset vs LlamaForCausalLM (fp32 and default precision)"


def _models():
    import torch
    from transformers import LlamaForCausalLM

    from minimind import MiniMindConfig, MiniMindForCausalLM

    torch.manual_seed(0)
    ours = MiniMindForCausalLM(MiniMindConfig.from_preset("small"))
    with tempfile.TemporaryDirectory() as tmp:
        ours.save_pretrained(tmp)
        with open(f"{tmp}/config.json", "w") as fh:
            json.dump(ours.config.to_llama_dict(), fh)
        ref = LlamaForCausalLM.from_pretrained(tmp, dtype=torch.float32, attn_implementation="sdpa")
    return ours.train(), ref.train()


def _step_fn(model, optimizer, batch, autocast_dtype):
    import torch

    def step():
        ctx = torch.autocast("cpu", dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
        with ctx:
            loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def run(quick: bool = False, batch: int = 4, seq: int = 256) -> dict:
    import torch

    from benchmarks._harness import interleaved_medians
    from minimind.training.perf import flops_per_token, matmul_peak_flops
    from minimind.training.precision import bf16_supported

    ours, ref = _models()
    data = torch.randint(5, 6400, (batch, seq), generator=torch.Generator().manual_seed(1))
    tokens = batch * seq
    bf16 = torch.bfloat16 if bf16_supported("cpu") else None
    fpt = flops_per_token(ours.config, seq)
    peaks = {"fp32": matmul_peak_flops("cpu", torch.float32)}
    if bf16:
        peaks["bf16"] = matmul_peak_flops("cpu", torch.bfloat16)
    rows = []
    repeats = 3 if quick else 7
    for label, dtype in [("fp32", None)] + ([("default (bf16 autocast)", bf16)] if bf16 else []):
        ours_opt = torch.optim.AdamW(ours.parameters(), lr=1e-4, fused=True)
        ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-4)
        times = interleaved_medians({"ours": _step_fn(ours, ours_opt, data, dtype),
                                     "reference": _step_fn(ref, ref_opt, data, dtype)},
                                    repeats=repeats, warmup=2)
        peak = peaks["bf16" if dtype else "fp32"]
        for side in ("ours", "reference"):
            tps = tokens / times[side]
            rows.append({"precision": label, "model": side, "tokens/s": tps, "step ms": times[side] * 1000,
                         "MFU": fpt * tps / peak})
        rows.append({"precision": label, "model": "ratio ours/ref",
                     "tokens/s": times["reference"] / times["ours"], "step ms": "", "MFU": ""})
    ratios = {r["precision"]: r["tokens/s"] for r in rows if r["model"] == "ratio ours/ref"}
    summary = {f"speedup {k}": v for k, v in ratios.items()}
    summary.update({f"matmul peak {k} GFLOP/s": v / 1e9 for k, v in peaks.items()})
    return {"rows": rows, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from benchmarks._harness import machine, table

    result = run(args.quick)
    print(machine())
    print(table(result["rows"]))
    print(result["summary"])


if __name__ == "__main__":
    main()

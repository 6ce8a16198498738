"""Training throughput: our `small` preset vs transformers.LlamaForCausalLM of the same shape.

Shape d=512, 8 layers, 8/2 heads, FFN 1408, vocab 6400; batch 4 × 256 tokens;
each step is forward + backward + gradient clipping + AdamW step. Both models
start from the same weights; after a warm-up the two sides alternate step by
step and medians are reported. Three comparisons:

- fp32 vs fp32 (ours: fused AdamW; reference: torch AdamW);
- bf16 autocast vs bf16 autocast (as a user would set in HF Trainer), when the CPU has bf16;
- default settings vs default settings: ours is exactly what `minimind train` does
  on this device (the trainer's precision, the optimizer its set-up builds: `auto`
  takes Muon only where its update is cheap beside a step, else fused AdamW with
  decay groups; and its regional torch.compile of the decoder layers, the compile
  time measured on the first steps, excluded from the timed ones and reported
  separately); the reference is a stock transformers model in its defaults (fp32,
  torch AdamW). Interleaved with them, our model eager at the trainer's precision
  with fused AdamW: `defaults / eager, ours` must not fall below 1 (at 83f105a a
  Muon update dearer than the step made the defaults 3.4 times slower than that).

MFU is model FLOPs (6·N + attention, per token) × tokens/s over a matmul peak
of the row's precision measured in this same run (best of several trials).
"""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
import time

NAME = "train_throughput"
DESCRIPTION = "training tokens/s of the small preset vs LlamaForCausalLM (fp32, bf16, default settings)"
# like for like first (same precision, same settings); default vs default beside it, labelled
HEADLINE = ["speedup fp32", "speedup bf16 autocast", "speedup default settings", "defaults / eager, ours",
            "ours MFU default settings"]


def _models(config, device: str = "cpu"):
    import torch
    from transformers import LlamaForCausalLM

    from minimind import MiniMindForCausalLM

    torch.manual_seed(0)
    ours = MiniMindForCausalLM(config)
    with tempfile.TemporaryDirectory() as tmp:
        ours.save_pretrained(tmp)
        with open(f"{tmp}/config.json", "w") as fh:
            json.dump(ours.config.to_llama_dict(), fh)
        ref = LlamaForCausalLM.from_pretrained(tmp, dtype=torch.float32, attn_implementation="sdpa")
    return ours.to(device).train(), ref.to(device).train()


def _step_fn(model, optimizer, batch, autocast, average=None):
    """One training step as the trainer takes it: loss under autocast, backward, clip, AdamW, and the
    weight average's update where the trainer keeps one (`average`, optim.ema)."""
    import torch

    def step():
        with autocast():
            loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if average is not None:
            average.update(LONG_RUN_STEP)
        return loss.item()
    return step


LONG_RUN_STEP = 100_000  # the step a long run's weight average updates at (its decay at optim.ema's value)


def _trainer_defaults(model, tokens: int, device: str = "cpu"):
    """(autocast context factory, optimizer, its name, compiled layers, precision name, weight average
    or None) as `minimind train` sets them up for a long pretraining run of `model` at `tokens` a step
    on this device (the set-up's own build_optimizer: `auto` decides between Muon and AdamW on the
    model; optim.ema's average of the weights, updated after each step)."""
    from minimind.training import TrainConfig
    from minimind.training.compiling import MIN_STEPS_TO_COMPILE, compile_layers
    from minimind.training.ema import WeightAverage
    from minimind.training.precision import Precision, bf16_supported
    from minimind.training.setup import build_optimizer

    kind = device.split(":")[0]
    cfg = TrainConfig.from_dict({"data": {"files": ["corpus.txt"]}, "model": {"preset": "small"}}).resolved(
        kind, bf16_supported(device))
    precision = Precision(cfg.precision, kind)
    optimizer = build_optimizer(cfg, model, device, tokens)
    layers = compile_layers(model, cfg, MIN_STEPS_TO_COMPILE, lambda _msg: None)
    average = WeightAverage(model, cfg.optim.ema) if cfg.optim.ema else None
    return precision.autocast, optimizer, cfg.optim.name, layers, cfg.precision, average


def run(quick: bool = False, tiny: bool = False, batch: int = 4, seq: int = 256) -> dict:
    import torch

    from benchmarks._harness import bench_device, interleaved_medians
    from minimind import MiniMindConfig
    from minimind.training.compiling import MIN_GAIN
    from minimind.training.perf import flops_per_token, matmul_peak_flops
    from minimind.training.precision import bf16_supported

    config = MiniMindConfig.from_preset("small")
    if tiny:  # the smoke test: a toy shape, no compilation
        config = MiniMindConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
        batch, seq = 2, 32
    device = bench_device()
    if device.startswith("cuda") and not tiny:
        batch, seq = 16, 1024  # 4 x 256 would leave a GPU idle; the same shape, a batch that fills it
    ours, ref = _models(config, device)
    data = torch.randint(5, config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(1)).to(device)
    tokens = batch * seq
    bf16 = bf16_supported(device)
    fpt = flops_per_token(ours.config, seq)
    trials = 2 if tiny else 5
    peaks = {"fp32": matmul_peak_flops(device, torch.float32, trials=trials)}
    if bf16:
        peaks["bf16"] = matmul_peak_flops(device, torch.bfloat16, trials=trials)
    repeats = 7 if tiny else 3 if quick else 9  # (a toy step takes milliseconds: medians of 7 steady them)
    fp32 = contextlib.nullcontext

    def bf16_autocast():
        return torch.autocast(device.split(":")[0], dtype=torch.bfloat16)

    rows, summary = [], {}

    def compare(label: str, ours_step, ours_peak: str, ref_step, ref_peak: str, note: str, beside=None) -> dict:
        steps = {"ours": ours_step, "reference": ref_step, **({"beside": beside} if beside else {})}
        times = interleaved_medians(steps, repeats=repeats, warmup=2)
        for side, peak in (("ours", ours_peak), ("reference", ref_peak)):
            tps = tokens / times[side]
            rows.append({"settings": label, "model": side, "tokens/s": tps, "step ms": times[side] * 1000,
                         "MFU": fpt * tps / peaks[peak], "MFU against": f"{peak} peak",
                         "how": note if side == "ours" else ref_note[label]})
        ratio = times["reference"] / times["ours"]
        rows.append({"settings": label, "model": "ratio ours/ref", "tokens/s": ratio})
        summary[f"speedup {label}"] = ratio
        summary[f"ours tok/s {label}"] = tokens / times["ours"]
        summary[f"reference tok/s {label}"] = tokens / times["reference"]
        summary[f"ours MFU {label}"] = fpt * tokens / times["ours"] / peaks[ours_peak]
        return times

    ref_note = {"fp32": "fp32, torch AdamW", "bf16 autocast": "bf16 autocast, torch AdamW",
                "default settings": "stock defaults: fp32, torch AdamW"}
    eager = copy.deepcopy(ours)
    compare("fp32", _step_fn(eager, torch.optim.AdamW(eager.parameters(), lr=1e-4, fused=True), data, fp32), "fp32",
            _step_fn(ref, torch.optim.AdamW(ref.parameters(), lr=1e-4), data, fp32), "fp32", "fp32, fused AdamW")
    if bf16:
        compare("bf16 autocast",
                _step_fn(eager, torch.optim.AdamW(eager.parameters(), lr=1e-4, fused=True), data, bf16_autocast),
                "bf16", _step_fn(ref, torch.optim.AdamW(ref.parameters(), lr=1e-4), data, bf16_autocast), "bf16",
                "bf16 autocast, fused AdamW")

    autocast, optimizer, optimizer_name, layers, precision, average = _trainer_defaults(ours, tokens, device)
    if tiny:
        for layer in layers:
            layer._compiled_call_impl = None  # keep the smoke test fast
        layers = []
    ours_step = _step_fn(ours, optimizer, data, autocast, average)
    start = time.perf_counter()
    ours_step()  # compiles the forward (first call) and the backward
    first = time.perf_counter() - start
    ours_step()
    start = time.perf_counter()
    ours_step()
    steady = time.perf_counter() - start
    # beside them, interleaved: our model eager at the trainer's precision with fused AdamW (the
    # defaults must never be slower than that: a Muon update dearer than the step made them 3x slower)
    eager_step = _step_fn(eager, torch.optim.AdamW(eager.parameters(), lr=1e-4, fused=True), data, autocast)
    times = compare("default settings", ours_step, precision if precision in peaks else "fp32",
                    _step_fn(ref, torch.optim.AdamW(ref.parameters(), lr=1e-4), data, fp32), "fp32",
                    f"minimind train defaults: {precision} autocast, {optimizer_name} "
                    + ("(Muon on the layers' matrices, fused AdamW on the rest)" if optimizer_name == "muon"
                       else "(fused)") + ", "
                    + (f"torch.compile of {len(layers)} decoder layers" if layers else "eager")
                    + (f", weight average (optim.ema {average.decay:g})" if average else ""),
                    beside=eager_step)
    del eager
    rows.append({"settings": "default settings", "model": "ours eager", "tokens/s": tokens / times["beside"],
                 "step ms": times["beside"] * 1000, "how": f"{precision} autocast, fused AdamW, eager (interleaved "
                                                          "with the row above)"})
    summary["defaults / eager, ours"] = times["beside"] / times["ours"]
    # (the trainer's compile trial keeps compiled layers by the same rule, from its own timed steps)
    summary["compile: auto keeps the compiled layers"] = bool(layers) and times["ours"] <= (1 - MIN_GAIN) * times["beside"]
    summary["default optimizer"] = optimizer_name
    summary["compile s (first step minus a steady one, excluded above)"] = max(first - steady, 0.0) if layers else 0.0
    summary.update({f"matmul peak {k} GFLOP/s": v / 1e9 for k, v in peaks.items()})
    summary["threads"] = torch.get_num_threads()
    summary["device"] = device
    summary["shape"] = (f"d={config.hidden_size}, {config.num_hidden_layers} layers, batch {batch} x {seq}, "
                        f"{fpt / 1e6:.0f} MFLOP/token")
    return {"rows": rows, "summary": summary}


def main() -> None:
    from benchmarks._harness import standalone

    standalone(run, __doc__)


if __name__ == "__main__":
    main()

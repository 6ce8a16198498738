"""Where the time goes: one training step and one decode step of the `small` preset, profiled.

Two views of each, because on a small shared CPU the profiler's own cost can
swamp what it measures (it was seen to stretch every op to ~7 ms while the CPU
was shared): the profiler's check row says how much longer the profiled step
took than the same step unprofiled, and the manual rows time the parts directly.

- Training (batch 4 x 256, the trainer's default settings: its precision, fused
  AdamW, compiled decoder layers): manual medians of forward, loss, backward,
  clipping and the optimizer step; the forward split by module kind (eager copy,
  timed with module hooks); torch.profiler's top ops by self time.
- Decode (the engine's forward, fp32, batch 1, cache at ~100 positions): one token step
  against its weight matmuls alone, its attention calls alone, and the rest
  (norms, rotary, cache writes, Python); the matmuls' weight bytes per second
  against this machine's read bandwidth (a large tensor sum), which shows
  whether the step is bandwidth-bound; torch.profiler's top ops.

Chrome traces (open in chrome://tracing or https://ui.perfetto.dev) and full
top-op tables are written to benchmarks/profiles/ (not in git).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

NAME = "step_profile"
DESCRIPTION = "time breakdown of a training step and a decode step (manual timing + torch.profiler)"
HEADLINE = ["train: backward share %", "decode: matmul share %", "decode: matmul GB/s vs read bandwidth",
            "profiler inflation (train)"]
OUT = Path(__file__).resolve().parent / "profiles"
BATCH, SEQ = 4, 256


def _median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _profile(fn, name: str, steps: int = 1) -> tuple[list[dict], float]:
    """Run `fn` `steps` times under torch.profiler; write the trace and the table; (top ops, wall ms per step)."""
    from torch.profiler import ProfilerActivity, profile

    OUT.mkdir(parents=True, exist_ok=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        wall = (time.perf_counter() - start) * 1000 / steps
    prof.export_chrome_trace(str(OUT / f"{name}.json"))
    averages = prof.key_averages()
    (OUT / f"{name}_top_ops.txt").write_text(averages.table(sort_by="self_cpu_time_total", row_limit=40))
    ops = sorted(averages, key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in ops) or 1.0
    top = [{"part": e.key, "ms": e.self_cpu_time_total / 1000 / steps, "share of step %": 100 * e.self_cpu_time_total / total,
            "calls": e.count // steps} for e in ops[:8]]
    return top, wall


# ---------------------------------------------------------------- training

class _ModuleTimer:
    """Wall time spent inside modules of each kind during a forward (hooks; eager models only)."""

    def __init__(self, model):
        from minimind.model import MLP, Attention, RMSNorm

        self.spent: dict[str, float] = {}
        self._starts: dict[int, float] = {}
        self._handles = []
        kinds = {Attention: "attention (all)", MLP: "MLP (gate/up/down + SiLU)", RMSNorm: "RMSNorm"}
        for module in model.modules():
            label = next((v for k, v in kinds.items() if isinstance(module, k)), None)
            if label:
                self._watch(module, label)
        for module in model.modules():
            if isinstance(module, Attention):
                for proj in (module.q_proj, module.k_proj, module.v_proj, module.o_proj):
                    self._watch(proj, "attention projections")
        self._watch(model.lm_head, "LM head")
        self._watch(model.model.embed_tokens, "embedding")

    def _watch(self, module, label: str) -> None:
        def pre(mod, args):
            self._starts[id(mod)] = time.perf_counter()

        def post(mod, args, out):
            self.spent[label] = self.spent.get(label, 0.0) + time.perf_counter() - self._starts.pop(id(mod))

        self._handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


def _train_rows(quick: bool, tiny: bool) -> tuple[list[dict], dict]:
    import copy

    import torch

    from benchmarks.train_throughput import LONG_RUN_STEP, _trainer_defaults
    from minimind import MiniMindConfig, MiniMindForCausalLM
    from minimind.model import causal_lm_loss

    config = MiniMindConfig.from_preset("small")
    batch, seq = BATCH, SEQ
    if tiny:
        config = MiniMindConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2)
        batch, seq = 2, 32
    torch.manual_seed(0)
    model = MiniMindForCausalLM(config).train()
    eager = copy.deepcopy(model)
    autocast, optimizer, _, layers, precision, average = _trainer_defaults(model, batch * seq)
    if tiny:
        for layer in layers:
            layer._compiled_call_impl = None
        layers = []
    ids = torch.randint(5, config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(1))
    params = [p for p in model.parameters() if p.requires_grad]
    marks: dict[str, list[float]] = {k: [] for k in ("forward", "loss", "backward", "clip", "optimizer",
                                                     "weight average")}

    def step(record: bool = True) -> None:
        t0 = time.perf_counter()
        with autocast():
            logits = model(input_ids=ids).logits
            t1 = time.perf_counter()
            loss = causal_lm_loss(logits, ids)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        t4 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t5 = time.perf_counter()
        if average is not None:  # (optim.ema: the trainer's default for a new model)
            average.update(LONG_RUN_STEP)
        t6 = time.perf_counter()
        if record:
            for key, a, b in (("forward", t0, t1), ("loss", t1, t2), ("backward", t2, t3), ("clip", t3, t4),
                              ("optimizer", t4, t5), ("weight average", t5, t6)):
                marks[key].append((b - a) * 1000)

    start = time.perf_counter()
    step(False)  # compiles
    compile_s = time.perf_counter() - start
    step(False)
    repeats = 2 if tiny else 5 if quick else 9
    for _ in range(repeats):
        step()
    phases = {k: statistics.median(v) for k, v in marks.items()}
    total = sum(phases.values())
    how = f"{precision} autocast, fused AdamW, " + ("compiled layers" if layers else "eager")
    rows = [{"step": "train", "source": f"manual ({how})", "part": k, "ms": v, "share of step %": 100 * v / total}
            for k, v in phases.items()]

    timer_model = eager
    timer = _ModuleTimer(timer_model)

    def forward_only():
        with torch.no_grad(), autocast():
            timer_model(input_ids=ids)

    forward_only()
    timer.spent.clear()
    forward_ms = _median_ms(forward_only, repeats)
    spent = {k: v * 1000 / repeats for k, v in timer.spent.items()}
    timer.close()
    spent["attention core (rotary + sdpa + reshapes)"] = spent.pop("attention (all)") - spent["attention projections"]
    spent["other (residual adds, rotary tables)"] = forward_ms - sum(spent.values())
    rows += [{"step": "train", "source": "manual: eager forward by module (no grad)", "part": k, "ms": v,
              "share of step %": 100 * v / forward_ms} for k, v in sorted(spent.items(), key=lambda kv: -kv[1])]

    top, wall = _profile(step, "train_step")
    rows += [{"step": "train", "source": "torch.profiler top ops (self time)", **r} for r in top]
    summary = {"train: step ms (manual)": total, "train: compile s (first step)": compile_s if layers else 0.0,
               **{f"train: {k} share %": 100 * v / total for k, v in phases.items()},
               "profiler inflation (train)": wall / total}
    return rows, summary


# ---------------------------------------------------------------- decode

def _read_bandwidth() -> float:
    """Bytes per second of summing a 256 MB float32 tensor (well past any cache)."""
    import torch

    big = torch.ones(64 * 2**20)
    big.sum()
    seconds = min(_median_ms(big.sum, 3) for _ in range(2)) / 1000
    return big.numel() * 4 / seconds


def _decode_rows(quick: bool, tiny: bool) -> tuple[list[dict], dict]:
    import torch
    import torch.nn.functional as F

    from minimind import MiniMindConfig, MiniMindForCausalLM
    from minimind.inference import Weights
    from minimind.inference.forward import KVCache, forward

    config = MiniMindConfig.from_preset("small")
    if tiny:
        config = MiniMindConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2)
    torch.manual_seed(0)
    weights = Weights.of(MiniMindForCausalLM(config).eval())
    cache = KVCache(weights, 512)
    forward(weights, torch.arange(5, 101)[None], [cache])  # ~100 positions of context
    repeats = 20 if tiny else 60 if quick else 200
    token = torch.tensor([[7]])

    def step():
        cache.length = 96
        forward(weights, token, [cache])

    step()
    step_ms = _median_ms(step, repeats)
    x = torch.randn(1, config.hidden_size)
    h = torch.randn(1, config.intermediate_size)
    a = torch.randn(1, config.num_attention_heads * config.head_dim)
    layers = weights.layers
    mats = [(x, layer.qkv.t) for layer in layers] + [(a, layer.o.t) for layer in layers]
    mats += [(x, layer.gate_up.t) for layer in layers] + [(h, layer.down.t) for layer in layers]
    mats.append((x, weights.lm_head.t))

    def matmuls():
        for inp, w in mats:
            torch.mm(inp, w)

    weight_bytes = sum(w.numel() * w.element_size() for _, w in mats)
    matmul_ms = _median_ms(matmuls, repeats)
    q = torch.randn(1, config.num_attention_heads, 1, config.head_dim)
    keys, values = cache.keys[0][None, :, :97], cache.values[0][None, :, :97]

    def attention():
        with torch.inference_mode():
            for _ in layers:
                F.scaled_dot_product_attention(q, keys, values, enable_gqa=True)

    attention_ms = _median_ms(attention, repeats)
    bandwidth = _read_bandwidth()
    parts = {"weight matmuls (qkv, o, gate_up, down, LM head)": matmul_ms, "attention (sdpa)": attention_ms,
             "everything else (norms, rotary, cache writes, Python)": step_ms - matmul_ms - attention_ms}
    rows = [{"step": "decode", "source": "manual (engine forward, fp32, 1 token at ~100 positions)", "part": k,
             "ms": v, "share of step %": 100 * v / step_ms} for k, v in parts.items()]
    top, wall = _profile(step, "decode_step", steps=20)
    rows += [{"step": "decode", "source": "torch.profiler top ops (self time, per token)", **r} for r in top]
    summary = {"decode: step ms": step_ms, "decode: matmul share %": 100 * matmul_ms / step_ms,
               "decode: weight MB read per token": weight_bytes / 1e6,
               "decode: matmul GB/s": weight_bytes / matmul_ms / 1e6,
               "read bandwidth GB/s (256 MB sum)": bandwidth / 1e9,
               "decode: matmul GB/s vs read bandwidth": weight_bytes / matmul_ms * 1000 / bandwidth,
               "decode: tok/s bound by read bandwidth (fp32 weights)": bandwidth / weight_bytes,
               "profiler inflation (decode)": wall / step_ms}
    return rows, summary


def run(quick: bool = False, tiny: bool = False) -> dict:
    import torch

    train_rows, train_summary = _train_rows(quick, tiny)
    decode_rows, decode_summary = _decode_rows(quick, tiny)
    summary = {**train_summary, **decode_summary, "threads": torch.get_num_threads(),
               "files": str(OUT.relative_to(OUT.parents[1])) + "/{train_step,decode_step}{.json,_top_ops.txt}"}
    return {"rows": train_rows + decode_rows, "summary": summary}


def main() -> None:
    from benchmarks._harness import standalone

    standalone(run, __doc__)


if __name__ == "__main__":
    main()

"""Batch-1 decode: our fast path vs `transformers.LlamaForCausalLM.generate` on the same weights.

Shape: the `small` preset (d=512, 8 layers, 8/2 heads, FFN 1408, vocab 6400) with
random weights, loaded both as MiniMind (decoded by minimind.fast_decode) and as a
stock LlamaForCausalLM from the same safetensors. Batch 1, a 32-token prompt, 128
new tokens, greedy, float32 unless a row says otherwise ("approx." rows store the
weight matrices in bf16 or int8: faster reads, not exact; the "exact, int8 draft" row is
speculative: the int8 copy guesses 8 tokens, the fp32 weights check them all in one pass
and keep the fp32 greedy picks, so its tokens are the exact ones). Each configuration is warmed
up, then ours and the reference alternate and medians are reported: tokens/s over the
whole call (prefill included) and time to first token (prefill + first pick; for the
reference, taken from a streamer's first new token). "same tokens" checks exactness.

When llama-cpp-python is installed, the same weights are exported by our GGUF
writer (gguf-f16 and gguf-q8_0) and decoded by llama.cpp with as many threads as
the row's PyTorch; its TTFT is the time to the first token its generator yields.

Rows are repeated at 1 PyTorch thread and at the default thread count: on a machine
shared with other jobs, a multi-threaded op stalls whenever one of its threads is not
scheduled, so the 1-thread rows are the stable ones there.

The full run adds the API under load: 16 clients stream 64-token chat answers at
once from a live server (same model, a tokenizer trained on samples/), with
continuous batching (max_batch 16) and one request at a time (max_batch 1):
latency p50/p95, first-token p50, total tokens/s, and whether every answer equals
the same request served alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

NAME = "decode_throughput"
DESCRIPTION = "batch-1 greedy decode tok/s and time to first token vs LlamaForCausalLM.generate (small shape)"
HEADLINE = ["speedup (2 thr)", "exact speculative speedup (2 thr)", "ours TTFT ms (2 thr)",
            "greedy tokens identical", "exact speculative greedy tokens identical",
            "ours fp32 vs llama.cpp gguf-f16 (2 thr)"]

LOOKAHEAD = 8
SPECULATIVE = f"ours (fp32 exact, int8 draft + fp32 check, k={LOOKAHEAD})"
PROMPT_TOKENS = 32
NEW_TOKENS = 128
CLIENTS = 16
ANSWER_TOKENS = 64
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "tang_poems_sample.jsonl"


def _models(device: str = "cpu"):
    import torch
    from transformers import LlamaForCausalLM

    from minimind import MiniMindConfig, MiniMindForCausalLM

    torch.manual_seed(0)
    config = MiniMindConfig.from_preset("small")
    ours = MiniMindForCausalLM(config).eval()
    with tempfile.TemporaryDirectory() as folder:
        ours.save_pretrained(folder)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config.to_llama_dict(), f)
        reference = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return ours.to(device), reference.to(device)


def _time_ours(decoder, prompt: list[int], sampler_args: dict, **speculative) -> tuple[list[int], float, float]:
    """(tokens, seconds to the first token, seconds in all) of one fast-path decode
    (`speculative`: draft=..., lookahead=... for exact greedy decoding with a draft)."""
    from minimind.fast_decode import TokenSampler, stream_tokens

    sampler = TokenSampler(decoder.vocab_size, **sampler_args)
    start = time.perf_counter()
    first = None
    tokens = []
    for token in stream_tokens(decoder, prompt, sampler, NEW_TOKENS, **speculative):
        first = first or time.perf_counter() - start
        tokens.append(token)
    return tokens, first, time.perf_counter() - start


class _FirstTokenClock:
    """A generate() streamer that notes when the first new token arrives (the first put is the prompt)."""

    def __init__(self, start: float):
        self.start, self.calls, self.first = start, 0, None

    def put(self, value) -> None:
        self.calls += 1
        if self.calls == 2:
            self.first = time.perf_counter() - self.start

    def end(self) -> None:
        pass


def _time_reference(model, prompt: list[int]) -> tuple[list[int], float, float]:
    import torch

    ids = torch.tensor([prompt], device=model.device)
    start = time.perf_counter()
    clock = _FirstTokenClock(start)
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                             min_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0, streamer=clock)
    total = time.perf_counter() - start
    return out[0, len(prompt):].tolist(), clock.first, total


def _measure(fns: dict, repeats: int) -> dict:
    """Warm each up once, then alternate them `repeats` times; medians of (tok/s, TTFT ms) + last tokens."""
    for fn in fns.values():
        fn()
    samples = {name: [] for name in fns}
    tokens = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            tokens[name], first, total = fn()
            samples[name].append((NEW_TOKENS / total, first * 1000))
    return {name: (statistics.median(s[0] for s in runs), statistics.median(s[1] for s in runs), tokens[name])
            for name, runs in samples.items()}


def _agreement(a: list[int], b: list[int]) -> str:
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return "yes" if a == b else f"first {same} of {len(b)}"


def run(quick: bool = False) -> dict:
    import torch

    from benchmarks._harness import bench_device
    from minimind.fast_decode import FastDecoder

    device = bench_device()
    ours, reference = _models(device)
    prompt = torch.randint(5, ours.config.vocab_size, (PROMPT_TOKENS,),
                           generator=torch.Generator().manual_seed(0)).tolist()
    exact, half = FastDecoder(ours), FastDecoder(ours, "bf16")
    int8 = FastDecoder(ours, "int8") if device == "cpu" else None  # a CPU kernel (bandwidth-bound decode)
    default_threads = torch.get_num_threads()
    rows = []
    gguf_dir = tempfile.TemporaryDirectory()
    ggufs = _gguf_files(ours, Path(gguf_dir.name)) if device == "cpu" else {}
    thread_counts = sorted({1, default_threads}) if device == "cpu" else [default_threads]
    try:
        for threads in thread_counts:
            torch.set_num_threads(threads)
            fns = {
                "ours (fp32)": lambda: _time_ours(exact, prompt, {}),
                "reference": lambda: _time_reference(reference, prompt),
            }
            if int8 is not None:
                fns["ours (int8 weights, approx.)"] = lambda: _time_ours(int8, prompt, {})
                fns[SPECULATIVE] = lambda: _time_ours(exact, prompt, {}, draft=int8, lookahead=LOOKAHEAD)
            if not quick:
                fns["ours (bf16 weights, approx.)"] = lambda: _time_ours(half, prompt, {})
                fns["ours (fp32, sampled t=0.8 k=40 p=0.9)"] = lambda: _time_ours(
                    exact, prompt, dict(temperature=0.8, top_k=40, top_p=0.9, seed=0))
            engines = _llama_cpp_engines(ggufs, threads)
            fns.update({name: (lambda llm=llm: _time_llama_cpp(llm, prompt)) for name, llm in engines.items()})
            try:
                results = _measure(fns, repeats=2 if quick else 5)
            finally:
                for llm in engines.values():
                    llm.close()
            ref_speed, _, ref_tokens = results["reference"]
            for name, (speed, ttft, tokens) in results.items():
                rows.append({"threads": threads, "decoder": name, "tok/s": speed, "vs reference": speed / ref_speed,
                             "TTFT ms": ttft, "latency p50 s": "-", "latency p95 s": "-",
                             "same tokens as reference": "-" if "sampled" in name else _agreement(tokens, ref_tokens)})
    finally:
        torch.set_num_threads(default_threads)
        gguf_dir.cleanup()

    def pick(threads, name):
        return next(r for r in rows if r["threads"] == threads and r["decoder"] == name)

    summary = {"device": device}
    for threads in thread_counts:
        o, r = pick(threads, "ours (fp32)"), pick(threads, "reference")
        summary[f"ours tok/s ({threads} thr)"] = o["tok/s"]
        summary[f"reference tok/s ({threads} thr)"] = r["tok/s"]
        summary[f"speedup ({threads} thr)"] = o["vs reference"]
        summary[f"ours TTFT ms ({threads} thr)"] = o["TTFT ms"]
        summary[f"reference TTFT ms ({threads} thr)"] = r["TTFT ms"]
    if int8 is not None:
        for threads in thread_counts:
            spec = pick(threads, SPECULATIVE)
            summary[f"exact speculative tok/s ({threads} thr)"] = spec["tok/s"]
            summary[f"exact speculative speedup ({threads} thr)"] = spec["vs reference"]
        summary["exact speculative greedy tokens identical"] = all(
            pick(t, SPECULATIVE)["same tokens as reference"] == "yes" for t in thread_counts)
        fast = pick(default_threads, "ours (int8 weights, approx.)")
        summary[f"int8 speedup ({default_threads} thr)"] = fast["vs reference"]
        summary["int8 greedy agreement"] = fast["same tokens as reference"]
    for name in ("llama.cpp gguf-f16", "llama.cpp gguf-q8_0"):
        if any(r["decoder"] == name for r in rows):
            summary[f"{name} tok/s ({default_threads} thr)"] = pick(default_threads, name)["tok/s"]
            summary[f"ours fp32 vs {name} ({default_threads} thr)"] = (
                pick(default_threads, "ours (fp32)")["tok/s"] / pick(default_threads, name)["tok/s"])
    if not ggufs:
        summary["llama.cpp"] = "not measured (llama-cpp-python is not installed)"
    summary["greedy tokens identical"] = all(pick(t, "ours (fp32)")["same tokens as reference"] == "yes"
                                             for t in thread_counts)
    if not quick and SAMPLES.is_file() and device == "cpu":
        torch.set_num_threads(1)
        try:
            serving = _serving_rows(ours)
        finally:
            torch.set_num_threads(default_threads)
        rows += serving
        batched = next(r for r in serving if "batch 16" in r["decoder"])
        summary[f"API {CLIENTS} streams p50 s (batched)"] = batched["latency p50 s"]
        summary[f"API {CLIENTS} streams p95 s (batched)"] = batched["latency p95 s"]
    summary["load average (1 min) at end"] = os.getloadavg()[0]
    return {"rows": rows, "summary": summary}


def _gguf_files(model, folder: Path) -> dict[str, Path]:
    """Our GGUF exports (f16, q8_0) of `model`, with a tokenizer trained on the samples; {} without llama.cpp."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return {}
    from minimind.export.gguf import write_gguf
    from minimind.tokenizer import build_tokenizer

    texts = [json.loads(line)["text"] for line in SAMPLES.open(encoding="utf-8")]
    tokenizer = build_tokenizer(texts, vocab_size=model.config.vocab_size)
    return {f"llama.cpp gguf-{q}": write_gguf(model, tokenizer, folder / q, q) for q in ("f16", "q8_0")}


def _llama_cpp_engines(files: dict[str, Path], threads: int) -> dict:
    from llama_cpp import Llama

    return {name: Llama(model_path=str(path), n_ctx=512, n_threads=threads, n_threads_batch=threads,
                        verbose=False) for name, path in files.items()}


def _time_llama_cpp(llm, prompt: list[int]) -> tuple[list[int], float, float]:
    """(tokens, seconds to the first token, seconds in all) of llama.cpp's own greedy loop."""
    tokens = []
    start = time.perf_counter()
    first = None
    for token in llm.generate(prompt, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, reset=True):
        first = first or time.perf_counter() - start
        tokens.append(int(token))
        if len(tokens) == NEW_TOKENS:
            break
    return tokens, first, time.perf_counter() - start


@contextlib.contextmanager
def _serve(folder: str, max_batch: int):
    """`python -m minimind serve` in its own process (so the clients here do not share its GIL)."""
    import subprocess
    import sys

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"}
    env.pop("MINIMIND_API_KEY", None)
    proc = subprocess.Popen([sys.executable, "-m", "minimind", "serve", "--model", folder, "--name", "small",
                             "--port", str(port), "--threads", "1", "--max-batch", str(max_batch),
                             "--max-queue", str(CLIENTS)], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 300
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"serve exited: {proc.stderr.read()[-2000:]}")
            try:
                httpx.get(url + "/models", timeout=5)
                break
            except httpx.TransportError:
                if time.time() > deadline:
                    raise RuntimeError("serve did not start within 300 s") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _stream(url: str, body: dict) -> tuple[str, float, float, int]:
    """(text, first-token seconds, total seconds, completion tokens) of one streaming chat."""
    import httpx

    start = time.perf_counter()
    first, pieces, tokens = None, [], 0
    with httpx.stream("POST", url + "/chat/completions", json=body, timeout=600) as r:
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices", []):
                if choice["delta"].get("content"):
                    first = first or time.perf_counter() - start
                    pieces.append(choice["delta"]["content"])
    return "".join(pieces), first or 0.0, time.perf_counter() - start, tokens


def _serving_rows(model) -> list[dict]:
    """16 clients at once against a live server, batched and one at a time."""
    from minimind.tokenizer import build_tokenizer, save_tokenizer

    texts = [json.loads(line)["text"] for line in SAMPLES.open(encoding="utf-8")]
    tokenizer = build_tokenizer(texts, vocab_size=model.config.vocab_size)
    bodies = [{"model": "small", "max_tokens": ANSWER_TOKENS, "temperature": 0.8, "seed": i, "stream": True,
               "stream_options": {"include_usage": True},
               "messages": [{"role": "user", "content": texts[i][:12 + i]}]} for i in range(CLIENTS)]
    rows = []
    alone = None
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        save_tokenizer(tokenizer, folder)
        for max_batch in (16, 1):
            with _serve(folder, max_batch) as url:
                if alone is None:
                    _stream(url, bodies[0])  # warm up
                    alone = [_stream(url, b)[0] for b in bodies]
                else:
                    _stream(url, bodies[0])
                results: list = [None] * CLIENTS
                barrier = threading.Barrier(CLIENTS)

                def client(i):
                    barrier.wait()
                    results[i] = _stream(url, bodies[i])

                start = time.perf_counter()
                threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                wall = time.perf_counter() - start
            latencies = sorted(r[2] for r in results)
            rows.append({"threads": 1, "decoder": f"API, {CLIENTS} concurrent streams, max_batch {max_batch}",
                         "tok/s": sum(r[3] for r in results) / wall, "vs reference": "-",
                         "TTFT ms": statistics.median(r[1] for r in results) * 1000,
                         "latency p50 s": statistics.median(latencies),
                         "latency p95 s": latencies[round(0.95 * (CLIENTS - 1))],
                         "same tokens as reference": f"{sum(r[0] == a for r, a in zip(results, alone))}/{CLIENTS} "
                                                     "equal to the request alone"})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no bf16/sampling rows")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from benchmarks._harness import print_result

    result = run(args.quick)
    print_result(result)


if __name__ == "__main__":
    main()

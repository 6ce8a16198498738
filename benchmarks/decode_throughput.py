"""Decode speed of the inference engine, the path chat and the API use, against references run here.

Three parts, one run:

1. The `small` shape (d=512, 8 layers, 8/2 heads, FFN 1408, vocab 6400) with trained weights
   (benchmarks/export_quality.py's stand-in, pretrained on Tang poems and cached; random
   weights, labelled so, when ../shared/corpora is missing), loaded as MiniMind and as a stock
   `LlamaForCausalLM` from the same safetensors. Batch 1, a 32-token prompt, 128 new tokens
   (no stop token, so every run writes all 128), greedy, float32. Rows: our engine as chat and
   the API run it (plain, speculative or, where llama-cpp-python is installed, llama.cpp on the
   float32 weights: whichever the engine's own timings found fastest,
   minimind/inference/decoder_choice.py; its draft is llama.cpp where llama-cpp-python is
   installed, int8 otherwise: gguf_context.py), the engine with speculation off (the like-for-like
   per-token decoder), speculation always on with each draft, llama.cpp's exact decoder always on,
   `generate`, a sampled request (as chat runs it: plain, or llama.cpp's logits through the
   request's seeded sampler, timed), and llama.cpp on our own GGUF export. Where llama-cpp-python is
   installed, the engine as a user without it runs it (int8 draft, no llama.cpp) is a row of its own.
2. The shipped models (checkpoints/), a chat prompt from their held-out text, the same rows, at 1
   thread, at the default count (as the page and API run them) and at llama-cpp-python's default
   (half the cores); llama.cpp is given the row's count. Above one thread the engine also times
   requests run on one thread of the decode thread's own (minimind/inference/threads.py); the same
   engines without that, as they ran before, are rows beside them, greedy and sampled. "ours vs llama.cpp gguf-f16" compares with
   the export a user would run instead: like for like at 1 thread and at the default count, and
   each at its own default.
3. (full runs) The API under load: 16 clients stream 64-token chat answers at once from a
   live `python -m minimind serve`, batched (max_batch 16) and one at a time, and the memory
   the Studio's page and API take for one model (RSS of `python -m webapp`'s app, in its own process).

Each configuration is warmed up, then all alternate and medians are reported: tokens/s over
the whole call (prefill included) and time to first token. "same tokens" compares with
`generate`'s greedy tokens. Headline figures are at 1 PyTorch thread (the stable ones on a
shared machine); rows at the default thread count sit beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

NAME = "decode_throughput"
DESCRIPTION = "greedy decode tok/s and time to first token of the engine chat and the API use, vs generate and llama.cpp"
HEADLINE = ["small: ours (as chat/API) vs generate, 1 thread", "small: ours plain vs generate, 1 thread",
            "minimind-tang: ours vs llama.cpp gguf-f16, 1 thread",
            "minimind-tang: ours without llama-cpp-python vs llama.cpp gguf-f16, 1 thread",
            "minimind-shakespeare: ours vs llama.cpp gguf-f16, 1 thread",
            "minimind-shakespeare: ours without llama-cpp-python vs llama.cpp gguf-f16, 1 thread",
            "greedy tokens identical",
            "page + API RSS over one model copy MB"]

PROMPT_TOKENS = 32
NEW_TOKENS = 128
CLIENTS = 16
ANSWER_TOKENS = 64
ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples" / "tang_poems_sample.jsonl"
SHIPPED = ["minimind-tang", "minimind-shakespeare"]
LLAMA_CPP_DEFAULT_THREADS = max((os.cpu_count() or 2) // 2, 1)  # llama-cpp-python's n_threads when none is given
OURS = "ours: engine as chat/API run it"
OURS_INT8 = "ours without llama-cpp-python: engine as chat/API run it"
# the same engines with PyTorch passes on the process's threads only (no one-thread requests: threads.py)
OURS_SHARED = "ours, PyTorch passes on the process's threads only: engine as chat/API run it"
OURS_INT8_SHARED = "ours without llama-cpp-python, PyTorch passes on the process's threads only"
SAMPLED = "sampled t=0.8 k=40 p=0.9: "  # before an engine's label: a sampled request, as chat's defaults send
SAMPLING = {"temperature": 0.8, "top_k": 40, "top_p": 0.9, "seed": 0}
PLAIN = "ours: engine, speculation off"
SPEC_INT8 = "ours: engine, speculation on, int8 draft"
SPEC_CPP = "ours: engine, speculation on, llama.cpp draft"
CPP_EXACT = "ours: engine, llama.cpp on the float32 weights"
REFERENCE = "reference: LlamaForCausalLM.generate"


# ---------------------------------------------------------------- models

def _as_llama(model):
    import torch
    from transformers import GenerationConfig, LlamaForCausalLM

    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(model.config.to_llama_dict(), f)
        llama = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    # plain greedy, as the rows of ours: no repetition penalty from the shipped generation_config, and no
    # end-of-text token, so it writes all NEW_TOKENS (min_new_tokens would forbid the end tokens instead,
    # and its picks would leave the plain argmax)
    llama.generation_config = GenerationConfig()
    return llama


def _small(quick: bool):
    """(model, tokenizer or None, weights label) of the small shape."""
    import torch

    from minimind import MiniMindConfig, MiniMindForCausalLM

    corpus = ROOT.parent / "shared" / "corpora" / "tang_poems.jsonl"
    if corpus.is_file():
        from benchmarks.export_quality import build_stand_in
        from minimind.checkpoint import load_model, load_tokenizer_for

        steps = 30 if quick else 300
        folder = build_stand_in(steps)
        return load_model(folder), load_tokenizer_for(folder), f"trained ({steps} steps on Tang poems)"
    torch.manual_seed(0)
    return MiniMindForCausalLM(MiniMindConfig.from_preset("small")).eval(), None, "random (no ../shared corpus)"


def _chat_prompt(tokenizer, name: str) -> list[int]:
    from minimind.chat_format import encode_chat

    question = "以《春夜》为题写一首五言绝句" if "tang" in name else "Tell me of the king, and of the sea."
    return encode_chat(tokenizer, [{"role": "user", "content": question}])


# ---------------------------------------------------------------- timing

def _time_engine(engine, prompt: list[int], **sampling) -> tuple[list[int], float, float]:
    """(tokens, seconds to the first token, seconds in all) of one request through the engine."""
    from minimind.inference import Sampler

    sampler = Sampler(engine.vocab_size, **sampling)
    start = time.perf_counter()
    first, tokens = None, []
    for token in engine.submit(prompt, sampler, NEW_TOKENS):
        first = first or time.perf_counter() - start
        tokens.append(token)
    return tokens, first, time.perf_counter() - start


def _settle(engine, prompt: list[int], sampled: bool) -> None:
    """Send requests until the engine has timed both thread counts (threads.py), greedy and, with
    `sampled`, sampled: a user's first few requests, after which it keeps the faster count."""
    if engine.counts is None:
        return
    for greedy in (True, False) if sampled else (True,):
        for _ in range(20):
            if engine.counts[greedy].settled:
                break
            _time_engine(engine, prompt, **({} if greedy else SAMPLING))
            thread = engine.retire()  # (the engine records a request's timing just after its last token)
            if thread is not None:
                thread.join()


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
                             do_sample=False, pad_token_id=0, streamer=clock)
    return out[0, len(prompt):].tolist(), clock.first, time.perf_counter() - start


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


def _measure(fns: dict, repeats: int) -> dict:
    """Warm each up once, then alternate them `repeats` times; medians of (tok/s, TTFT ms) + last tokens."""
    for fn in fns.values():
        fn()
    samples = {name: [] for name in fns}
    tokens = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            tokens[name], first, total = fn()
            samples[name].append((len(tokens[name]) / total, first * 1000))
    return {name: (statistics.median(s[0] for s in runs), statistics.median(s[1] for s in runs), tokens[name])
            for name, runs in samples.items()}


def _agreement(a: list[int], b: list[int]) -> str:
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return "yes" if a == b else f"first {same} of {len(b)}"


def _gguf_engines(model, tokenizer, folder: Path, threads: int, kinds=("f16", "q8_0")) -> dict:
    """llama.cpp on our GGUF export of `model` ({} without llama-cpp-python)."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return {}
    from minimind.export.gguf import write_gguf

    if tokenizer is None:
        from minimind.tokenizer import build_tokenizer

        texts = [json.loads(line)["text"] for line in SAMPLES.open(encoding="utf-8")]
        tokenizer = build_tokenizer(texts, vocab_size=model.config.vocab_size)
    engines = {}
    for kind in kinds:
        path = write_gguf(model, tokenizer, folder / kind, kind)
        engines[f"llama.cpp gguf-{kind}"] = Llama(model_path=str(path), n_ctx=512, n_threads=threads,
                                                  n_threads_batch=threads, verbose=False)
    return engines


def _compare(label: str, model, tokenizer, prompt: list[int], threads: int, repeats: int, quick: bool,
             weights: str) -> list[dict]:
    """One model at one thread count: every decoder in turn, medians."""
    import torch

    from minimind.inference import Engine
    from minimind.inference.gguf_context import llama_cpp_installed

    torch.set_num_threads(threads)
    reference = _as_llama(model)
    # each engine made once and kept, as chat keeps the model's: its draft and timings persist
    decoders = {OURS: Engine(model), PLAIN: Engine(model, speculate=False),
                SPEC_INT8: Engine(model, speculate=True, draft="int8")}
    if llama_cpp_installed():  # then the chat's engine drafts with llama.cpp: the int8 path beside it
        decoders.update({OURS_INT8: Engine(model, draft="int8", llama_cpp=False),
                         SPEC_CPP: Engine(model, speculate=True, draft="llama.cpp"),
                         CPP_EXACT: Engine(model, llama_cpp=True)})
    if threads > 1:  # the engines as they ran before one-thread requests, like for like
        decoders[OURS_SHARED] = Engine(model, one_thread=False)
        if OURS_INT8 in decoders:
            decoders[OURS_INT8_SHARED] = Engine(model, draft="int8", llama_cpp=False, one_thread=False)
    for engine in decoders.values():  # the rows time what the engine chose, not its first trials
        _settle(engine, prompt, sampled=not quick)
    fns = {name: (lambda engine=engine: _time_engine(engine, prompt)) for name, engine in decoders.items()}
    fns[REFERENCE] = lambda: _time_reference(reference, prompt)
    if not quick:  # (a chat's default request samples)
        for name in (OURS, OURS_INT8, OURS_SHARED, OURS_INT8_SHARED):
            if name in decoders:
                fns[SAMPLED + name] = lambda engine=decoders[name]: _time_engine(engine, prompt, **SAMPLING)
    with tempfile.TemporaryDirectory() as folder:
        engines = _gguf_engines(model, tokenizer, Path(folder), threads,
                                ("f16", "q8_0") if label == "small" else ("f16",))
        fns.update({name: (lambda llm=llm: _time_llama_cpp(llm, prompt)) for name, llm in engines.items()})
        try:
            results = _measure(fns, repeats)
        finally:
            for llm in engines.values():
                llm.close()
    ref_speed, _, ref_tokens = results[REFERENCE]
    modes = {name: decoders[name].describe() for name in (OURS, OURS_INT8, OURS_SHARED, OURS_INT8_SHARED)
             if name in decoders}
    return [{"model": label, "weights": weights, "threads": threads,
             "decoder": name + (f" ({modes[name]})" if name in modes else ""), "tok/s": speed,
             "vs generate": speed / ref_speed, "TTFT ms": ttft,
             "same tokens as generate": "-" if "sampled" in name else _agreement(tokens, ref_tokens)}
            for name, (speed, ttft, tokens) in results.items()]


# ---------------------------------------------------------------- run

def run(quick: bool = False) -> dict:
    import torch

    from minimind.checkpoint import load_model, load_tokenizer_for

    default_threads = torch.get_num_threads()
    repeats = 2 if quick else 9  # medians of 9: single calls here vary by up to a third (a 789 among 1,100s)
    rows: list[dict] = []
    try:
        small, small_tokenizer, weights = _small(quick)
        prompt = torch.randint(5, small.config.vocab_size, (PROMPT_TOKENS,),
                               generator=torch.Generator().manual_seed(0)).tolist()
        for threads in sorted({1, default_threads}):
            rows += _compare("small", small, small_tokenizer, prompt, threads, repeats, quick, weights)
        for name in SHIPPED:
            folder = ROOT / "checkpoints" / name
            model, tokenizer = load_model(folder), load_tokenizer_for(folder)
            # 1 for the headline; the default as the page runs it; llama.cpp's own default beside ours
            for threads in sorted({1, default_threads, LLAMA_CPP_DEFAULT_THREADS}):
                rows += _compare(name, model, tokenizer, _chat_prompt(tokenizer, name), threads, repeats, quick,
                                 "shipped")
    finally:
        torch.set_num_threads(default_threads)

    def pick(model, threads, decoder):
        return next((r for r in rows if r["model"] == model and r["threads"] == threads
                     and r["decoder"].startswith(decoder)), None)

    summary: dict = {"threads (headline)": 1, "default threads": default_threads, "small weights": weights}
    ours = pick("small", 1, OURS)
    summary["small: ours (as chat/API) vs generate, 1 thread"] = ours["vs generate"]
    summary["small: decoder chat/API use"] = ours["decoder"]
    summary["small: ours plain vs generate, 1 thread"] = pick("small", 1, PLAIN)["vs generate"]
    summary["small: ours TTFT ms, 1 thread"] = ours["TTFT ms"]
    summary["small: generate TTFT ms, 1 thread"] = pick("small", 1, REFERENCE)["TTFT ms"]
    for name in SHIPPED:
        o, p, s = pick(name, 1, OURS), pick(name, 1, PLAIN), pick(name, 1, SPEC_INT8)
        summary[f"{name}: decoder chat/API use"] = o["decoder"]
        summary[f"{name}: speculation (int8 draft) on / off"] = s["tok/s"] / p["tok/s"]
        summary[f"{name}: ours tok/s, 1 thread"] = o["tok/s"]
        cpp = pick(name, 1, "llama.cpp gguf-f16")
        summary[f"{name}: ours vs llama.cpp gguf-f16, 1 thread"] = (
            o["tok/s"] / cpp["tok/s"] if cpp else "not measured (llama-cpp-python is not installed)")
        without = pick(name, 1, OURS_INT8)
        if cpp and without:
            summary[f"{name}: ours without llama-cpp-python vs llama.cpp gguf-f16, 1 thread"] = (
                without["tok/s"] / cpp["tok/s"])
        ours_default = pick(name, default_threads, OURS)  # as the page and API run it: the process's threads
        if default_threads > 1:  # like for like: llama.cpp given as many
            cpp = pick(name, default_threads, "llama.cpp gguf-f16")
            summary[f"{name}: ours tok/s, {default_threads} threads"] = ours_default["tok/s"]
            if cpp:
                summary[f"{name}: ours vs llama.cpp gguf-f16, {default_threads} threads each"] = (
                    ours_default["tok/s"] / cpp["tok/s"])
            # what timing one-thread requests gives at the process's count (greedy; sampled, as chat sends by default)
            for label, on, off in (("", OURS, OURS_SHARED), (" without llama-cpp-python", OURS_INT8, OURS_INT8_SHARED)):
                for prefix, request in (("", "greedy"), (SAMPLED, "sampled")):
                    a, b = pick(name, default_threads, prefix + on), pick(name, default_threads, prefix + off)
                    if a and b:
                        summary[f"{name}: ours{label}, one-thread requests timed / off, {default_threads} threads, "
                                f"{request}"] = a["tok/s"] / b["tok/s"]
        # default against default: llama-cpp-python's own n_threads (half the cores), ours at the process's
        cpp = pick(name, LLAMA_CPP_DEFAULT_THREADS, "llama.cpp gguf-f16")
        if cpp:
            summary[f"{name}: ours ({default_threads} threads) vs llama.cpp gguf-f16 "
                    f"({LLAMA_CPP_DEFAULT_THREADS}), each at its default"] = ours_default["tok/s"] / cpp["tok/s"]
    summary["greedy tokens identical"] = all(r["same tokens as generate"] == "yes" for r in rows
                                             if r["decoder"].startswith("ours") and "sampled" not in r["decoder"])
    if not quick and SAMPLES.is_file() and torch.device("cpu").type == "cpu":
        serving = _serving_rows(small)
        rows += serving
        batched = next(r for r in serving if "batch 16" in r["decoder"])
        summary[f"API {CLIENTS} streams p50 s (batched)"] = batched["latency p50 s"]
        summary[f"API {CLIENTS} streams tok/s (batched / one at a time)"] = (
            batched["tok/s"] / next(r for r in serving if "batch 1," in r["decoder"] + ",")["tok/s"])
    memory = _memory()
    rows.append({"model": "minimind-tang", "weights": "shipped", "threads": 1, "decoder": "memory (RSS MB)",
                 **{k: v for k, v in memory.items()}})
    summary["page + API RSS over one model copy MB"] = memory["API after the page MB"]
    summary["load average (1 min) at end"] = os.getloadavg()[0]
    return {"rows": rows, "summary": summary}


# ---------------------------------------------------------------- memory of one served model

MEMORY_SCRIPT = r"""
import json, sys, tempfile
from pathlib import Path

def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

from fastapi.testclient import TestClient
from webapp.app import build_app
from webapp.tabs.chat import respond

with tempfile.TemporaryDirectory() as home:
    app = build_app(home, background_jobs=False)
    ctx = app.state.context
    with TestClient(app) as client:
        client.get("/v1/models")
        before = rss()
        for _ in respond(ctx, "以《春夜》为题写一首五言绝句", [], [], "shipped:minimind-tang", None, False, "",
                         0.8, 0.9, 40, 32, 1.1):
            pass
        page = rss()
        answer = client.post("/v1/chat/completions", json={"model": "minimind-tang", "max_tokens": 32,
                             "messages": [{"role": "user", "content": "續寫：床前明月光"}]})
        assert answer.status_code == 200, answer.text
        api = rss()
        weights = ctx.models.load(ctx.model_folder("shipped:minimind-tang")).memory_bytes() / 2**20
    print(json.dumps({"model in memory MB": weights, "page chat loaded the model MB": page - before,
                      "API after the page MB": api - page, "loaded copies": len(ctx.models.loaded())}))
"""


def _memory() -> dict:
    """RSS growth of the Studio (page + API in one process) serving the shipped Tang model."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"memory probe failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- the API under load

@contextlib.contextmanager
def _serve(folder: str, max_batch: int):
    """`python -m minimind serve` in its own process (so the clients here do not share its GIL)."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    env.pop("MINIMIND_API_KEY", None)
    proc = subprocess.Popen([sys.executable, "-m", "minimind", "serve", "--model", folder, "--name", "small",
                             "--port", str(port), "--threads", "1", "--max-batch", str(max_batch),
                             "--max-queue", str(CLIENTS)], cwd=ROOT, env=env,
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
            rows.append({"model": "small", "weights": "as above", "threads": 1,
                         "decoder": f"API, {CLIENTS} concurrent streams, max_batch {max_batch}",
                         "tok/s": sum(r[3] for r in results) / wall, "vs generate": "-",
                         "TTFT ms": statistics.median(r[1] for r in results) * 1000,
                         "latency p50 s": statistics.median(latencies),
                         "latency p95 s": latencies[round(0.95 * (CLIENTS - 1))],
                         "same tokens as generate": f"{sum(r[0] == a for r, a in zip(results, alone))}/{CLIENTS} "
                                                    "equal to the request alone"})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no sampled or API rows")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from benchmarks._harness import print_result

    result = run(args.quick)
    print_result(result)


if __name__ == "__main__":
    main()

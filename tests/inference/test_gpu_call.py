"""Decoding in GPU calls (ZeroGPU), through the ZeroGPU stand-in: each answer of the chat and of /v1
decodes in a forked worker that streams its tokens back, with the same text as the app process's own
engine, and a stream closed early ends its call."""

import json
import os
import subprocess
import sys

import httpx
import pytest
import torch
from helpers import ROOT, tiny_config
from serving.test_serving import serve
from zerogpu_standin import StandInGpu

from minimind import MiniMindForCausalLM
from minimind.generation import chat, complete
from minimind.inference.gpu_call import GpuCallEngine
from minimind.registry import ModelRegistry
from minimind.sampling_params import SamplingParams
from minimind.serving import create_app
from minimind.tokenizer import save_tokenizer

Q = [{"role": "user", "content": "床前明月光"}]
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=24)


@pytest.fixture(scope="module")
def folder(tmp_path_factory, tokenizer):
    base = tmp_path_factory.mktemp("tiny")
    torch.manual_seed(0)
    MiniMindForCausalLM(tiny_config()).eval().save_pretrained(base)
    save_tokenizer(tokenizer, base)
    return base


def test_an_answer_decoded_in_a_gpu_call_is_the_local_engines(folder):
    gpu = StandInGpu()
    local, remote = ModelRegistry().load(folder), ModelRegistry(gpu_calls=gpu).load(folder)
    assert isinstance(remote.engine, GpuCallEngine) and remote.engine.vocab_size == local.engine.vocab_size
    want = chat(local.model, local.tokenizer, Q, GREEDY, engine=local.engine)
    got = chat(remote.model, remote.tokenizer, Q, GREEDY, engine=remote.engine)
    assert got.read() == want.read() and got.completion_tokens == want.completion_tokens
    assert got.finish_reason == want.finish_reason
    sampled = SamplingParams(temperature=0.9, top_p=0.9, seed=7, max_new_tokens=16)  # the sampler travels whole
    assert complete(remote.model, remote.tokenizer, "白日", sampled, engine=remote.engine).read() == \
        complete(local.model, local.tokenizer, "白日", sampled, engine=local.engine).read()
    assert [c["outcome"] for c in gpu.calls] == ["ok", "ok"]
    assert next(remote.model.parameters()).device.type == "cpu"  # the app process's copy never moved


def test_a_stream_closed_early_ends_its_gpu_call(folder):
    gpu = StandInGpu()
    remote = ModelRegistry(gpu_calls=gpu).load(folder)
    generation = complete(remote.model, remote.tokenizer, "白日依山盡", SamplingParams(temperature=0.0, max_new_tokens=200),
                          engine=remote.engine)
    next(generation)
    generation.close()
    assert gpu.calls[-1]["outcome"] == "closed" and gpu.calls[-1]["seconds"] < 10


def test_v1_answers_through_gpu_calls(folder):
    local = ModelRegistry()
    local.add_folder(folder, name="tiny")
    gpu = StandInGpu()
    remote = ModelRegistry(gpu_calls=gpu)
    remote.add_folder(folder, name="tiny")
    body = {"model": "tiny", "messages": Q, "temperature": 0, "max_tokens": 16}
    answers = []
    for registry in (local, remote):
        with serve(create_app(registry)) as url:
            reply = httpx.post(url + "/chat/completions", json=body, timeout=60)
            assert reply.status_code == 200, reply.text
            answers.append(reply.json()["choices"][0]["message"]["content"])
            streamed = httpx.post(url + "/chat/completions", json={**body, "stream": True}, timeout=60)
            assert streamed.status_code == 200 and "[DONE]" in streamed.text
    assert answers[0] == answers[1] and len(gpu.calls) == 2 and all(c["outcome"] == "ok" for c in gpu.calls)


def test_a_model_decoding_in_gpu_calls_is_evicted_like_any_other(folder, tmp_path, tokenizer):
    other = tmp_path / "other"
    torch.manual_seed(1)
    MiniMindForCausalLM(tiny_config()).eval().save_pretrained(other)
    save_tokenizer(tokenizer, other)
    registry = ModelRegistry(memory_budget=1, gpu_calls=StandInGpu())  # room for one model at a time
    first = registry.load(folder)
    second = registry.load(other)  # evicts the first (the registry retires its engine)
    assert list(registry._loaded.values()) == [second] and first is not second
    assert chat(second.model, second.tokenizer, Q, GREEDY, engine=second.engine).read() is not None


# A GPU call's worker is forked from the app process. Once that process has run a parallel op on two
# threads, GNU OpenMP's team does not survive the fork (PyTorch's CPU wheels use GNU OpenMP): a function
# not wrapped in `on_one_thread_when_forked` waits in its 1024x1024 matmul until the call is killed.
FORKED_SCRIPT = """
import json, sys, torch
sys.path[:0] = [sys.argv[1]]
torch.set_num_threads(2)
torch.ones(4_000_000).add_(1)
from zerogpu_standin import StandInGpu
from minimind.hardware import on_one_thread_when_forked

def product():
    a = torch.randn(1024, 1024)
    return [torch.get_num_threads(), float((a @ a).sum())]

def products():
    yield product()
    yield product()

gpu = StandInGpu()
got = {}
try:
    got["call"] = gpu(20)(on_one_thread_when_forked(product))()
    got["stream"] = list(gpu(20)(on_one_thread_when_forked(products))())
except Exception as err:
    got["error"] = repr(err)
got["here"] = on_one_thread_when_forked(torch.get_num_threads)()
print(json.dumps(got))
"""


def test_a_gpu_call_forked_after_the_app_process_used_its_threads_runs_on_one():
    out = subprocess.run([sys.executable, "-c", FORKED_SCRIPT, str(ROOT / "tests")], cwd=ROOT, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert "error" not in got, got  # the worker's matmul finished, on one thread, called or streamed
    assert got["call"][0] == 1 and [row[0] for row in got["stream"]] == [1, 1], got
    assert got["here"] == 2  # called in this process (off ZeroGPU), the function keeps its threads

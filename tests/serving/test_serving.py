"""The OpenAI-compatible API on a live uvicorn server, driven by the official `openai` client."""

import contextlib
import json
import statistics
import threading
import time

import httpx
import openai
import pytest
import torch
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from minimind import MiniMindForCausalLM
from minimind.chat_format import encode_chat
from minimind.generation import chat
from minimind.sampling_params import SamplingParams
from minimind.serving import ModelRegistry, create_app
from minimind.tokenizer import save_tokenizer

from helpers import free_port, tiny_config

KEY = "test-key"


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@contextlib.contextmanager
def serve(app):
    """Run `app` with uvicorn on a free 127.0.0.1 port in a thread; yields the base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        assert time.time() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tokenizer):
    """A tiny model folder and a LoRA adapter folder for it."""
    from peft import LoraConfig, get_peft_model

    base = tmp_path_factory.mktemp("tiny-base")
    torch.manual_seed(0)
    model = MiniMindForCausalLM(tiny_config()).eval()
    model.save_pretrained(base)
    save_tokenizer(tokenizer, base)
    adapter = tmp_path_factory.mktemp("tiny-lora")
    torch.manual_seed(1)
    lora = get_peft_model(model, LoraConfig(r=4, lora_alpha=32, target_modules=["q_proj", "v_proj", "up_proj"],
                                            init_lora_weights=False))
    lora.save_pretrained(adapter)
    return base, adapter


@pytest.fixture(scope="module")
def registry(folders):
    base, adapter = folders
    reg = ModelRegistry()
    reg.add_folder(base, name="tiny")
    reg.add_folder(base, name="tiny-lora", adapter=adapter)
    return reg


@pytest.fixture(scope="module")
def api(registry):
    app = create_app(registry, api_key=KEY, max_queue=32)
    with serve(app) as url:
        yield url


@pytest.fixture
def client(api):
    return openai.OpenAI(base_url=api, api_key=KEY, max_retries=0, timeout=60)


def _post(url, path, body, key=KEY, **kw):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(url + path, json=body, headers=headers, timeout=60, **kw)


Q = [{"role": "user", "content": "床前明月光"}]


# ---------------------------------------------------------------- happy paths

def test_model_listing(client):
    names = [m.id for m in client.models.list()]
    assert names == ["tiny", "tiny-lora"]
    assert client.models.retrieve("tiny-lora").owned_by == "minimind"


def test_chat_completion_with_usage(client, registry):
    r = client.chat.completions.create(model="tiny", messages=Q, max_tokens=12, temperature=0)
    served = registry.get("tiny")
    expected = chat(served.model, served.tokenizer, Q, SamplingParams(temperature=0, max_new_tokens=12))
    assert r.choices[0].message.content == expected.read()
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason == expected.finish_reason
    assert r.usage.prompt_tokens == len(encode_chat(served.tokenizer, Q)) == expected.prompt_tokens
    assert r.usage.completion_tokens == expected.completion_tokens
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.id.startswith("chatcmpl-") and r.model == "tiny"


def test_streaming_chat_equals_the_whole_answer(client):
    whole = client.chat.completions.create(model="tiny", messages=Q, max_tokens=20, temperature=0.9, seed=5)
    chunks = list(client.chat.completions.create(model="tiny", messages=Q, max_tokens=20, temperature=0.9,
                                                 seed=5, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [whole.choices[0].finish_reason]
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert len({c.id for c in chunks}) == 1


def test_raw_sse_lines_end_with_done(api):
    with httpx.stream("POST", api + "/chat/completions", headers={"Authorization": f"Bearer {KEY}"}, timeout=60,
                      json={"model": "tiny", "messages": Q, "max_tokens": 5, "stream": True}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    assert json.loads(lines[-2][6:])["choices"][0]["finish_reason"] in ("stop", "length")


def test_completions_plain_and_streaming(client):
    r = client.completions.create(model="tiny", prompt="To be, or", max_tokens=10, temperature=0)
    assert r.object == "text_completion" and r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens <= 10
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="tiny", prompt="To be, or", max_tokens=10, temperature=0, stream=True))
    assert streamed == r.choices[0].text
    echoed = client.completions.create(model="tiny", prompt="To be, or", max_tokens=10, temperature=0, echo=True)
    assert echoed.choices[0].text == "To be, or" + r.choices[0].text
    default = client.completions.create(model="tiny", prompt="To be", temperature=0)
    assert default.usage.completion_tokens <= 16  # OpenAI's default max_tokens for completions


def test_stop_strings_through_the_api(client):
    free = client.completions.create(model="tiny", prompt="床前", max_tokens=12, temperature=1.0, seed=3)
    text = free.choices[0].text
    stop = text[3:5]
    assert len(stop) == 2
    cut = client.completions.create(model="tiny", prompt="床前", max_tokens=12, temperature=1.0, seed=3, stop=[stop])
    assert cut.choices[0].text == text[:text.find(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_adapter_is_served_by_name(client):
    base = client.chat.completions.create(model="tiny", messages=Q, max_tokens=12, temperature=0)
    tuned = client.chat.completions.create(model="tiny-lora", messages=Q, max_tokens=12, temperature=0)
    assert tuned.model == "tiny-lora"
    assert tuned.choices[0].message.content != base.choices[0].message.content


def test_extensions_and_content_parts(client):
    r = client.chat.completions.create(
        model="tiny", max_tokens=8, temperature=0.8, seed=1,
        messages=[{"role": "developer", "content": "be brief"},
                  {"role": "user", "content": [{"type": "text", "text": "床前"}, {"type": "text", "text": "明月光"}]}],
        extra_body={"top_k": 5, "repetition_penalty": 1.3})
    again = client.chat.completions.create(
        model="tiny", max_tokens=8, temperature=0.8, seed=1,
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "床前明月光"}],
        extra_body={"top_k": 5, "repetition_penalty": 1.3})
    assert r.choices[0].message.content == again.choices[0].message.content


# ---------------------------------------------------------------- refusals

@pytest.mark.parametrize("body,param,fragment", [
    ({"temperature": 3}, "temperature", "temperature must be in [0, 2]"),
    ({"top_p": 0}, "top_p", "top_p must be in (0, 1]"),
    ({"top_k": -5}, "top_k", "top_k must be at least 0"),
    ({"max_tokens": 0}, "max_tokens", "max_tokens must be at least 1"),
    ({"temperature": "warm"}, "temperature", "temperature must be"),
    ({"n": 2}, "n", "n must be 1"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "at most 4"),
    ({"seed": "x"}, "seed", "seed must be an integer"),
    ({"messages": []}, "messages", "non-empty list"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages", "messages[0].role"),
    ({"frequency_penalty": 0.5}, "frequency_penalty", "use repetition_penalty"),
    ({"model": None}, "model", "model is required"),
])
def test_bad_parameters_get_openai_style_400(api, body, param, fragment):
    r = _post(api, "/chat/completions", {"model": "tiny", "messages": Q, **body})
    assert r.status_code == 400
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert fragment in error["message"] and error["param"] == param
    assert error["type"] == "invalid_request_error"


def test_openai_client_raises_bad_request(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="tiny", messages=Q, temperature=-1)
    assert info.value.body["param"] == "temperature"


def test_invalid_json_and_unknown_model(api, client):
    r = httpx.post(api + "/chat/completions", content=b"{not json", timeout=30,
                   headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-4", messages=Q)
    assert info.value.body["code"] == "model_not_found" and "tiny" in info.value.body["message"]
    assert _post(api, "/completions", {"model": "nope", "prompt": "x"}).status_code == 404


def test_request_larger_than_the_context_is_a_clear_400(api):
    long = [{"role": "user", "content": "床前明月光，疑是地上霜。" * 40}]
    r = _post(api, "/chat/completions", {"model": "tiny", "messages": long})
    error = r.json()["error"]
    assert r.status_code == 400 and error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert "context of 256 tokens" in error["message"] and "max_tokens" in error["message"]
    r = _post(api, "/chat/completions", {"model": "tiny", "messages": Q, "max_tokens": 1000})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    r = _post(api, "/completions", {"model": "tiny", "prompt": "To be, or not to be " * 60, "max_tokens": 5})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"
    for route, body in (("/chat/completions", {"messages": Q}), ("/completions", {"prompt": "To be"})):
        r = _post(api, route, {"model": "tiny", **body, "max_tokens": 10**18})  # no negative room for the prompt
        error = r.json()["error"]
        assert r.status_code == 400 and error["param"] == "max_tokens", error
        assert error["message"] == ("max_tokens is 1,000,000,000,000,000,000, but the model's context holds 256 "
                                    "tokens, prompt included; ask for at most 255")


def test_api_key_is_enforced(api):
    for key in (None, "wrong-key"):
        r = httpx.get(api + "/models", headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=30)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=api, api_key="wrong-key", max_retries=0).models.list()
    assert httpx.get(api + "/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=30).status_code == 200


# ---------------------------------------------------------------- concurrency

def _stream_text(client, request: dict) -> tuple[str, float, float]:
    """(text, seconds to the first content, seconds to the end) of one streaming chat."""
    start = time.perf_counter()
    first = None
    pieces = []
    for chunk in client.chat.completions.create(stream=True, **request):
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.perf_counter() - start
            pieces.append(chunk.choices[0].delta.content)
    return "".join(pieces), first or 0.0, time.perf_counter() - start


def test_sixteen_concurrent_streams_are_correct_and_unmixed(client, record_property):
    requests = []
    for i in range(16):
        sampled = {"temperature": 1.0, "seed": 100 + i} if i % 2 else {"temperature": 0}
        requests.append({"model": "tiny-lora" if i % 4 == 3 else "tiny", "max_tokens": 24 + i,
                         "messages": [{"role": "user", "content": f"question {i}: 床前明月光"}], **sampled})
    alone = [_stream_text(client, r)[0] for r in requests]
    assert len(set(alone)) > 8  # the requests really differ, so a mix-up would show
    results: list = [None] * 16
    barrier = threading.Barrier(16)

    def worker(i):
        barrier.wait()
        results[i] = _stream_text(client, requests[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert [r[0] for r in results] == alone
    latencies = sorted(r[2] for r in results)
    first = sorted(r[1] for r in results)
    p50, p95 = statistics.median(latencies), latencies[int(0.95 * (len(latencies) - 1))]
    record_property("p50_s", round(p50, 3))
    record_property("p95_s", round(p95, 3))
    print(f"\n16 concurrent streams (tiny model, batched): latency p50 {p50:.3f}s p95 {p95:.3f}s, "
          f"first token p50 {statistics.median(first):.3f}s")


def _assert_slot_freed_then_served(app, url, body):
    """Within 10 s no request holds a slot any more, and a new (whole, not streamed) request is answered."""
    deadline = time.time() + 10
    while app.state.pool.admitted and time.time() < deadline:
        time.sleep(0.02)
    assert app.state.pool.admitted == 0
    assert httpx.post(url + "/chat/completions", json={**body, "stream": False}, timeout=60).status_code == 200


def test_a_full_queue_answers_429_and_recovers(registry):
    app = create_app(registry, max_queue=1)
    with serve(app) as url:
        codes, bodies = [], []
        barrier = threading.Barrier(6)
        body = {"model": "tiny", "messages": Q, "max_tokens": 200, "temperature": 0, "stream": True}

        def worker():
            barrier.wait()
            with httpx.stream("POST", url + "/chat/completions", json=body, timeout=60) as r:
                codes.append(r.status_code)
                r.read()
                bodies.append((r.status_code, r.headers.get("retry-after"), r.text))

        threads = [threading.Thread(target=worker) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert 200 in codes and 429 in codes
        refused = [b for b in bodies if b[0] == 429]
        error = json.loads(refused[0][2])["error"]
        assert error["code"] == "queue_full" and "busy" in error["message"] and refused[0][1] == "1"
        _assert_slot_freed_then_served(app, url, body)


def test_a_client_that_leaves_frees_its_slot(registry):
    app = create_app(registry, max_queue=1)
    with serve(app) as url:
        body = {"model": "tiny", "messages": Q, "max_tokens": 230, "temperature": 0, "stream": True}
        with httpx.stream("POST", url + "/chat/completions", json=body, timeout=60) as r:
            next(r.iter_lines())
        _assert_slot_freed_then_served(app, url, body)


def test_mounts_inside_another_app(registry):
    host = FastAPI()
    host.mount("/v1", create_app(registry, prefix=""))
    with TestClient(host) as c:
        assert [m["id"] for m in c.get("/v1/models").json()["data"]] == ["tiny", "tiny-lora"]
        r = c.post("/v1/chat/completions", json={"model": "tiny", "messages": Q, "max_tokens": 4})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 4


def test_sse_chunk_stays_on_one_line_for_splitlines_clients():
    """A generated piece may hold U+2028, U+2029 or U+0085; httpx splits lines on them."""
    from minimind.serving.app import _encode
    text = "月\u2028光\u2029照\x85地\x1c"
    event = _encode({"content": text})
    assert event.endswith("\n\n") and len(event[:-2].splitlines()) == 1
    assert json.loads(event[len("data: "):]) == {"content": text}

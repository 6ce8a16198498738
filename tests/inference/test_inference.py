"""The inference engine against the model it runs: the same logits, the same greedy tokens as
`generate`, a batch equal to its requests alone, one copy of the weights, and a sampler that behaves."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest
import torch
from transformers import LlamaForCausalLM

from minimind import MiniMindForCausalLM
from minimind.inference import Engine, EngineError, Sampler, Weights, engine_for, unsupported_reason
from minimind.inference import engine as engine_module
from minimind.inference.forward import KVCache, forward
from minimind.inference.gguf_context import llama_cpp_installed

from helpers import ROOT, tiny_config

PROMPTS = [[7, 300, 41, 99, 5], [250] * 3 + list(range(40, 70)), [11], [250, 251] * 9]
# the drafts of speculative decoding; llama.cpp's where llama-cpp-python is installed (not in CI)
NEEDS_LLAMA_CPP = [pytest.mark.llama_cpp,
                   pytest.mark.skipif(not llama_cpp_installed(), reason="llama-cpp-python is not installed")]
DRAFTS = ["int8", pytest.param("llama.cpp", marks=NEEDS_LLAMA_CPP)]

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(seed=0, **overrides):
    torch.manual_seed(seed)
    model = MiniMindForCausalLM(tiny_config(**overrides)).eval()
    with torch.no_grad():  # non-trivial norms, so their placement is tested too
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def _generate(model, prompt, n):
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                         do_sample=False, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def _greedy(engine, prompt, n, stops=()):
    return list(engine.submit(prompt, Sampler(engine.vocab_size), n, stops))


def _sampler(i):
    return Sampler(512, temperature=0.9 if i % 2 else 0.0, top_k=40, seed=i)


@pytest.mark.parametrize("overrides", [
    {},
    {"tie_word_embeddings": False},
    {"num_key_value_heads": 4},
    {"attention_impl": "eager"},
    {"rope_scaling_type": "linear", "rope_scaling_factor": 2.0},
    {"rope_scaling_type": "ntk", "rope_scaling_factor": 4.0},
    {"use_moe": True, "num_experts": 4, "num_experts_per_tok": 2},
])
def test_greedy_tokens_equal_generate(overrides):
    model = _model(**overrides)
    engine = Engine(model)
    for prompt in PROMPTS:
        assert _greedy(engine, prompt, 40) == _generate(model, prompt, 40)


@pytest.mark.parametrize("overrides", [{}, {"use_moe": True, "num_experts": 4, "num_experts_per_tok": 2}])
def test_logits_equal_the_models_forward_at_prefill_and_every_step(overrides):
    """fp32: prefill, one token at a time, a chunk after cached tokens, and a batch of sequences
    at different positions all give the full forward's logits within 1e-5."""
    model = _model(**overrides)
    w = Weights.of(model)
    ids = list(range(20, 60))
    with torch.no_grad():
        full = model(torch.tensor([ids])).logits[0]
    cache = KVCache(w, 64)
    got = [forward(w, torch.tensor([ids[:10]]), [cache])[0]]
    got += [forward(w, torch.tensor([[ids[i]]]), [cache])[0] for i in range(10, 30)]
    chunk = forward(w, torch.tensor([ids[30:40]]), [cache], all_logits=True)[0]
    expected = torch.stack([full[9]] + [full[i] for i in range(10, 30)])
    torch.testing.assert_close(torch.stack(got), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(chunk, full[30:40], atol=1e-5, rtol=1e-5)
    assert cache.length == 40

    # three sequences at different lengths, one token each per pass
    others = [list(range(100, 107)), list(range(300, 305))]
    caches = [KVCache(w, 64) for _ in range(3)]
    for seq, c in zip([ids[:20]] + others, caches):
        forward(w, torch.tensor([seq[:-3]]), [c])
    with torch.no_grad():
        fulls = [model(torch.tensor([seq])).logits[0] for seq in [ids[:20]] + others]
    for back in (3, 2, 1):
        step = torch.tensor([[seq[-back]] for seq in [ids[:20]] + others])
        rows = forward(w, step, caches)
        torch.testing.assert_close(rows, torch.stack([f[-back] for f in fulls]), atol=1e-5, rtol=1e-5)


def test_stock_llama_with_the_same_weights_decodes_the_same(tmp_path):
    model = _model(tie_word_embeddings=False)
    model.save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(model.config.to_llama_dict()))
    llama = LlamaForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    engine = Engine(llama)
    for prompt in PROMPTS[:2]:
        assert _greedy(engine, prompt, 30) == _generate(llama, prompt, 30) == _generate(model, prompt, 30)
    if llama_cpp_installed():  # llama.cpp's copies are written from MiniMind configs: it says so and steps aside
        assert "no llama.cpp decoder: llama.cpp cannot run it: the GGUF writer reads MiniMind configs, not " \
               "LlamaConfig" in engine.describe()


def test_preparing_shares_the_models_memory_and_keeps_it_a_model(tmp_path):
    model = _model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    reference = _generate(model, PROMPTS[1], 12)
    w = Weights.of(model)
    attn, mlp = model.model.layers[0].self_attn, model.model.layers[0].mlp
    fused = w.layers[0].qkv.weight
    assert attn.q_proj.weight.untyped_storage().data_ptr() == fused.untyped_storage().data_ptr()
    assert attn.v_proj.weight.untyped_storage().data_ptr() == fused.untyped_storage().data_ptr()
    assert mlp.up_proj.weight.untyped_storage().data_ptr() == w.layers[0].gate_up.weight.untyped_storage().data_ptr()
    for name, p in model.named_parameters():  # same values, and the model still computes the same
        assert torch.equal(p, before[name]), name
    assert _generate(model, PROMPTS[1], 12) == reference
    assert Weights.of(model) is w  # prepared once
    model.save_pretrained(tmp_path / "prepared")
    _model().save_pretrained(tmp_path / "plain")
    reloaded = MiniMindForCausalLM.from_pretrained(tmp_path / "prepared").eval()
    for name, p in reloaded.named_parameters():
        assert torch.equal(p, before[name]), name
    size = lambda folder: (tmp_path / folder / "model.safetensors").stat().st_size  # noqa: E731
    assert size("prepared") == size("plain")  # tied weights saved once, as before


def test_weights_are_prepared_again_after_they_change():
    model = _model()
    engine = engine_for(model)
    assert engine_for(model) is engine
    before = _greedy(engine, PROMPTS[1], 10)
    with torch.no_grad():
        model.model.norm.weight.neg_()  # logits flip sign: another argmax
    assert _greedy(engine, PROMPTS[1], 10) == _generate(model, PROMPTS[1], 10) != before


def test_a_model_the_engine_cannot_run_is_refused_with_the_reason():
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(_model(), LoraConfig(r=4, target_modules=["q_proj"], init_lora_weights=False))
    assert "merge" in unsupported_reason(peft_model)
    with pytest.raises(EngineError, match="LoRA adapter that is not merged"):
        Engine(peft_model)
    merged = peft_model.merge_and_unload().eval()
    assert _greedy(Engine(merged), PROMPTS[0], 12) == _generate(merged, PROMPTS[0], 12)


@pytest.mark.parametrize("overrides", [{}, {"use_moe": True}])
def test_a_batch_of_mixed_length_requests_equals_each_request_alone(overrides):
    model = _model(**overrides)
    lengths = [30, 12, 25, 1]
    alone = [list(Engine(model).submit(p, _sampler(i), n)) for i, (p, n) in enumerate(zip(PROMPTS, lengths))]
    engine = Engine(model, max_batch=3)  # one request has to wait for a free row
    streams = [engine.submit(p, _sampler(i), n) for i, (p, n) in enumerate(zip(PROMPTS, lengths))]
    assert [list(s) for s in streams] == alone


def test_streams_consumed_from_many_threads_and_cancelled_ones_leave():
    model = _model()
    engine = Engine(model, max_batch=8)
    results = {}

    def consume(i):
        stream = engine.submit(PROMPTS[i % 4], _sampler(i), 40)
        if i == 5:  # this client leaves after three tokens
            results[i] = [next(stream) for _ in range(3)]
            stream.close()
        else:
            results[i] = list(stream)

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for i in range(8):
        expected = list(Engine(model).submit(PROMPTS[i % 4], _sampler(i), 40))
        assert results[i] == (expected[:3] if i == 5 else expected)


def test_stop_ids_errors_and_limits_reach_the_consumer():
    engine = Engine(_model())
    free = _greedy(engine, PROMPTS[0], 12)
    stop = free[4]
    assert _greedy(engine, PROMPTS[0], 12, [stop]) == free[:free.index(stop) + 1]
    assert _greedy(engine, PROMPTS[0], 0) == []
    with pytest.raises(ValueError, match="KV cache full"):
        _greedy(engine, list(range(5, 300)), 4)  # 295 > the 256-token context
    with pytest.raises(ValueError, match="prompt is empty"):
        engine.submit([], Sampler(512), 4)
    assert len(_greedy(engine, PROMPTS[1], 3)) == 3


def test_a_request_whose_sampler_fails_ends_alone_and_the_loop_goes_on():
    """A sampling error mid-answer (say, logits that overflowed) ends that request with the error;
    the decode thread keeps serving the others and every later request."""

    class Breaks(Sampler):
        def __init__(self, after):
            super().__init__(512, temperature=0.0)
            self.after = after

        def choose(self, logits, remaining=1 << 30):
            self.after -= 1
            if self.after < 0:
                raise RuntimeError("probability tensor contains inf")
            return super().choose(logits, remaining)

    engine = Engine(_model(), max_batch=4)
    broken = engine.submit(PROMPTS[0], Breaks(after=3), 20)
    fine = engine.submit(PROMPTS[1], _sampler(0), 20)
    with pytest.raises(RuntimeError, match="inf"):
        list(broken)
    assert len(list(fine)) == 20
    assert len(_greedy(engine, PROMPTS[2], 5)) == 5


def test_the_decode_thread_ends_when_idle_and_comes_back(monkeypatch):
    monkeypatch.setattr(engine_module, "IDLE_S", 0.05)
    engine = Engine(_model())
    first = _greedy(engine, PROMPTS[0], 5)
    deadline = time.monotonic() + 5
    while engine._thread is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert engine._thread is None  # no thread holds the model while nobody asks
    assert _greedy(engine, PROMPTS[0], 5) == first


# ---------------------------------------------------------------- the sampler

def _logits(seed=0):
    return torch.randn(512, generator=torch.Generator().manual_seed(seed)) * 3


def test_seeded_sampling_is_reproducible_and_seeds_differ():
    engine = Engine(_model())
    run = lambda seed: list(engine.submit(PROMPTS[0], Sampler(  # noqa: E731
        512, temperature=1.0, top_k=50, top_p=0.95, repetition_penalty=1.2, seed=seed), 30))
    assert run(7) == run(7)
    assert run(7) != run(8)


def test_sampler_filters():
    logits = _logits()
    best = int(logits.argmax())
    assert Sampler(512, temperature=1.0, top_k=1, seed=0).choose(logits) == best
    assert Sampler(512, temperature=1.0, top_p=1e-6, seed=0).choose(logits) == best
    top3 = set(torch.topk(logits, 3).indices.tolist())
    sampler = Sampler(512, temperature=2.0, top_k=3, seed=0)
    draws = {sampler.choose(logits) for _ in range(200)}
    assert draws <= top3 and len(draws) > 1
    # top_p keeps the smallest set whose probability reaches p
    probs = torch.softmax(logits, -1)
    ordered = torch.sort(probs, descending=True)
    n = int((ordered.values.cumsum(0) < 0.5).sum()) + 1
    nucleus = set(ordered.indices[:n].tolist())
    sampler = Sampler(512, temperature=1.0, top_p=0.5, seed=1)
    assert {sampler.choose(logits) for _ in range(300)} <= nucleus


def test_repetition_penalty_pushes_seen_tokens_down():
    logits = _logits()
    best = int(logits.argmax())
    sampler = Sampler(512, repetition_penalty=1e9)
    sampler.observe([best])
    assert sampler.choose(logits) != best
    assert Sampler(512).choose(logits) == best


# ---------------------------------------------------------------- speculative greedy decoding

@pytest.mark.parametrize("draft", DRAFTS)
@pytest.mark.parametrize("prompt", PROMPTS)
def test_speculative_greedy_equals_plain_greedy(prompt, draft):
    """The draft only decides how many tokens come per exact pass: the tokens are the plain
    greedy ones, with a repetition penalty, a stop token and a budget that cuts a pass short."""
    model = _model()
    plain, fast = Engine(model, speculate=False), Engine(model, speculate=True, draft=draft)
    assert _greedy(fast, prompt, 40) == _greedy(plain, prompt, 40) == _generate(model, prompt, 40)
    assert fast.draft.kind == draft and fast.describe() == f"speculative; {draft} draft"
    penalised = lambda engine: list(engine.submit(  # noqa: E731
        prompt, Sampler(512, repetition_penalty=1.3), 37, [9]))
    assert penalised(fast) == penalised(plain)
    stop = _greedy(plain, prompt, 40)[13]
    assert _greedy(fast, prompt, 40, [stop]) == _greedy(plain, prompt, 40, [stop])


@pytest.mark.parametrize("draft", DRAFTS)
def test_a_speculative_request_joined_by_others_keeps_its_tokens(draft):
    """A greedy request decodes speculatively while alone, in batched steps while others run,
    and speculatively again after they leave: its tokens never change. (llama.cpp's one context
    then guesses after a sequence it last saw several passes before.)"""
    model = _model()
    engine = Engine(model, speculate=True, draft=draft)
    expected = _greedy(Engine(model, speculate=False), PROMPTS[1], 200)
    calls = []
    step, speculate = engine._step, engine._speculate
    engine._step = lambda active: calls.append(f"step {len(active)}") or step(active)
    engine._speculate = lambda request: calls.append("speculate") or speculate(request)
    lone = engine.submit(PROMPTS[1], Sampler(512), 200)
    others = [engine.submit(p, _sampler(i), 15) for i, p in enumerate(PROMPTS)]
    assert list(lone) == expected
    assert [list(s) for s in others] == [list(Engine(model).submit(p, _sampler(i), 15))
                                         for i, p in enumerate(PROMPTS)]
    batched = [i for i, c in enumerate(calls) if c.startswith("step") and c != "step 1"]
    assert batched and "speculate" in calls[batched[-1]:]  # batched with others, then speculative again


@pytest.mark.llama_cpp
@pytest.mark.skipif(not llama_cpp_installed(), reason="llama-cpp-python is not installed")
def test_the_llama_cpp_draft_is_the_default_and_int8_guesses_where_it_cannot():
    """With llama-cpp-python installed, a speculating engine guesses with llama.cpp by default; a
    model the GGUF cannot hold (experts) guesses with int8, and says why. After the weights change
    in place, the draft is made again from them. The tokens are the plain greedy ones throughout."""
    model = _model()
    engine = Engine(model, speculate=True)
    assert engine.draft.kind == "llama.cpp"
    passes, speculate = [], engine._speculate
    engine._speculate = lambda request: passes.append(1) or speculate(request)
    assert _greedy(engine, PROMPTS[1], 120) == _greedy(Engine(model, speculate=False), PROMPTS[1], 120)
    # its GGUF computes the same model: most guesses are kept (8.6 tokens a pass here, as int8's)
    assert len(passes) <= 120 / 6, len(passes)
    first = engine.draft.llama.context
    # counted with the weights (the registry's memory budget): at least Q8_0's 34 bytes per 32
    # weights, less than float32's 4 bytes a weight (its vocabulary and KV cache included)
    weights = sum(p.numel() for p in model.parameters() if p.dim() == 2)
    assert 34 / 32 * weights < engine.memory_bytes() - engine.weights.memory_bytes() < 4 * weights
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.mul_(-1.0)
    assert _greedy(engine, PROMPTS[1], 60) == _generate(model, PROMPTS[1], 60)
    assert engine.draft.llama.copied is engine.weights and engine.draft.llama.context is not first

    moe = _model(use_moe=True, num_experts=4, num_experts_per_tok=2)
    engine = Engine(moe, speculate=True)
    assert _greedy(engine, PROMPTS[0], 30) == _greedy(Engine(moe, speculate=False), PROMPTS[0], 30)
    assert engine.describe() == ("speculative; int8 draft (no llama.cpp draft: llama.cpp cannot run it: "
                                 "mixture-of-experts models are not supported)")


@pytest.mark.llama_cpp
@pytest.mark.skipif(not llama_cpp_installed(), reason="llama-cpp-python is not installed")
def test_the_llama_cpp_draft_copes_with_long_sequences_failed_guesses_and_a_close_from_another_thread(
        monkeypatch):
    """Past the draft's context (its KV cache is allocated whole, so it is bounded) a pass guesses
    with int8; a failed guess costs that pass its llama.cpp guesses, and GIVE_UP in a row
    end the draft; close() waits for a guess under way (at exit, from another thread: freeing
    llama.cpp under a running guess crashed the process). A pass that makes a draft is not timed."""
    from minimind.inference import gguf_context

    model = _model()
    plain = _greedy(Engine(model, speculate=False), PROMPTS[1], 80)
    monkeypatch.setattr(gguf_context, "DRAFT_CONTEXT", 64)
    engine = Engine(model, llama_cpp=False)  # (the draft alone: cpp_decoder.py has its own test)
    passes, lone = [], engine._lone
    engine._lone = lambda request: passes.append(1) or lone(request)
    assert _greedy(engine, PROMPTS[1], 80) == plain  # 33 + 80 positions: past 64, int8 guesses
    engine.retire().join(5)  # (the decode thread records its last pass after the stream ends)
    assert engine.draft.kind == "llama.cpp" and engine.draft.llama.context.context == 64
    # not timed: plain's first pass, the one that made the llama.cpp draft, and the first past its context
    # (it made the int8 draft)
    assert engine.choice.passes == len(passes) and sum(engine.choice.timed.values()) == len(passes) - 3
    assert engine.weights.drafted

    calls = []
    real = gguf_context.GgufContext.guess

    def failing(self, tokens, k):
        calls.append(k)
        if len(calls) <= gguf_context.GIVE_UP - 1:
            raise RuntimeError("a guess failed")
        return real(self, tokens, k)

    engine = Engine(model, speculate=True)
    monkeypatch.setattr(gguf_context.GgufContext, "guess", failing)
    assert _greedy(engine, PROMPTS[0], 40) == _greedy(Engine(model, speculate=False), PROMPTS[0], 40)
    assert engine.draft.kind == "llama.cpp" and len(calls) >= gguf_context.GIVE_UP  # failed one short of the limit
    monkeypatch.setattr(gguf_context.GgufContext, "guess", lambda self, tokens, k: 1 / 0)
    assert _greedy(engine, PROMPTS[0], 40) == _greedy(Engine(model, speculate=False), PROMPTS[0], 40)
    assert engine.draft.kind == "int8" and "division by zero" in engine.draft.note
    monkeypatch.setattr(gguf_context.GgufContext, "guess", real)

    draft = gguf_context.GgufContext(model, 64, 1)
    entered, release, out = threading.Event(), threading.Event(), []
    generate = draft._llm.generate

    def held(*args, **kwargs):
        entered.set()
        release.wait(5)
        yield from generate(*args, **kwargs)

    draft._llm.generate = held
    guessing = threading.Thread(target=lambda: out.append(draft.guess(PROMPTS[0], 4)))
    guessing.start()
    assert entered.wait(5)
    closing = threading.Thread(target=draft.close)
    closing.start()
    closing.join(0.3)
    assert closing.is_alive()  # waits for the guess
    release.set()
    guessing.join(5)
    closing.join(5)
    assert not closing.is_alive() and len(out[0]) == 4
    with pytest.raises(RuntimeError, match="closed"):
        draft.guess(PROMPTS[0], 4)


EXIT_WHILE_DECODING = """
import sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/inference"]
from test_inference import _model
from minimind.inference import Engine, Sampler

stream = Engine(_model(max_position_embeddings=32768), speculate=True).submit([1, 2, 3], Sampler(512), 30000)
for _, token in zip(range(300), stream):
    pass
print("exiting while it decodes", flush=True)
"""


def test_stop_ends_the_requests_under_way_and_the_process_exits_while_one_decodes():
    """At exit the engine stops its decode thread after the current pass and the drafts are
    freed: before, a thread still decoding (or guessing in llama.cpp) as the interpreter shut
    down aborted the process (rc 134 or 139)."""
    engine = Engine(_model(max_position_embeddings=4096), speculate=True)
    stream = engine.submit([1, 2, 3], Sampler(512), 4000)
    assert len([t for _, t in zip(range(50), stream)]) == 50
    thread = engine.stop()
    thread.join(5)
    assert not thread.is_alive()
    with pytest.raises(EngineError, match="the process is exiting"):
        list(stream)

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", EXIT_WHILE_DECODING, str(ROOT / "tests")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "exiting while it decodes" in done.stdout, done.stderr[-2000:]
    assert "terminate called" not in done.stderr, done.stderr[-2000:]


def test_an_unknown_draft_is_refused():
    with pytest.raises(ValueError, match="llama.cpp"):
        Engine(_model(), draft="f16")


def test_a_lone_greedy_request_is_timed_on_both_decoders_and_keeps_the_faster():
    """By default the engine times plain and speculative passes on the requests it serves and
    uses the faster. A request keeps the decoder it started with; the slower one runs again on a
    request's first pass once RECHECK passes have gone by. The tokens never change."""
    import time

    from minimind.inference import decoder_choice

    model = _model()
    expected = _greedy(Engine(model, speculate=False), PROMPTS[1], 80)
    engine = Engine(model, draft="int8", llama_cpp=False)
    assert engine.speculate is None and engine.describe() == "timed: no greedy request yet; int8 draft"
    calls = []
    step, speculate = engine._step, engine._speculate

    def slow_speculation(request):  # speculation made 100 ms slower a pass: plain must win, even under load
        calls.append("speculate")
        time.sleep(0.1)
        speculate(request)

    def requests(n):  # the passes of each of n requests
        runs = []
        for _ in range(n):
            calls.clear()
            assert _greedy(engine, PROMPTS[1], 80) == expected
            runs.append(list(calls))
        return runs

    engine._step = lambda active: calls.append("step") or step(active)
    engine._speculate = slow_speculation
    runs = requests(6)
    trials = 2 * (decoder_choice.WARMUP + decoder_choice.TRIALS)
    assert runs[0][:trials] == ["step", "speculate"] * (trials // 2)
    assert set(runs[0][trials:]) == {"step"}  # then plain, to the end of the request
    assert all(set(run[1:]) == {"step"} for run in runs[1:])  # a recheck only on a request's first pass
    rechecked = [run[0] for run in runs[1:]].count("speculate")
    assert 1 <= rechecked <= sum(map(len, runs)) // decoder_choice.RECHECK
    assert engine.describe().startswith("timed: plain for ") and ", speculative for " in engine.describe()

    # now plain is the slow one: each request keeps plain until the rechecks at requests' first
    # passes have timed speculation faster; then the next request moves, and keeps speculation
    engine._step = lambda active: calls.append("step") or time.sleep(0.02) or step(active)
    engine._speculate = lambda request: calls.append("speculate") or speculate(request)
    runs = requests(1)
    while set(runs[-1][1:]) == {"step"} and len(runs) < 8:
        runs += requests(1)
    assert set(runs[-1][1:]) == {"speculate"} and engine.choice.current == "speculative", runs
    assert all(set(run[1:]) == {"step"} for run in runs[:-1])  # (no request moved in its middle)
    assert set(requests(1)[0][1:]) == {"speculate"}


def test_decoder_choice_times_each_after_its_first_pass_and_follows_a_change():
    from minimind.inference.decoder_choice import PLAIN, RECHECK, SPECULATIVE, TRIALS, WARMUP, DecoderChoice

    choice = DecoderChoice()
    per_pass = {PLAIN: 1, SPECULATIVE: 4}
    picks = []
    for _ in range(8):  # the first (untimed) plain pass is very slow: it must not count
        name = choice.choose()
        picks.append(name)
        first = choice._runs[name] == 0
        choice.record(name, 5.0 if first and name == PLAIN else (0.010 if name == PLAIN else 0.012 * 4),
                      per_pass[name])
    assert picks == [PLAIN, SPECULATIVE] * 4
    assert choice.seconds_per_token(PLAIN) == pytest.approx(0.010)
    assert choice.seconds_per_token(SPECULATIVE) == pytest.approx(0.012)
    assert choice.choose() == PLAIN  # 10 ms a token against 12
    for _ in range(3 * RECHECK):  # speculation turns 4x faster: the recheck sees it and it takes over
        name = choice.choose()
        choice.record(name, 0.010 if name == PLAIN else 0.003 * 4, per_pass[name])
    assert choice.choose() == SPECULATIVE and choice.tokens[SPECULATIVE] > 0
    timed = {name: choice.seconds_per_token(name) for name in per_pass}
    choice.rewarm()  # the weights changed: each decoder's next pass remakes its copies, untimed
    choice.record(SPECULATIVE, 5.0, 4)
    choice.record(PLAIN, 5.0, 1)
    assert {name: choice.seconds_per_token(name) for name in per_pass} == timed
    choice.record(SPECULATIVE, 5.0, 4)
    assert choice.seconds_per_token(SPECULATIVE) > timed[SPECULATIVE]

    # weights that change before every few passes: each decoder may have run many passes and timed
    # none; the choice keeps taking turns (it once compared two missing timings and killed the thread)
    choice = DecoderChoice()
    for _ in range(2 * (WARMUP + TRIALS)):
        choice.rewarm()
        for _ in range(2):
            name = choice.choose()
            choice.record(name, 0.01, 1)
    assert choice.timed == {PLAIN: 0, SPECULATIVE: 0} and choice.seconds_per_token(PLAIN) is None
    assert choice.choose() == PLAIN
    for _ in range(2 * TRIALS):
        name = choice.choose()
        choice.record(name, 0.010 if name == PLAIN else 0.004 * 4, per_pass[name])
    assert choice.timed == {PLAIN: TRIALS, SPECULATIVE: TRIALS} and choice.choose() == SPECULATIVE


def test_three_decoders_take_turns_then_the_fastest_runs_and_the_slower_ones_are_rechecked_in_turn():
    from minimind.inference.decoder_choice import LLAMA_CPP, PLAIN, RECHECK, SPECULATIVE, TRIALS, WARMUP, DecoderChoice

    choice = DecoderChoice((PLAIN, SPECULATIVE, LLAMA_CPP))
    cost = {PLAIN: 0.010, SPECULATIVE: 0.004, LLAMA_CPP: 0.002}  # seconds a token
    picks = []
    for _ in range(3 * (WARMUP + TRIALS) + 4 * RECHECK):
        name = choice.choose()
        picks.append(name)
        choice.record(name, 8 * cost[name], 8)
    turns = 3 * (WARMUP + TRIALS)
    assert picks[:turns] == [PLAIN, SPECULATIVE, LLAMA_CPP] * (WARMUP + TRIALS)
    rechecks = [name for i, name in enumerate(picks[turns:], turns) if i % RECHECK == 0]
    assert set(rechecks) == {PLAIN, SPECULATIVE}  # each slower one in turn
    assert all(name == LLAMA_CPP for i, name in enumerate(picks[turns:], turns) if i % RECHECK)
    assert choice.describe().startswith("timed: llama.cpp for 9")
    # within SWITCH of each other, the one in use stays (each move makes the other decoder catch up)
    choice = DecoderChoice((PLAIN, SPECULATIVE, LLAMA_CPP))
    for _ in range(3 * (WARMUP + TRIALS)):
        name = choice.choose()
        choice.record(name, 8 * {PLAIN: 0.010, SPECULATIVE: 0.0021, LLAMA_CPP: 0.002}[name], 8)
    assert choice.choose() == LLAMA_CPP
    for _ in range(3):  # speculation is now 5 % faster: not enough to move
        choice.record(SPECULATIVE, 8 * 0.0019, 8)
    assert choice.seconds_per_token(SPECULATIVE) < choice.seconds_per_token(LLAMA_CPP)
    assert {choice.choose() for _ in range(RECHECK - 1) if choice.passes % RECHECK} == {LLAMA_CPP}
    for _ in range(10):  # now 40 % faster: it takes over
        choice.record(SPECULATIVE, 8 * 0.0012, 8)
    assert choice.choose() == SPECULATIVE
    choice.drop(LLAMA_CPP)  # its context failed for good: the others go on
    assert choice.choose() in (PLAIN, SPECULATIVE) and LLAMA_CPP not in choice.names
    choice.drop(SPECULATIVE)
    choice.drop(PLAIN)  # (the last one stays)
    assert choice.names == [PLAIN]


def test_a_request_keeps_its_decoder_and_the_next_one_takes_the_faster():
    """Moving a request between PyTorch and llama.cpp makes the other read what it missed, which no
    timing shows: a request keeps the decoder it started with, but for rechecks."""
    from minimind.inference.decoder_choice import LLAMA_CPP, PLAIN, RECHECK, SPECULATIVE, TRIALS, WARMUP, DecoderChoice

    choice = DecoderChoice((PLAIN, SPECULATIVE, LLAMA_CPP))
    for _ in range(3 * (WARMUP + TRIALS)):
        assert not choice.settled
        name = choice.choose()
        choice.record(name, 8 * {PLAIN: 0.010, SPECULATIVE: 0.004, LLAMA_CPP: 0.002}[name], 8)
    assert choice.settled and choice.choose() == LLAMA_CPP == choice.current
    for _ in range(10):  # speculation is now timed far faster (its rechecks, a machine that changed)
        choice.record(SPECULATIVE, 8 * 0.0005, 8)
    picks = [choice.choose(keeping=LLAMA_CPP) for _ in range(RECHECK - 1) if choice.passes % RECHECK]
    assert set(picks) == {LLAMA_CPP}  # the request keeps it; the next one moves
    assert choice.choose() == SPECULATIVE == choice.current
    choice.passes = choice._rechecked + RECHECK  # a recheck waits for a request's first pass
    assert choice.choose(keeping=SPECULATIVE) == SPECULATIVE
    assert choice.choose() != SPECULATIVE and choice.choose() == SPECULATIVE  # (one recheck, then the fastest)
    choice.drop(LLAMA_CPP)  # a decoder given up is not kept
    assert choice.choose(keeping=LLAMA_CPP) == SPECULATIVE


def test_a_pass_that_remakes_the_copies_after_the_weights_change_is_not_timed():
    """Weights changed in place (a training run in the same process): the next pass of each decoder makes the
    blocked copies and the int8 draft again, which takes far longer than decoding. The choice
    must not count it, or it would pick against a decoder for the price of one remake."""
    model = _model()
    engine = Engine(model, draft="int8", llama_cpp=False)
    _greedy(engine, PROMPTS[1], 80)
    engine.retire().join(5)
    before = {name: engine.choice.seconds_per_token(name) for name in ("plain", "speculative")}
    drafted = engine.weights
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.mul_(-1.0)
    slowed = []
    step, speculate = engine._step, engine._speculate

    def slow_first(run):
        def slowed_run(*args):
            if run not in slowed:
                slowed.append(run)
                time.sleep(2.0)
            return run(*args)
        return slowed_run

    engine._step, engine._speculate = slow_first(step), slow_first(speculate)
    turns = iter(["plain", "speculative"] * 20)  # both decoders run after the change, whichever is faster here
    engine.choice.choose = lambda **_: next(turns)
    assert _greedy(engine, PROMPTS[1], 12) == _generate(model, PROMPTS[1], 12)
    engine.retire().join(5)
    assert engine.weights is not drafted and slowed == [step, speculate]
    after = {name: engine.choice.seconds_per_token(name) for name in ("plain", "speculative")}
    # plain's decayed sums hold ~5 tokens: its 2-s pass, counted, would make it ~0.3 s a token
    # (speculation's first pass also remade the int8 draft, which leaves it untimed anyway)
    assert after["plain"] < 0.1 and after["speculative"] < 0.1, (before, after)
    assert engine.weights.drafted  # the int8 draft of the new weights


def test_a_fault_in_the_scheduler_ends_its_requests_not_the_decode_thread():
    """Whatever fails around a pass (here the decoder choice itself) reaches the requests under way
    as their error; the thread lives on, so later requests are served instead of hanging."""
    model = _model()
    engine = Engine(model, draft="int8")

    def broken(**_):
        raise RuntimeError("the choice failed")

    engine.choice.choose = broken
    with pytest.raises(RuntimeError, match="the choice failed"):
        _greedy(engine, PROMPTS[0], 10)
    del engine.choice.choose
    assert _greedy(engine, PROMPTS[0], 10) == _generate(model, PROMPTS[0], 10)


# ---------------------------------------------------------------- llama.cpp as an exact decoder

def _lively_model(seed=0):
    """The tiny model with its matrices scaled up: its greedy tokens vary from step to step (the
    plain tiny model repeats one token), so a token decoded at the wrong position shows."""
    model = _model(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and "embed" not in name:
                p.mul_(8.0)
    return model


@pytest.mark.llama_cpp
@pytest.mark.skipif(not llama_cpp_installed(), reason="llama-cpp-python is not installed")
@pytest.mark.parametrize("prompt", PROMPTS)
def test_llama_cpp_on_the_float32_weights_gives_the_plain_greedy_tokens(prompt):
    """llama.cpp computes each step's float32 logits and the request's sampler picks from them: the
    plain greedy tokens, with a repetition penalty, a stop token and a budget that ends a pass early."""
    model = _lively_model()
    plain, cpp = Engine(model, speculate=False), Engine(model, llama_cpp=True)
    passes, real = [], cpp._llama_cpp

    def counted(request):
        before = request.count
        real(request)
        passes.append(request.count - before)

    cpp._llama_cpp = counted
    expected = _greedy(plain, prompt, 100)
    assert len(set(expected)) > 20 and _greedy(cpp, prompt, 100) == expected
    cpp.retire().join(5)  # (the decode thread notes its last pass after the stream ends)
    assert passes[:-1] == [8] * 12 and passes[-1] == 3 and cpp.describe().startswith("llama.cpp")  # 1 + 99 tokens
    penalised = lambda engine: list(engine.submit(  # noqa: E731
        prompt, Sampler(512, repetition_penalty=1.3), 37, [9]))
    assert penalised(cpp) == penalised(plain)
    stop = _greedy(plain, prompt, 40)[13]
    assert _greedy(cpp, prompt, 40, [stop]) == _greedy(plain, prompt, 40, [stop])
    # a second float32 copy of the weights, counted (the registry's memory budget)
    weights = sum(p.numel() for p in model.parameters() if p.dim() == 2)
    assert cpp.memory_bytes() - cpp.weights.memory_bytes() >= 4 * weights


@pytest.mark.llama_cpp
@pytest.mark.skipif(not llama_cpp_installed(), reason="llama-cpp-python is not installed")
@pytest.mark.parametrize("draft", ["int8", "llama.cpp"])
def test_a_speculative_pass_after_llama_cpp_is_timed_on_its_own_tokens(draft):
    """After llama.cpp's passes the draft is behind too: it reads what it missed before the pass
    is timed, as PyTorch's KV cache does (else a recheck of speculation pays for the whole answer
    so far, and speculation is never chosen again where it is the faster)."""
    model = _lively_model()
    expected = _greedy(Engine(model, speculate=False), PROMPTS[1], 100)
    engine = Engine(model, draft=draft)
    turns = iter(["llama.cpp"] * 3 + ["speculative", "llama.cpp"] * 40)
    engine.choice.choose = lambda **_: next(turns)
    seen, speculate = [], engine._speculate

    def held_at_start(request):  # what the draft holds when the timed pass starts
        if draft == "int8":
            seen.append((request.draft_cache.length, len(request.tokens) - 1))
        else:
            seen.append((len(engine.draft.llama.context._held), len(request.tokens) - 1))
        speculate(request)

    engine._speculate = held_at_start
    assert _greedy(engine, PROMPTS[1], 100) == expected
    assert len(seen) >= 3 and all(held == wanted for held, wanted in seen), seen


@pytest.mark.llama_cpp
@pytest.mark.skipif(not llama_cpp_installed(), reason="llama-cpp-python is not installed")
def test_a_request_moved_between_llama_cpp_and_pytorch_keeps_its_tokens():
    """llama.cpp passes leave the request's PyTorch KV cache behind: a plain or speculative pass
    after them, and a batched step once other requests join, first bring it up to date."""
    model = _lively_model()
    expected = _greedy(Engine(model, speculate=False), PROMPTS[1], 120)
    engine = Engine(model, draft="int8")
    assert engine.choice.names == ["plain", "speculative", "llama.cpp"]
    turns = iter(["llama.cpp", "plain", "llama.cpp", "speculative", "llama.cpp", "llama.cpp"] * 40)
    engine.choice.choose = lambda **_: next(turns)
    assert _greedy(engine, PROMPTS[1], 120) == expected
    engine.retire().join(5)
    assert engine.cpp.usable and all(engine.choice.tokens[name] > 0 for name in engine.choice.names)
    assert engine.choice.tokens["llama.cpp"] > 60  # 8 a pass, 4 of each 6 passes

    engine = Engine(model, llama_cpp=True)
    started, joined = threading.Event(), threading.Event()
    real, steps = engine._llama_cpp, []
    step = engine._step
    engine._step = lambda active: steps.append(len(active)) or step(active)  # (llama_cpp=True: none alone)

    def first_waits(request):  # the others join while the lone request's cache is behind
        before = request.count
        real(request)
        steps.append(f"llama.cpp {request.count - before}")
        started.set()
        joined.wait(10)

    engine._llama_cpp = first_waits
    lone = engine.submit(PROMPTS[1], Sampler(512), 120)
    started.wait(10)
    others = [engine.submit(p, _sampler(i), 15) for i, p in enumerate(PROMPTS)]
    joined.set()
    assert list(lone) == expected
    assert [list(s) for s in others] == [list(Engine(model, speculate=False).submit(p, _sampler(i), 15))
                                         for i, p in enumerate(PROMPTS)]
    assert steps[0] == "llama.cpp 8" and 1 + len(PROMPTS) in steps  # 8 tokens, then batched with all of them


@pytest.mark.llama_cpp
@pytest.mark.skipif(not llama_cpp_installed(), reason="llama-cpp-python is not installed")
def test_llama_cpp_decoding_gives_way_to_pytorch_past_its_context_after_failures_and_where_it_cannot(
        monkeypatch):
    """Past its context a pass decodes in PyTorch; a failed call costs that pass, GIVE_UP in a row end it,
    and a model the GGUF cannot hold never decodes there: the timed engine then chooses among the
    others and says why. The tokens never change."""
    from minimind.inference import gguf_context

    model = _model()
    plain = {i: _greedy(Engine(model, speculate=False), PROMPTS[i], 80) for i in (0, 1)}
    monkeypatch.setattr(gguf_context, "DRAFT_CONTEXT", 64)
    engine = Engine(model, llama_cpp=True)
    assert _greedy(engine, PROMPTS[1], 80) == plain[1]  # 33 + 80 positions: past 64
    assert engine.cpp.context.context == 64 and engine.cpp.usable
    timed = Engine(model, draft="int8")  # the timed choice: past the context the other two take their turns
    assert _greedy(timed, PROMPTS[1], 80) == plain[1] and _greedy(timed, PROMPTS[1], 80) == plain[1]
    timed.retire().join(5)
    assert timed.choice.tokens["llama.cpp"] > 0 and min(timed.choice.timed.values()) >= 3, timed.choice.timed

    calls, real = [], gguf_context.GgufContext.logits_after

    def now_and_then(self, tokens):
        calls.append(1)
        if len(calls) % 3 == 1:
            raise RuntimeError("llama.cpp failed")
        return real(self, tokens)

    monkeypatch.setattr(gguf_context.GgufContext, "logits_after", now_and_then)
    engine = Engine(model, llama_cpp=True)
    assert _greedy(engine, PROMPTS[0], 50) == plain[0][:50]
    assert engine.cpp.usable and len(calls) > gguf_context.GIVE_UP
    monkeypatch.setattr(gguf_context.GgufContext, "logits_after", real)

    # a failure inside llama.cpp's own read, with tokens half read: the next call reads them all again
    engine = Engine(model, llama_cpp=True)
    assert _greedy(engine, PROMPTS[1], 10) == plain[1][:10]
    llm = engine.cpp.context._llm
    evals, eval_ = [], llm.eval

    def breaks_once(tokens):
        evals.append(len(tokens))
        if len(evals) == 2:
            eval_(tokens[:1])  # (part of it read, then the failure)
            raise RuntimeError("decode failed")
        return eval_(tokens)

    llm.eval = breaks_once
    assert _greedy(engine, PROMPTS[1], 60) == plain[1][:60]
    assert len(evals) > 2 and max(evals[2:]) >= len(PROMPTS[1])  # read again from the start after the failure
    monkeypatch.setattr(gguf_context.GgufContext, "logits_after", lambda self, tokens: 1 / 0)
    engine = Engine(model, draft="int8")
    assert _greedy(engine, PROMPTS[0], 80) == plain[0]
    assert not engine.cpp.usable and engine.choice.names == ["plain", "speculative"]
    assert engine.describe().endswith("; no llama.cpp decoder: division by zero")

    moe = _model(use_moe=True, num_experts=4, num_experts_per_tok=2)
    engine = Engine(moe, draft="int8")
    assert _greedy(engine, PROMPTS[0], 30) == _greedy(Engine(moe, speculate=False), PROMPTS[0], 30)
    assert "no llama.cpp decoder: llama.cpp cannot run it: mixture-of-experts" in engine.describe()
    assert "llama.cpp" not in engine.choice.names


def test_llama_cpp_decodes_only_float32_weights_on_a_cpu_small_enough_to_copy(monkeypatch):
    from minimind.inference import cpp_decoder

    monkeypatch.setattr(cpp_decoder, "llama_cpp_installed", lambda: True)
    weights = Weights.of(_model())
    assert cpp_decoder.offered(weights)
    assert not cpp_decoder.offered(Weights.of(_model().to(torch.bfloat16)))
    monkeypatch.setattr(cpp_decoder, "EXACT_MAX_BYTES", weights.param_bytes - 1)
    assert not cpp_decoder.offered(weights)
    monkeypatch.setattr(cpp_decoder, "llama_cpp_installed", lambda: False)
    assert Engine(_model()).choice.names == ["plain", "speculative"]


def test_speculation_runs_only_where_an_int8_draft_can():
    from minimind.inference.engine import speculation_possible
    from minimind.inference.weights import Weights

    assert speculation_possible(Weights.of(_model()))
    half = _model().to(torch.bfloat16)
    assert not speculation_possible(Weights.of(half))
    engine = Engine(half)
    assert engine.speculate is False and engine.choice is None and engine.describe() == "plain"


# ---------------------------------------------------------------- the engine and its model

def test_a_prepared_model_copies_pickles_and_is_not_kept_alive_by_its_engine():
    import copy
    import gc
    import io
    import weakref

    model = _model()
    expected = _greedy(engine_for(model), PROMPTS[0], 12)
    twin = copy.deepcopy(model)  # the engine (a thread, a queue, locks) is kept beside the model, not in it
    torch.save(model, io.BytesIO())
    assert _greedy(engine_for(twin), PROMPTS[0], 12) == expected
    assert engine_for(twin) is not engine_for(model)
    gone = weakref.ref(model)
    gc.disable()  # freed by reference counting alone: no model <-> engine cycle
    try:
        del model
        assert gone() is None
    finally:
        gc.enable()


def test_what_the_engine_makes_for_a_model_or_tokenizer_is_kept_beside_it_not_on_it(tokenizer):
    from minimind.inference import guard_for

    model = _model()
    engine = engine_for(model)
    guard = guard_for(tokenizer, engine.vocab_size)
    _greedy(engine, PROMPTS[0], 3)
    assert engine_for(model) is engine and guard_for(tokenizer, engine.vocab_size) is guard
    assert Weights.of(model) is Weights.of(model)
    assert [k for k in vars(model) if k.startswith("_minimind")] == []
    assert [k for k in vars(tokenizer) if k.startswith("_minimind")] == []


def test_weak_cache_makes_once_remakes_what_is_stale_and_lets_go_with_its_object():
    import gc
    import weakref

    from minimind.inference.weak_cache import WeakCache

    class Owner:
        pass

    class Value:
        def __init__(self, n):
            self.n = n

    cache, owner = WeakCache(), Owner()
    first = cache.get(owner, lambda: Value(1))
    assert cache.get(owner, lambda: Value(2)) is first
    assert cache.get(owner, lambda: Value(3), fresh=lambda v: v.n > 1).n == 3  # stale: made again
    kept = weakref.ref(cache.get(owner, lambda: Value(4), fresh=lambda v: v.n > 1))
    assert kept().n == 3 and cache.get(Owner(), lambda: Value(5)).n == 5  # another object, its own value
    gc.collect()
    del owner
    assert kept() is None  # the value went with its object


def test_weak_cache_makes_one_value_when_many_threads_ask_at_once():
    """Two first requests for a model's engine must not make two engines (two decode threads)."""
    import threading
    import time

    from minimind.inference.weak_cache import WeakCache

    class Owner:
        pass

    cache, owner, made = WeakCache(), Owner(), []

    def make():
        made.append(1)
        time.sleep(0.05)  # a slow make: the other threads arrive while it runs
        return object()

    got = []
    threads = [threading.Thread(target=lambda: got.append(cache.get(owner, make))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and len({id(v) for v in got}) == 1


def test_a_bf16_moe_model_decodes():
    model = _model(use_moe=True, num_experts=4, num_experts_per_tok=2).to(torch.bfloat16)
    tokens = _greedy(Engine(model), PROMPTS[1], 8)
    with torch.no_grad():
        first = model(torch.tensor([PROMPTS[1]])).logits[0, -1].float()
    assert len(tokens) == 8 and first[tokens[0]] >= first.max() - 0.1  # bf16 rounding may swap near-ties


@pytest.mark.llama_cpp
@pytest.mark.skipif(not llama_cpp_installed(), reason="llama-cpp-python is not installed")
def test_a_lone_sampled_request_may_decode_through_llama_cpp_with_its_own_seeded_sampler():
    """A sampled request alone in the engine is timed on plain decoding and on llama.cpp's logits; its
    seeded sampler draws from either, so the tokens are the same (as a batch gives a request alone)."""
    model = _lively_model()
    sampler = lambda: Sampler(512, temperature=0.9, top_k=40, top_p=0.95, seed=3)  # noqa: E731
    expected = list(Engine(model, speculate=False).submit(PROMPTS[1], sampler(), 120))
    assert len(set(expected)) > 20
    forced = Engine(model, llama_cpp=True)
    assert list(forced.submit(PROMPTS[1], sampler(), 120)) == expected
    assert forced.cpp.made == 1 and forced.cpp.context._held[:len(PROMPTS[1])] == PROMPTS[1]  # llama.cpp read it
    timed = Engine(model, draft="int8")
    for _ in range(2):
        assert list(timed.submit(PROMPTS[1], sampler(), 120)) == expected
    timed.retire().join(5)
    assert timed.sampled_choice.tokens["llama.cpp"] > 0 and timed.sampled_choice.tokens["plain"] > 0
    assert "of sampled tokens" in timed.describe() and timed.choice.tokens == {"plain": 0, "speculative": 0,
                                                                              "llama.cpp": 0}


@pytest.mark.llama_cpp
@pytest.mark.skipif(not llama_cpp_installed(), reason="llama-cpp-python is not installed")
def test_a_llama_cpp_context_decodes_on_the_thread_count_it_measured_and_computes_the_same(monkeypatch):
    """Made on 2 threads, a context times single tokens on 2 and on 1 and keeps the faster; the
    probe leaves nothing in its cache, and its logits are those of a context on 1 thread."""
    from minimind.inference import gguf_context

    model = _lively_model()
    timed = []
    real = gguf_context.decode_threads
    monkeypatch.setattr(gguf_context, "decode_threads", lambda llm, most, vocab: timed.append(most) or real(
        llm, most, vocab))
    two, one = gguf_context.GgufContext(model, 64, 2, exact=True), gguf_context.GgufContext(model, 64, 1, exact=True)
    try:
        assert timed == [2, 1] and two.threads in (1, 2) and one.threads == 1
        assert two._llm.n_tokens == 0 and two._held == []
        tokens = PROMPTS[1] + [5, 9, 17]
        assert abs(two.logits_after(tokens) - one.logits_after(tokens)).max() < 1e-6
    finally:
        two.close()
        one.close()

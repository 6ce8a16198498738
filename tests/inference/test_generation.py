"""chat() / complete(): parameters, chat template, whole characters, stop strings, truncation, usage."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from minimind import MiniMindForCausalLM
from minimind.errors import SamplingError
from minimind.inference import Sampler, engine_for, guard_for
from minimind.chat_format import answer_room, encode_chat, fit_messages
from minimind.generation import Generation, TextStream, chat, complete
from minimind.sampling_params import SamplingParams

from helpers import SAMPLE_TEXTS, tiny_config

POEMS = [t for t in dict.fromkeys(SAMPLE_TEXTS) if "，" in t and "。" in t]
PAIRS = [(p.split("，", 1)[0], p.split("，", 1)[1]) for p in POEMS]  # first clause -> the rest


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def poet(tokenizer):
    """A tiny model trained (a few seconds) to answer the first clause of a poem with the rest of it
    in ChatML, then <|im_end|>: real Chinese output whose tokens include UTF-8 byte fragments."""
    seqs = [encode_chat(tokenizer, [{"role": "user", "content": u}])
            + tokenizer(a + "<|im_end|>", add_special_tokens=False)["input_ids"] for u, a in PAIRS]
    width = max(map(len, seqs))
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    labels = torch.full((len(seqs), width), -100)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = labels[i, :len(s)] = torch.tensor(s)
    torch.manual_seed(0)
    model = MiniMindForCausalLM(tiny_config())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(120):
        loss = model(ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.2
    return model.eval()


@pytest.fixture
def random_model():
    torch.manual_seed(0)
    return MiniMindForCausalLM(tiny_config()).eval()


GREEDY = SamplingParams(temperature=0, max_new_tokens=40)


# ---------------------------------------------------------------- parameters

@pytest.mark.parametrize("changes,param,fragment", [
    ({"temperature": -0.1}, "temperature", "temperature must be in [0, 2]"),
    ({"temperature": 2.5}, "temperature", "temperature must be in [0, 2]"),
    ({"temperature": float("nan")}, "temperature", "temperature must be a number"),
    ({"temperature": "hot"}, "temperature", "temperature must be a number"),
    ({"top_k": -1}, "top_k", "top_k must be at least 0"),
    ({"top_k": 2.5}, "top_k", "top_k must be a whole number"),
    ({"top_p": 0.0}, "top_p", "top_p must be in (0, 1]"),
    ({"top_p": 1.5}, "top_p", "top_p must be in (0, 1]"),
    ({"repetition_penalty": 0}, "repetition_penalty", "repetition_penalty must be in [0.01, 10]"),
    ({"repetition_penalty": 1e-320}, "repetition_penalty", "repetition_penalty must be in [0.01, 10]"),
    ({"max_new_tokens": 0}, "max_new_tokens", "max_new_tokens must be at least 1"),
    ({"max_new_tokens": True}, "max_new_tokens", "must be a whole number"),
    ({"seed": -3}, "seed", "seed must be between 0"),
    ({"num_beams": 0}, "num_beams", "num_beams must be between 1 and 16"),
    ({"num_beams": 4, "temperature": 0.7}, "num_beams", "set temperature to 0"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "at most 4"),
    ({"stop": [""]}, "stop", "must not be empty"),
    ({"stop": [3]}, "stop", "list of strings"),
])
def test_bad_sampling_parameters_are_refused_clearly(changes, param, fragment):
    with pytest.raises(SamplingError) as info:
        SamplingParams(**changes)
    assert fragment in str(info.value)
    assert info.value.param == param


def test_params_from_text_and_unknown_names():
    params = SamplingParams().with_text_values({"temperature": "0.5", "top_k": "40", "seed": "7",
                                                "stop": "。|\n"})
    assert (params.temperature, params.top_k, params.seed, params.stop) == (0.5, 40, 7, ("。", "\n"))
    assert params.with_text_values({"seed": "none"}).seed is None
    assert SamplingParams(stop="x").stop == ("x",)
    with pytest.raises(SamplingError, match="top_k must be a whole number"):
        params.with_text_values({"top_k": "many"})
    with pytest.raises(SamplingError, match="unknown sampling parameter.*temprature"):
        params.with_text_values({"temprature": "1"})
    with pytest.raises(SamplingError, match="top_p must be in"):
        params.replace(top_p=2.0)


def test_bad_messages_are_refused(random_model, tokenizer):
    for messages, fragment in [([], "non-empty list"), ([{"role": "robot", "content": "x"}], "messages[0].role"),
                               ([{"role": "user", "content": 5}], "content must be a string"),
                               ([{"role": "system", "content": "x"}], "at least one user message")]:
        with pytest.raises(SamplingError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
            chat(random_model, tokenizer, messages, GREEDY)


# ---------------------------------------------------------------- whole characters

def test_text_stream_never_splits_a_character(tokenizer):
    text = "床前明月光，疑是地上霜。舉頭望明月，低頭思故鄉。 emoji 🙂🚀"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert any("\ufffd" in tokenizer.decode([i]) for i in ids)  # the tokenizer does split characters
    stream = TextStream(tokenizer)
    pieces = [stream.push(i) for i in ids] + [stream.finish()]
    assert all("\ufffd" not in p for p in pieces)
    assert "".join(pieces) == text


def test_chinese_chat_streams_whole_characters(poet, tokenizer):
    for user, answer in PAIRS:
        generation = chat(poet, tokenizer, [{"role": "user", "content": user}], GREEDY)
        pieces = list(generation)
        ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
        assert any("\ufffd" in tokenizer.decode([i]) for i in ids)  # byte fragments were generated
        assert all(p and "\ufffd" not in p for p in pieces)
        assert "".join(pieces) == generation.text == answer
        assert generation.finish_reason == "stop"  # it wrote <|im_end|>
        assert generation.completion_tokens == len(ids) + 1
        assert generation.prompt_tokens == len(encode_chat(tokenizer, [{"role": "user", "content": user}]))
        assert generation.usage["total_tokens"] == generation.prompt_tokens + generation.completion_tokens


def test_random_model_stream_is_always_a_prefix_of_the_full_decode(random_model, tokenizer):
    """An untrained model picks byte tokens at random: the sampler's UTF-8 guard keeps every
    character whole, and the streamed pieces add up to the decode of the tokens."""
    for seed in range(4):
        params = SamplingParams(temperature=1.0, top_p=1.0, seed=seed, max_new_tokens=40)
        generation = complete(random_model, tokenizer, "床前", params)
        shown = ""
        for piece in generation:
            shown += piece
            assert not shown.endswith("\ufffd") or generation.finish_reason
        assert "\ufffd" not in shown  # the sampler never leaves a character incomplete
        engine = engine_for(random_model)
        prompt = [2] + tokenizer("床前", add_special_tokens=False)["input_ids"]
        tokens = list(engine.submit(prompt, Sampler.from_params(params, 512, guard_for(tokenizer, 512)), 40, [2, 3, 4]))
        tokens = tokens[:-1] if tokens[-1] in (2, 3, 4) else tokens
        assert shown == tokenizer.decode(tokens, skip_special_tokens=True)


# ---------------------------------------------------------------- stop strings

def test_stop_string_ends_the_answer_and_is_not_shown(poet, tokenizer):
    user, answer = PAIRS[0]
    stop = answer[6:9]
    generation = chat(poet, tokenizer, [{"role": "user", "content": user}], GREEDY.replace(stop=[stop]))
    pieces = list(generation)
    assert "".join(pieces) == answer[:6]
    assert generation.finish_reason == "stop"
    assert not any(stop[:1] in p for p in pieces)


def test_a_near_miss_stop_string_is_released(poet, tokenizer):
    user, answer = PAIRS[0]
    generation = chat(poet, tokenizer, [{"role": "user", "content": user}],
                      GREEDY.replace(stop=[answer[:4] + "X"]))
    assert generation.read() == answer and generation.finish_reason == "stop"


@settings(max_examples=60, deadline=None)
@given(text=st.sampled_from(SAMPLE_TEXTS[:8]), start=st.integers(0, 40), length=st.integers(1, 6),
       extra=st.sampled_from(["", "Q", "。"]))
def test_text_stream_cuts_at_the_first_stop_string(tokenizer, text, start, length, extra):
    stop = text[start:start + length] + extra
    if not stop:
        return
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    stream = TextStream(tokenizer, [stop])
    shown = ""
    for i in ids:
        shown += stream.push(i)
        assert stop not in shown
        if stream.stopped:
            break
    shown += stream.finish()
    cut = text.find(stop)
    assert shown == (text if cut < 0 else text[:cut])
    assert stream.stopped == (cut >= 0)


# ---------------------------------------------------------------- template, usage, seeds, beams

def test_chat_applies_the_template_and_matches_generate(random_model, tokenizer):
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "To be, or not"}]
    ids = encode_chat(tokenizer, messages)
    assert tokenizer.decode(ids).endswith("<|im_start|>assistant\n")
    generation = chat(random_model, tokenizer, messages, SamplingParams(temperature=0, max_new_tokens=12))
    text = generation.read()
    out = random_model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False, pad_token_id=0,
                                eos_token_id=[2, 3, 4])
    new = out[0, len(ids):].tolist()
    stops = [i for i, t in enumerate(new) if t in (2, 3, 4)]
    expected_ids = new[:stops[0]] if stops else new
    assert text == tokenizer.decode(expected_ids, skip_special_tokens=True)
    assert generation.prompt_tokens == len(ids)
    assert generation.completion_tokens == len(expected_ids) + (1 if stops else 0)
    assert generation.finish_reason == ("stop" if stops else "length")


def test_seeded_sampling_is_reproducible(random_model, tokenizer):
    messages = [{"role": "user", "content": "床前明月光"}]
    params = SamplingParams(temperature=1.0, top_k=50, top_p=0.95, repetition_penalty=1.1, seed=11,
                            max_new_tokens=24)
    first = chat(random_model, tokenizer, messages, params).read()
    assert chat(random_model, tokenizer, messages, params).read() == first
    others = {chat(random_model, tokenizer, messages, params.replace(seed=s)).read() for s in (12, 13, 14)}
    assert others != {first}


def test_length_finish_and_cancel(random_model, tokenizer):
    generation = complete(random_model, tokenizer, "To be", SamplingParams(temperature=0, max_new_tokens=5))
    assert isinstance(generation, Generation) and generation.finish_reason is None
    generation.read()
    assert generation.completion_tokens == 5
    assert generation.finish_reason in ("length", "stop")
    assert generation.prompt_tokens == 1 + len(tokenizer("To be", add_special_tokens=False)["input_ids"])
    running = complete(random_model, tokenizer, "To be", SamplingParams(temperature=0, max_new_tokens=50))
    next(running, None)
    running.close()
    assert running.finish_reason == "cancelled"
    assert list(running) == []


def test_beam_search_falls_back_to_generate(random_model, tokenizer):
    messages = [{"role": "user", "content": "Hello world"}]
    params = SamplingParams(temperature=0, num_beams=3, max_new_tokens=8)
    generation = chat(random_model, tokenizer, messages, params)
    pieces = list(generation)
    ids = encode_chat(tokenizer, messages)
    out = random_model.generate(torch.tensor([ids]), num_beams=3, do_sample=False, max_new_tokens=8,
                                eos_token_id=[2, 3, 4], pad_token_id=2)
    new = [t for t in out[0, len(ids):].tolist()]
    new = new[:next((i for i, t in enumerate(new) if t in (2, 3, 4)), len(new))]
    assert "".join(pieces) == tokenizer.decode(new, skip_special_tokens=True)


# ---------------------------------------------------------------- context

def test_oldest_turns_are_dropped_to_fit_and_the_caller_is_told(random_model, tokenizer):
    system = {"role": "system", "content": "SYSTEM-NOTE"}
    history = []
    for i in range(12):
        history += [{"role": "user", "content": f"question {i} " + "床前明月光，疑是地上霜。" * 2},
                    {"role": "assistant", "content": f"answer {i} " + "舉頭望明月，低頭思故鄉。" * 2}]
    messages = [system] + history + [{"role": "user", "content": "last question"}]
    params = SamplingParams(temperature=0, max_new_tokens=64)
    full = len(encode_chat(tokenizer, messages))
    assert full + 64 > 256  # tiny_config's context
    generation = chat(random_model, tokenizer, messages, params)
    assert generation.dropped_turns > 0
    assert generation.prompt_tokens + 64 <= 256
    ids, dropped = fit_messages(tokenizer, messages, 256 - 64)
    assert dropped == generation.dropped_turns and len(ids) == generation.prompt_tokens
    kept = tokenizer.decode(ids)
    assert "SYSTEM-NOTE" in kept and "last question" in kept and "question 0 " not in kept
    assert f"question {dropped} " in kept and f"question {dropped - 1} " not in kept
    generation.read()
    with pytest.raises(SamplingError, match="context of 256 tokens") as info:
        chat(random_model, tokenizer, messages, params, truncate=False)
    assert info.value.param == "messages"
    with pytest.raises(SamplingError, match="shorten"):
        chat(random_model, tokenizer, [system, {"role": "user", "content": "床前明月光" * 200}], params)
    with pytest.raises(SamplingError, match="prompt is"):
        complete(random_model, tokenizer, "To be, or not to be " * 60, params)


def test_a_long_history_is_fitted_with_few_tokenizations(tokenizer, monkeypatch):
    """Dropping turns one by one would tokenize a history of n turns n times (a page could send
    thousands); turns too long to fit go untokenized and a binary search does the rest."""
    import random

    import minimind.chat_format as chat_format

    def linear(messages, budget):  # the obvious algorithm, as the reference
        system, turns = chat_format._turns(messages)
        for dropped in range(len(turns)):
            ids = encode_chat(tokenizer, system + [m for t in turns[dropped:] for m in t])
            if len(ids) <= budget or dropped == len(turns) - 1:
                return ids, dropped

    rng = random.Random(0)
    for n in (1, 2, 7, 30):
        messages = [{"role": "system", "content": "你是詩人"}]
        for i in range(n):
            messages += [{"role": "user", "content": "床前明月光" * rng.randint(0, 6) + str(i)},
                         {"role": "assistant", "content": "疑是地上霜" * rng.randint(0, 6)}]
        for budget in (40, 120, 400):
            assert fit_messages(tokenizer, messages, budget) == linear(messages, budget), (n, budget)

    calls = []
    real = chat_format.encode_chat
    monkeypatch.setattr(chat_format, "encode_chat", lambda *a: calls.append(1) or real(*a))
    flood = [{"role": "user" if i % 2 == 0 else "assistant", "content": "春眠不覺曉"} for i in range(20_001)]
    ids, dropped = fit_messages(tokenizer, flood, 192)
    assert len(ids) <= 192 and dropped > 9_000 and len(calls) <= 12
    with pytest.raises(SamplingError, match="characters"):
        fit_messages(tokenizer, [{"role": "user", "content": "床" * 1_000_000}], 192)
    assert len(calls) <= 12  # refused by its length alone: not tokenized




def test_answer_room_is_what_the_context_leaves_after_the_prompt_chat_and_complete_read(random_model, tokenizer):
    """The API's default answer length: chat and complete accept exactly that room, one more
    token does not fit (complete's prompt counts its end-of-text token)."""
    messages = [{"role": "user", "content": "床前明月光，疑是地上霜。" * 8}]
    used = len(encode_chat(tokenizer, messages))
    room = answer_room(random_model, tokenizer, messages, 10_000)
    assert room == 256 - used and answer_room(random_model, tokenizer, messages, 7) == 7
    fitted = chat(random_model, tokenizer, messages, GREEDY.replace(max_new_tokens=room), truncate=False)
    assert fitted.prompt_tokens == used
    with pytest.raises(SamplingError, match="more than the model's context"):
        chat(random_model, tokenizer, messages, GREEDY.replace(max_new_tokens=room + 1), truncate=False)

    prompt = "To be, or not to be " * 5
    room = answer_room(random_model, tokenizer, prompt, 10_000)
    assert room == 256 - 1 - len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    complete(random_model, tokenizer, prompt, GREEDY.replace(max_new_tokens=room))
    with pytest.raises(SamplingError, match="prompt is"):
        complete(random_model, tokenizer, prompt, GREEDY.replace(max_new_tokens=room + 1))

    assert answer_room(random_model, tokenizer, "x" * 300, 10_000) == 1  # no room: chat/complete say why
    with pytest.raises(SamplingError, match="characters"):  # refused by its length, before tokenizing
        answer_room(random_model, tokenizer, [{"role": "user", "content": "床" * 1_000_000}], 10_000)


def test_the_defaults_fit_a_model_whose_context_is_the_default_answer_length(random_model, tokenizer):
    """SamplingParams()'s 256 new tokens are a shipped model's whole context (tiny_config's too), so
    chat(model, tok, messages) with no params refused every prompt. Now the defaults' answer takes what
    the context leaves (at most 256); a long history keeps a quarter of the context for the answer
    and drops its oldest turns; a prompt too long for any answer is still refused with its numbers."""
    assert SamplingParams().max_new_tokens == 256 == random_model.config.max_position_embeddings
    messages = [{"role": "user", "content": "床前明月光，疑是地上霜。"}]
    generation = chat(random_model, tokenizer, messages)
    generation.read()
    assert generation.prompt_tokens + generation.completion_tokens <= 256 and generation.completion_tokens > 0
    assert generation.dropped_turns == 0
    text = complete(random_model, tokenizer, "To be, or not to be")
    text.read()
    assert text.completion_tokens > 0

    history = []
    for i in range(12):
        history += [{"role": "user", "content": f"question {i} " + "床前明月光，疑是地上霜。" * 2},
                    {"role": "assistant", "content": f"answer {i} " + "舉頭望明月，低頭思故鄉。" * 2}]
    long = chat(random_model, tokenizer, history + [{"role": "user", "content": "last"}])
    assert long.dropped_turns > 0 and long.prompt_tokens <= 256 - 64
    long.read()
    with pytest.raises(SamplingError, match="prompt is"):
        complete(random_model, tokenizer, "To be, or not to be " * 60)

    # params that set other fields and leave the answer length at its default fit the same way
    sampled = chat(random_model, tokenizer, messages, SamplingParams(temperature=0.8, seed=3))
    sampled.read()
    assert sampled.prompt_tokens + sampled.completion_tokens <= 256 and sampled.completion_tokens > 0
    complete(random_model, tokenizer, "To be", SamplingParams(temperature=0.8, seed=3)).read()
    with pytest.raises(SamplingError, match="max_new_tokens is 300"):  # a length asked for is checked
        chat(random_model, tokenizer, messages, SamplingParams(max_new_tokens=300))

"""One registry per process: the page (by folder) and the API (by name) share one loaded copy;
copies over the memory budget go least recently used first; sampling defaults come from the model."""

import json
import weakref

import pytest
import torch

from minimind import MiniMindForCausalLM
from minimind.errors import CheckpointError
from minimind.generation import chat
from minimind.sampling_params import SamplingParams
from minimind.registry import ModelRegistry
from minimind.tokenizer import save_tokenizer

from helpers import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tokenizer):
    """Two tiny model folders (with tokenizers), one with a generation_config.json."""
    out = []
    for i in range(2):
        folder = tmp_path_factory.mktemp(f"model{i}")
        torch.manual_seed(i)
        MiniMindForCausalLM(tiny_config()).save_pretrained(folder)
        save_tokenizer(tokenizer, folder)
        out.append(folder)
    (out[0] / "generation_config.json").write_text(json.dumps(
        {"do_sample": True, "temperature": 0.55, "top_k": 17, "top_p": 0.8, "repetition_penalty": 1.3,
         "max_new_tokens": 99, "eos_token_id": [4, 2]}))
    return out


def test_the_page_and_the_api_share_one_loaded_copy(folders):
    registry = ModelRegistry()
    registry.add_folder(folders[0], name="first")
    by_name = registry.get("first")
    by_folder = registry.load(folders[0])
    assert by_folder is by_name and by_folder.engine is by_name.engine
    assert registry.loaded() == [str(folders[0])]
    assert registry.get("first") is by_name  # loaded once


def test_least_recently_used_copies_go_when_over_budget(folders):
    one = ModelRegistry().load(folders[0]).memory_bytes()
    registry = ModelRegistry(memory_budget=int(one * 1.5))  # room for one
    registry.add_folder(folders[0], name="first")
    registry.add_folder(folders[1], name="second")
    first = registry.get("first")
    assert registry.loaded() == [str(folders[0])]
    chat(first.model, first.tokenizer, [{"role": "user", "content": "床前"}], SamplingParams(max_new_tokens=4),
         engine=first.engine).read()
    thread, gone = first.engine._thread, weakref.ref(first.model)
    registry.get("second")
    assert registry.loaded() == [str(folders[1])]  # the first one went
    if thread is not None:
        thread.join(timeout=1)  # its decode thread ends now, not after IDLE_S
        assert not thread.is_alive()
    first = None
    assert gone() is None  # and its memory is free at once
    assert registry.get("first").model is not None  # it comes back on demand
    assert registry.loaded() == [str(folders[0])]
    roomy = ModelRegistry(memory_budget=one * 10)
    roomy.load(folders[0]), roomy.load(folders[1])
    assert len(roomy.loaded()) == 2


def test_names_are_checked_and_unknown_ones_are_a_key_error(folders, tmp_path):
    registry = ModelRegistry()
    with pytest.raises(CheckpointError, match="no such model folder"):
        registry.add_folder(tmp_path / "nothing")
    with pytest.raises(ValueError, match="without spaces"):
        registry.add_folder(folders[0], name="two words")
    with pytest.raises(KeyError):
        registry.get("nobody")
    assert registry.names() == [] and registry.describe() == []


def test_sampling_defaults_come_from_the_models_generation_config(folders, tmp_path):
    saved = SamplingParams.from_model(folders[0])
    assert (saved.temperature, saved.top_k, saved.top_p, saved.repetition_penalty, saved.max_new_tokens) == \
        (0.55, 17, 0.8, 1.3, 99)
    assert SamplingParams.from_model(folders[0], temperature=0.0).temperature == 0.0  # what the caller says wins
    assert SamplingParams.from_model(folders[1]) == SamplingParams()  # nothing saved: the library's defaults
    greedy = tmp_path / "greedy"
    greedy.mkdir()
    (greedy / "generation_config.json").write_text(json.dumps({"do_sample": False, "temperature": 0.9}))
    assert SamplingParams.from_model(greedy).temperature == 0.0
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(folders[0])}))
    assert SamplingParams.from_model(adapter).top_k == 17  # an adapter without its own: its base's
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "generation_config.json").write_text(json.dumps({"temperature": -3}))
    assert SamplingParams.from_model(broken) == SamplingParams()


def test_the_api_takes_unset_sampling_fields_from_the_model(folders):
    """/v1 with no temperature uses the model's (0.55 here), not OpenAI's 1.0: the same request
    with temperature 0.55 given explicitly gives the same seeded answer."""
    from fastapi.testclient import TestClient

    from minimind.serving import create_app

    registry = ModelRegistry()
    registry.add_folder(folders[0], name="first")
    with TestClient(create_app(registry)) as client:
        body = {"model": "first", "prompt": "床前", "max_tokens": 12, "seed": 3}
        unset = client.post("/v1/completions", json=body).json()["choices"][0]["text"]
        same = client.post("/v1/completions", json={**body, "temperature": 0.55, "top_k": 17, "top_p": 0.8,
                                                     "repetition_penalty": 1.3}).json()["choices"][0]["text"]
        other = client.post("/v1/completions", json={**body, "temperature": 1.0, "top_p": 1.0, "top_k": 0,
                                                      "repetition_penalty": 1.0}).json()["choices"][0]["text"]
    assert unset == same != other


def test_the_studio_page_and_its_api_answer_from_one_copy_of_the_shipped_model(tmp_path):
    from fastapi.testclient import TestClient

    from webapp.app import build_app
    from webapp.tabs.chat import respond

    app = build_app(tmp_path, background_jobs=False)
    ctx = app.state.context
    assert app.state.registry is ctx.models
    with TestClient(app) as client:
        for _ in respond(ctx, "床前明月光", [], [], "shipped:minimind-tang", None, False, "", 0.8, 0.9, 40, 8, 1.1):
            pass
        answer = client.post("/v1/chat/completions", json={"model": "minimind-tang", "max_tokens": 8,
                                                            "messages": [{"role": "user", "content": "春夜"}]})
        assert answer.status_code == 200
    assert ctx.models.loaded() == [str(ctx.model_folder("shipped:minimind-tang"))]


def test_the_chat_tab_starts_from_the_models_saved_defaults(tmp_path):
    from webapp.app import build_app
    from webapp.tabs.chat import model_defaults

    ctx = build_app(tmp_path, background_jobs=False).state.context
    saved = json.loads((ctx.model_folder("shipped:minimind-tang") / "generation_config.json").read_text())
    shown = model_defaults(ctx, "shipped:minimind-tang")
    assert (shown.temperature, shown.top_k, shown.top_p, shown.repetition_penalty) == \
        (saved["temperature"], saved["top_k"], saved["top_p"], saved["repetition_penalty"])
    assert model_defaults(ctx, "run:nothing") == SamplingParams()  # unknown: the library's defaults


def test_saved_defaults_leave_room_for_the_prompt_and_survive_hostile_files(folders, tmp_path):
    import shutil

    folder = tmp_path / "long"
    shutil.copytree(folders[0], folder)
    saved = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**saved, "max_new_tokens": 4096}))
    context = json.loads((folder / "config.json").read_text())["max_position_embeddings"]
    assert SamplingParams.from_model(folder).max_new_tokens == context // 2
    assert SamplingParams.from_model(folder, max_new_tokens=context - 8).max_new_tokens == context - 8  # asked for
    (folder / "generation_config.json").write_text("[" * 100_000 + "]" * 100_000)
    assert SamplingParams.from_model(folder) == SamplingParams()

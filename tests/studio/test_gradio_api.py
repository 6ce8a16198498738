"""The page's Gradio API as a script uses it (issue 45, item 4): every endpoint has a name, named
parameters (the optional ones with the page's defaults), a description and plain English labels;
the page's internal events are not listed; /chat, /classify and /export answer keyword calls
through gradio_client, the rest of their parameters left to their defaults."""

import random
import re

import httpx
import pytest
from gradio_client import Client

from minimind.training import TrainConfig, train
from webapp.app import build_app
from webapp.gate import Access
from helpers import SAMPLE_TEXTS, free_port
from webapp_helpers import LiveServer, make_shipped

# what a script finds on the page's API, each endpoint with its parameters in order
ENDPOINTS = {
    "/chat": ["message", "history", "history_b", "model", "model_b", "side_by_side", "system_prompt",
              "temperature", "top_p", "top_k", "max_new_tokens", "repetition_penalty"],
    "/regenerate": ["history", "history_b", "model", "model_b", "side_by_side", "system_prompt", "temperature",
                    "top_p", "top_k", "max_new_tokens", "repetition_penalty"],
    "/clear_chat": [],
    "/classify": ["text", "model", "model_b", "side_by_side"],
    "/export": ["model", "formats", "eval_file"],
    "/inspect_corpus": ["uploads", "sample", "kind", "text_field", "split", "strict", "label_field"],
    "/save_corpus": ["name", "kind", "text_field", "split", "strict", "train_tok", "vocab", "label_field"],
    "/stop_training": ["run_id"], "/resume_training": ["run_id"], "/watch_run": ["run_id"],
    "/watch_objective": ["run_id"], "/watch_rollouts": ["run_id"], "/watch_confusion": ["run_id"],
    "/import_model": ["source"], "/compare_runs": ["runs", "x_axis"],
    "/publish": ["export", "repo_id", "private", "token"],
}
# the rest have defaults (the corpus has one once a corpus is saved: the one saved last)
REQUIRED = {"/chat": {"message"}, "/classify": {"text"}, "/import_model": {"source"}, "/estimate": {"corpus"},
            "/start_training": {"corpus"}, "/stop_training": {"run_id"}, "/resume_training": {"run_id"},
            "/publish": {"export", "repo_id"}}
CLASSIFIER_RUN = "20260101-000000-lora"


def _labelled_csv(path, n: int = 40):
    """Chinese poem pieces labelled "poem" and English lines labelled "play"."""
    rng, poem, play = random.Random(0), "".join(SAMPLE_TEXTS[:3]), " ".join(SAMPLE_TEXTS[3:6])
    rows = ["text,label"]
    for i in range(n):
        source, label = (poem, "poem") if i % 2 else (play, "play")
        start = rng.randrange(len(source) - 12)
        rows.append(f"{source[start:start + 10].replace(',', ' ').replace(chr(10), ' ').strip() or 'x'},{label}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    """The page served with the tiny shipped model and a finished classifier run (4 LoRA steps),
    trained before the page is built so that /classify's default model is that classifier."""
    root = tmp_path_factory.mktemp("gradio-api")
    shipped = make_shipped(root / "checkpoints")
    config = TrainConfig.from_dict({
        "task": "classify", "mode": "lora", "model": {"init_from": str(shipped / "minimind-tang")},
        "data": {"files": [str(_labelled_csv(root / "labelled.csv"))], "seq_len": 32,
                 "cache_dir": str(root / "cache"), "val_fraction": 0.2},
        "lora": {"rank": 8}, "optim": {"lr": 3e-3, "warmup_steps": 0}, "max_steps": 4, "eval_every": 4,
        "batch_size": 8, "log_every": 1, "precision": "fp32", "device": "cpu",
        "run_dir": str(root / "ws" / "runs" / CLASSIFIER_RUN)})
    assert train(config)["state"] == "finished"
    app = build_app(root / "ws", shipped_dir=shipped, background_jobs=False, access=Access())
    with LiveServer(app, free_port()) as server:
        yield server.url, Client(server.url, verbose=False)


def test_every_endpoint_is_named_with_named_parameters_and_plain_labels(studio):
    url, client = studio
    api = client.view_api(return_format="dict", print_info=False)
    named = api["named_endpoints"]
    assert api["unnamed_endpoints"] == {} and not [name for name in named if name.startswith("/lambda")]
    assert set(ENDPOINTS) | {"/estimate", "/start_training"} <= set(named), sorted(named)
    for name, info in named.items():  # every endpoint, those other tabs add too
        params = [p["parameter_name"] for p in info["parameters"]]
        assert not [p for p in params if re.fullmatch(r"param_\d+", p)], (name, params)
        assert params == ENDPOINTS.get(name, params), name
        optional = {p["parameter_name"] for p in info["parameters"] if p["parameter_has_default"]}
        assert name not in ENDPOINTS or set(params) - optional == REQUIRED.get(name, set()), name
        assert info["description"].strip(), name
        for entry in info["parameters"] + info["returns"]:  # English text, never a translation key
            assert isinstance(entry["label"], str) and "__i18n__" not in entry["label"], (name, entry["label"])
            assert not re.fullmatch(r"(value|parameter)_\d+", entry["label"]), (name, entry["label"])
    chat = {p["parameter_name"]: p for p in named["/chat"]["parameters"]}
    assert chat["message"]["label"] == "Message" and chat["system_prompt"]["parameter_default"] is None
    assert chat["model"]["parameter_default"] == "shipped:minimind-tang"
    assert [r["label"] for r in named["/chat"]["returns"]] == ["Message", "conversation", "conversation_b"]
    form = [p["parameter_name"] for p in named["/start_training"]["parameters"]]
    assert {p for p in form if not named["/start_training"]["parameters"][form.index(p)]["parameter_has_default"]} \
        == REQUIRED["/start_training"]
    assert form[:4] == ["base", "mode", "corpus", "steps"] and form[-1] == "run_name"
    assert form == [p["parameter_name"] for p in named["/estimate"]["parameters"]]
    # the page itself still translates its labels in the browser (its Chinese stays)
    components = httpx.get(url + "/config").json()["components"]
    message_box = next(c for c in components if c["props"].get("elem_id") == "chat-input")
    assert "translation_metadata" in str(message_box["props"]["label"])


def test_chat_answers_a_keyword_call_with_the_page_defaults(studio):
    _, client = studio
    box, conversation, second = client.predict(message="床前明月光", api_name="/chat")
    assert box == "" and second == []  # the box emptied; no second model unless side by side
    said = [(turn["role"], "".join(part["text"] for part in turn["content"])) for turn in conversation]
    assert said[0] == ("user", "床前明月光") and said[1][0] == "assistant" and said[1][1].strip()
    # a few settings by name, the rest left to their defaults; the conversation goes on from `history`
    _, longer, _ = client.predict(message="hi", history=conversation, system_prompt="Answer briefly.",
                                  temperature=0.0, max_new_tokens=8, api_name="/chat")
    assert [turn["role"] for turn in longer] == ["user", "assistant"] * 2 and longer[:2] == conversation
    _, again, _ = client.predict(history=longer, temperature=0.0, max_new_tokens=8, api_name="/regenerate")
    assert again == longer  # the same last message answered again, greedily: the same answer


def test_classify_and_export_answer_keyword_calls(studio):
    _, client = studio
    # each pane an update: the probabilities, headed by the classifier that gave them (the default: the first)
    first, second = client.predict(text="床前明月光，疑是地上霜", api_name="/classify")
    assert {c["label"] for c in first["value"]["confidences"]} == {"play", "poem"} and CLASSIFIER_RUN in first["label"]
    assert second["visible"] is False
    first, second = client.predict(text="To be, or not to be", model=f"run:{CLASSIFIER_RUN}",
                                   model_b=f"run:{CLASSIFIER_RUN}", side_by_side=True, api_name="/classify")
    assert sum(c["confidence"] for c in first["value"]["confidences"]) == pytest.approx(1.0)
    assert second["visible"] is True and second["value"]["label"] == first["value"]["label"]
    table, downloads, message = client.predict(model="shipped:minimind-tang", formats=["hf"], api_name="/export")
    assert [row[0] for row in table["data"]] == ["hf"] and "minimind-tang" in downloads and message

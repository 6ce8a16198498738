"""The page's side of vocabulary extension (issue 19): the Corpus tab says how each shipped
model's tokenizer spells a corpus and when extending it would help; the Train tab's estimate says
it for the chosen start, and a LoRA run started with "Add the corpus's characters" grows the
vocabulary, chats, and exports (GGUF refused in words a user can act on)."""

import json
import re

import pytest
from gradio_client import Client
from webapp_helpers import LiveServer, free_port, make_shipped, train_through_the_page

from webapp.app import build_app

SONGCI = "Song ci (1,200 ci, simplified characters, JSONL)"
FIRST = ["lora", "songci", 3, 4, 64, 1e-3, 1, "auto", 4, 8, 0]  # mode .. eval_every, after the start model
# weights, beta, teacher, temperature, kl_weight, rewards, group_size, grpo_beta, max_new_tokens, stop_after,
# minutes, processes, parallel, report_to: the page's defaults, then extend_vocab
DEFAULTS = ["full", 0.5, None, 2.0, 0.5, None, 8, 0.04, 96, "steps", 10, 1, "ddp", []]


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    root = tmp_path_factory.mktemp("studio")
    app = build_app(root / "workspace", shipped_dir=make_shipped(root / "checkpoints"))
    with LiveServer(app, free_port()) as server:
        yield Client(server.url, verbose=False), root / "workspace"


def _coverage(client, sample: str) -> re.Match:
    summary = client.predict([], sample, "auto", "", "paragraph", False, api_name="/inspect_corpus")[0]
    assert "**Tokenizer coverage**" in summary
    found = re.search(r"- minimind-tang: ([\d.]+) % of the characters in byte pieces, ([\d.]+) characters per token"
                      r"(; ([\d,]+) characters seen 3\+ times have no token of their own)?", summary)
    assert found, summary
    return found


def test_the_corpus_tab_reports_coverage_and_suggests_extension_only_when_it_helps(studio):
    client, _ = studio
    songci = _coverage(client, SONGCI)  # the test tokenizer learnt a few Tang lines: Song ci is mostly bytes
    assert float(songci.group(1)) > 50 and songci.group(3) and int(songci.group(4).replace(",", "")) > 100
    assert "Add the corpus's characters to the vocabulary" in songci.string
    english = _coverage(client, "Shakespeare: The Comedy of Errors (txt)")  # ASCII: every character whole
    assert float(english.group(1)) < 1 and english.group(3) is None


def test_a_lora_run_from_the_page_extends_the_vocabulary_then_chats_and_exports(studio):
    client, workspace = studio
    client.predict([], SONGCI, "auto", "", "paragraph", False, api_name="/inspect_corpus")
    client.predict("songci", "auto", "", "paragraph", False, False, 6400, api_name="/save_corpus")
    start = "shipped:minimind-tang"

    untick = client.predict(start, *FIRST, api_name="/estimate")
    assert re.search(r"writes [\d.]+ % of this corpus's characters in byte pieces", untick)
    assert "tick “Add the corpus's characters to the vocabulary”" in untick
    ticked = client.predict(start, *FIRST, *DEFAULTS, True, api_name="/estimate")
    assert re.search(r"the run adds [\d,]+ of them as tokens of their own", ticked)
    with pytest.raises(Exception, match="for fine-tuning an existing model"):  # a new model learns its own tokenizer
        client.predict("new:auto", "pretrain", *FIRST[1:], *DEFAULTS, True, api_name="/estimate")

    run_id, _ = train_through_the_page(client, [start, *FIRST, *DEFAULTS, True], workspace / "runs",
                                       what="the LoRA run")
    added = json.loads((workspace / "runs" / run_id / "vocabulary.json").read_text(encoding="utf-8"))["added_tokens"]
    assert added > 100

    controls = [f"run:{run_id}", start, False, "", 0.8, 0.9, 0, 16, 1.0]
    _, history, _ = client.predict("以《浣溪沙》为题写一首词", [], [], *controls, api_name="/chat")
    assert history[-1]["role"] == "assistant" and "\ufffd" not in history[-1]["content"]

    table, files, _ = client.predict(f"run:{run_id}", ["merged", "gguf-q8_0"], None, api_name="/export")
    rows = {r[0]: r for r in table["data"]}
    assert rows["merged"][-1] == "verified"
    assert "GGUF cannot carry the characters" in json.dumps(rows["gguf-q8_0"], ensure_ascii=False)
    assert re.search(r'href="/downloads/[^"]+\.zip"', files)  # the merged export, as a zip

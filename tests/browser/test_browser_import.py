"""Bring your own model, in headless Chromium: a tiny Llama folder (transformers' own class, a tokenizer
trained on the spot) is imported from the Train tab's "Start from" list, LoRA-trains for a few steps,
answers in the Chat tab and exports to a verified GGUF from the Export tab, which the browser downloads."""

import re

import pytest
from helpers import ROOT
from hub_models import build_family_model
from webapp_helpers import download, pick

from webapp.workspace import Workspace

pytestmark = pytest.mark.browser


def test_import_a_local_llama_lora_train_chat_and_export_gguf(studio_page, tmp_path):
    from playwright.sync_api import expect

    build_family_model("llama-smollm", tmp_path / "tiny-llama")
    ws = Workspace(studio_page.workspace)
    ws.save_corpus("chats", [ROOT / "samples" / "tang_chat_sample.jsonl"], {"kind": "auto"},
                   {"kind": "chat", "documents": 314})
    page = studio_page(shipped_dir=tmp_path / "no-shipped-models", accept_downloads=True)
    page.get_by_role("tab", name="Train").click()
    expect(page.locator("#train-import")).to_be_hidden()
    pick(page, "Start from", "a Hugging Face model: id or folder…")
    expect(page.locator("#train-import")).to_be_visible()
    page.locator("#import-btn").click()                                # nothing typed: the page says what to type
    expect(page.get_by_text("type a Hugging Face model id")).to_be_visible(timeout=30_000)
    page.locator("#train-hub-source textarea, #train-hub-source input").first.fill(str(tmp_path / "tiny-llama"))
    page.locator("#import-btn").click()
    expect(page.locator("#import-status")).to_contain_text(re.compile(r"imported\s+imported:tiny-llama"),
                                                           timeout=120_000)
    expect(page.get_by_role("combobox", name="Start from")).to_have_value("imported: tiny-llama")
    assert (ws.models / "tiny-llama" / "import.json").is_file()
    studio_page.screenshot("train-import")

    pick(page, "Corpus", "chats")
    studio_page.fill_train_form(steps=4, seq_len=64, batch_size=2, eval_every=0)
    studio_page.start_run()
    expect(page.locator("#train-progress")).to_contain_text("finished", timeout=300_000)
    run_id = page.locator("#train-run input").input_value()

    page.get_by_role("tab", name="Chat").click()
    page.locator("#chat-model input").click()
    page.get_by_role("option", name=re.compile(re.escape(run_id))).first.click()
    page.locator("#chat-input textarea").fill("寫一首詩")
    page.locator("#chat-send").click()
    answer = page.locator("#chatbot [data-testid=bot]")
    expect(answer).to_have_count(1, timeout=120_000)
    expect(page.locator("#chat-send")).to_be_enabled(timeout=120_000)
    assert answer.inner_text().strip()

    page.get_by_role("tab", name="Export").click()
    pick(page, "Model", run_id)
    formats = page.locator("#export-formats")
    for box in formats.locator("input[type=checkbox]").all():
        box.uncheck()
    formats.get_by_label("gguf-q8_0", exact=True).check()
    page.locator("#export-btn").click()
    expect(page.locator("#export-table")).to_contain_text("verified", timeout=180_000)
    link = page.locator("#export-files a").first
    expect(link).to_have_attribute("href", re.compile(r"q8_0\.gguf$"))
    saved = download(page, link, tmp_path)  # the link gives the GGUF file itself
    assert saved.suffix == ".gguf" and saved.stat().st_size > 1000 and saved.read_bytes()[:4] == b"GGUF"
    studio_page.screenshot("export-imported")

"""A new user's first session, in headless Chromium: upload a corpus, train a LoRA run and
watch it, chat with the result, export a GGUF and download it. Screenshots of each tab go
to test-artifacts/."""

import re

import pytest
from helpers import ROOT
from webapp_helpers import download, make_shipped, pick

pytestmark = pytest.mark.browser


@pytest.mark.slow  # the newcomer's walk (upload, LoRA, chat, export) and the import walk (GGUF downloaded) run by default
def test_new_user_trains_chats_and_exports_in_the_browser(tmp_path, studio_page):
    from playwright.sync_api import expect

    corpus = ROOT / "samples" / "tang_chat_sample.jsonl"
    page = studio_page(shipped_dir=make_shipped(tmp_path / "checkpoints"), accept_downloads=True)
    expect(page.locator("#title")).to_contain_text("MiniMind Studio")

    # Corpus: upload, inspect, save
    studio_page.inspect_upload(corpus)
    expect(page.locator("#corpus-summary")).to_contain_text("Documents", timeout=120_000)
    expect(page.locator("#corpus-summary")).to_contain_text("chat")
    studio_page.save_corpus("poems-chat")
    studio_page.screenshot("tab-corpus")

    # Train: LoRA on the shipped model, a few steps; watch progress and the loss plot
    studio_page.choose_training("shipped: minimind-tang", "lora", "poems-chat")
    studio_page.fill_train_form(steps=6, seq_len=64, batch_size=4)
    studio_page.start_run()
    expect(page.locator("#train-progress")).to_contain_text("step", timeout=300_000)
    expect(page.locator("#train-progress")).to_contain_text("finished: step 6/6", timeout=600_000)
    expect(page.locator("#loss-plot canvas, #loss-plot svg").first).to_be_visible(timeout=60_000)
    studio_page.screenshot("tab-train")

    # Chat with the fine-tuned run: Gradio marks each message data-testid="user" or "bot" (the
    # "Loading response" placeholder has neither); the answer is the bot's, not the prompt
    prompt = "以《春夜》为题写一首五言绝句"
    page.get_by_role("tab", name="Chat").click()
    pick(page, "Model", "run ")
    # greedy, so the answer is the same every time (sampled, a tiny random model sometimes ends at once)
    page.locator("#chat-settings").get_by_text("Settings").first.click()
    temperature = page.get_by_label("number input for Temperature")
    temperature.fill("0")
    temperature.press("Enter")
    page.locator("#chat-input textarea").fill(prompt)
    page.locator("#chat-send").click()
    expect(page.locator("#chatbot [data-testid=user]")).to_have_count(1)
    expect(page.locator("#chatbot [data-testid=user]")).to_contain_text(prompt)
    answer = page.locator("#chatbot [data-testid=bot]")
    expect(answer).to_have_count(1, timeout=120_000)
    # streamed in: some text (an empty answer shows "…"; the model here is a tiny random one)
    expect(answer).to_have_text(re.compile(r"[^\s…]"), timeout=120_000)
    assert prompt not in answer.inner_text()  # an answer, not the request echoed
    studio_page.screenshot("tab-chat")

    # Export a GGUF and download it
    page.get_by_role("tab", name="Export").click()
    pick(page, "Model", "run ")
    formats = page.locator("#export-formats")
    formats.get_by_label("hf", exact=True).uncheck()
    formats.get_by_label("gguf-q8_0", exact=True).check()
    page.locator("#export-btn").click()
    expect(page.locator("#export-table")).to_contain_text("verified", timeout=600_000)
    expect(page.locator("#export-files")).to_contain_text(".gguf")
    saved = download(page, page.locator("#export-files a").first, tmp_path)
    assert saved.suffix == ".gguf" and saved.stat().st_size > 1000
    assert saved.read_bytes()[:4] == b"GGUF"
    studio_page.screenshot("tab-export")


def test_login_page_then_the_studio_and_its_api_in_the_browser(tmp_path, studio_page):
    """With MINIMIND_AUTH the browser sees only the login form; after it, the page and /v1 answer."""
    from playwright.sync_api import expect

    from webapp.gate import Access

    page = studio_page(shipped_dir=make_shipped(tmp_path / "checkpoints"), background_jobs=False,
                       access=Access(login=("ada", "lovelace")))
    page.locator("input[type=password]").wait_for()
    assert page.request.get(studio_page.url + "/v1/models").status == 401
    page.locator("input[type=text]").first.fill("ada")
    page.locator("input[type=password]").fill("lovelace")
    page.keyboard.press("Enter")
    expect(page.locator("#title")).to_contain_text("MiniMind Studio")
    expect(page.get_by_role("tab", name="Chat")).to_be_visible()
    models = page.request.get(studio_page.url + "/v1/models")  # the page's session opens /v1 too
    assert models.status == 200 and "minimind-tang" in models.text()

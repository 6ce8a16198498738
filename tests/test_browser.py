"""A new user's first session, in headless Chromium: upload a corpus, train a LoRA run and
watch it, chat with the result, export a GGUF and download it. Screenshots of each tab go
to test-artifacts/."""

import os
import re
import shutil
from pathlib import Path

import pytest

from webapp.app import build_app
from helpers import ROOT
from webapp_helpers import LiveServer, free_port, make_shipped

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium (apt-get install chromium)")]


def _pick(page, label: str, option: str) -> None:
    """Choose `option` in the Gradio dropdown labelled `label`."""
    box = page.get_by_role("combobox", name=label)
    box.click()
    page.get_by_role("option", name=option).first.click()


def test_new_user_trains_chats_and_exports_in_the_browser(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    shipped = make_shipped(tmp_path / "checkpoints")
    app = build_app(tmp_path / "workspace", shipped_dir=shipped)
    corpus = ROOT / "samples" / "tang_chat_sample.jsonl"
    with LiveServer(app, free_port()) as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1400, "height": 1100}, accept_downloads=True)
        page.set_default_timeout(60_000)
        try:
            page.goto(server.url)
            expect(page.locator("#title")).to_contain_text("MiniMind Studio")

            # Corpus: upload, inspect, save
            page.locator("#tab-corpus input[type=file]").first.set_input_files(str(corpus))
            page.locator("#inspect-btn").click()
            expect(page.locator("#corpus-summary")).to_contain_text("Documents", timeout=120_000)
            expect(page.locator("#corpus-summary")).to_contain_text("chat")
            page.get_by_label("Corpus name").fill("poems-chat")
            page.locator("#save-corpus-btn").click()
            expect(page.locator("#corpus-saved")).to_contain_text("Saved corpus", timeout=120_000)
            page.screenshot(path=str(ARTIFACTS / "tab-corpus.png"), full_page=True)

            # Train: LoRA on the shipped model, a few steps; watch progress and the loss plot
            page.get_by_role("tab", name="Train").click()
            _pick(page, "Start from", "shipped: minimind-tang")
            page.locator("#train-mode").get_by_text("lora", exact=True).click()
            _pick(page, "Corpus", "poems-chat")
            page.locator("#train-steps input").fill("6")
            page.get_by_label("Sequence length").fill("64")
            page.get_by_label("Batch size").fill("4")
            page.locator("#start-btn").click()
            expect(page.locator("#train-message")).to_contain_text(re.compile(r"Queued|is training"), timeout=60_000)
            expect(page.locator("#train-progress")).to_contain_text("step", timeout=300_000)
            expect(page.locator("#train-progress")).to_contain_text("finished: step 6/6", timeout=600_000)
            expect(page.locator("#loss-plot canvas, #loss-plot svg").first).to_be_visible(timeout=60_000)
            page.screenshot(path=str(ARTIFACTS / "tab-train.png"), full_page=True)

            # Chat with the fine-tuned run: Gradio marks each message data-testid="user" or "bot" (the
            # "Loading response" placeholder has neither); the answer is the bot's, not the prompt
            prompt = "以《春夜》为题写一首五言绝句"
            page.get_by_role("tab", name="Chat").click()
            _pick(page, "Model", "run ")
            page.locator("#chat-input textarea").fill(prompt)
            page.locator("#chat-send").click()
            expect(page.locator("#chatbot [data-testid=user]")).to_have_count(1)
            expect(page.locator("#chatbot [data-testid=user]")).to_contain_text(prompt)
            answer = page.locator("#chatbot [data-testid=bot]")
            expect(answer).to_have_count(1, timeout=120_000)
            # streamed in: some text (an empty answer shows "…"; the model here is a tiny random one)
            expect(answer).to_have_text(re.compile(r"[^\s…]"), timeout=120_000)
            assert prompt not in answer.inner_text()  # an answer, not the request echoed
            page.screenshot(path=str(ARTIFACTS / "tab-chat.png"), full_page=True)

            # Export a GGUF and download it
            page.get_by_role("tab", name="Export").click()
            _pick(page, "Model", "run ")
            formats = page.locator("#export-formats")
            formats.get_by_label("hf", exact=True).uncheck()
            formats.get_by_label("gguf-q8_0", exact=True).check()
            page.locator("#export-btn").click()
            expect(page.locator("#export-table")).to_contain_text("verified", timeout=600_000)
            expect(page.locator("#export-files")).to_contain_text(".gguf")
            link = page.locator("#export-files a").first
            with page.expect_download() as info:
                link.click()
            download = info.value
            saved = tmp_path / download.suggested_filename
            download.save_as(saved)
            assert saved.suffix == ".gguf" and saved.stat().st_size > 1000
            assert saved.read_bytes()[:4] == b"GGUF"
            page.screenshot(path=str(ARTIFACTS / "tab-export.png"), full_page=True)
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "failure.png"), full_page=True)
            raise
        finally:
            browser.close()


def test_login_page_then_the_studio_and_its_api_in_the_browser(tmp_path):
    """With MINIMIND_AUTH the browser sees only the login form; after it, the page and /v1 answer."""
    from playwright.sync_api import expect, sync_playwright

    from webapp.gate import Access

    shipped = make_shipped(tmp_path / "checkpoints")
    app = build_app(tmp_path / "workspace", shipped_dir=shipped, background_jobs=False,
                    access=Access(login=("ada", "lovelace")))
    with LiveServer(app, free_port()) as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = browser.new_page()
        page.set_default_timeout(60_000)
        try:
            page.goto(server.url)
            page.locator("input[type=password]").wait_for()
            assert page.request.get(server.url + "/v1/models").status == 401
            page.locator("input[type=text]").first.fill("ada")
            page.locator("input[type=password]").fill("lovelace")
            page.keyboard.press("Enter")
            expect(page.locator("#title")).to_contain_text("MiniMind Studio")
            expect(page.get_by_role("tab", name="Chat")).to_be_visible()
            models = page.request.get(server.url + "/v1/models")  # the page's session opens /v1 too
            assert models.status == 200 and "minimind-tang" in models.text()
        except Exception:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "login-failure.png"), full_page=True)
            raise
        finally:
            browser.close()

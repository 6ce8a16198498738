"""The Train tab in headless Chromium: choosing dpo shows the weights and beta inputs, choosing
distill shows the teacher picker and its settings, and a plain mode hides them again."""

import shutil
from pathlib import Path

import pytest

from webapp.app import build_app
from helpers import ROOT
from webapp_helpers import LiveServer, chromium_page, free_port

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium (apt-get install chromium)")]


def test_dpo_and_distill_show_their_own_inputs(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    shipped = tmp_path / "checkpoints" / "minimind-tang"  # the picker only lists it: a stand-in folder does
    shipped.mkdir(parents=True)
    (shipped / "config.json").write_text("{}")
    app = build_app(tmp_path / "workspace", shipped_dir=shipped.parent, background_jobs=False)
    with LiveServer(app, free_port()) as server, sync_playwright() as pw:
        browser, page = chromium_page(pw, CHROMIUM)
        try:
            page.goto(server.url)
            expect(page.locator("#title")).to_contain_text("MiniMind Studio")
            page.get_by_role("tab", name="Train").click()
            mode = page.locator("#train-mode")
            expect(mode).to_contain_text("distill")
            expect(mode).to_contain_text("dpo: learn from preference pairs")  # the mode's info line
            beta, weights, teacher = (page.locator("#train-beta"), page.locator("#train-weights"),
                                      page.locator("#train-teacher"))
            expect(beta).to_be_hidden()
            expect(teacher).to_be_hidden()

            mode.get_by_text("dpo", exact=True).click()
            expect(beta).to_be_visible()
            expect(weights).to_be_visible()
            expect(weights).to_contain_text("full model")
            expect(weights).to_contain_text("QLoRA")
            expect(beta.locator("input")).to_have_value("0.5")  # the trainer's default
            expect(teacher).to_be_hidden()

            mode.get_by_text("distill", exact=True).click()
            expect(teacher).to_be_visible()
            expect(teacher.locator("input")).to_have_value("shipped: minimind-tang")
            expect(page.locator("#train-temperature")).to_be_visible()
            expect(page.locator("#train-kl-weight")).to_be_visible()
            expect(weights).to_be_visible()
            expect(beta).to_be_hidden()
            expect(page.locator("#train-steps input")).to_have_value("300")  # a new student: pretraining's steps
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "tab-train-distill.png"), full_page=True)

            mode.get_by_text("lora", exact=True).click()
            expect(weights).to_be_hidden()
            expect(teacher).to_be_hidden()
            expect(page.locator("#train-steps input")).to_have_value("100")
        except Exception:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "objectives-failure.png"), full_page=True)
            raise
        finally:
            browser.close()


def test_a_dpo_run_from_the_page(tmp_path):
    """A newcomer's DPO: upload the preference sample, save it, start a LoRA DPO run of the shipped
    model from the Train tab, watch it finish; the objective's own plot and figures appear."""
    import re

    from playwright.sync_api import expect, sync_playwright
    from test_browser import _pick
    from webapp_helpers import make_shipped

    shipped = make_shipped(tmp_path / "checkpoints")
    app = build_app(tmp_path / "workspace", shipped_dir=shipped)
    with LiveServer(app, free_port()) as server, sync_playwright() as pw:
        browser, page = chromium_page(pw, CHROMIUM)
        try:
            page.goto(server.url)
            expect(page.locator("#title")).to_contain_text("MiniMind Studio")
            page.locator("#tab-corpus input[type=file]").first.set_input_files(
                str(ROOT / "samples" / "tang_preference.jsonl"))
            page.locator("#inspect-btn").click()
            expect(page.locator("#corpus-summary")).to_contain_text("preference", timeout=120_000)
            expect(page.locator("#corpus-summary")).to_contain_text("720")
            page.get_by_label("Corpus name").fill("poem-pairs")
            page.locator("#save-corpus-btn").click()
            expect(page.locator("#corpus-saved")).to_contain_text("Saved corpus", timeout=120_000)

            page.get_by_role("tab", name="Train").click()
            _pick(page, "Start from", "shipped: minimind-tang")
            page.locator("#train-mode").get_by_text("dpo", exact=True).click()
            page.locator("#train-weights").get_by_text("LoRA", exact=True).click()
            _pick(page, "Corpus", "poem-pairs")
            page.locator("#train-steps input").fill("4")
            page.get_by_label("Sequence length").fill("128")
            page.get_by_label("Batch size").fill("2")
            page.locator("#start-btn").click()
            expect(page.locator("#train-message")).to_contain_text(re.compile(r"Queued|is training"), timeout=60_000)
            expect(page.locator("#train-progress")).to_contain_text("finished: step 4/4", timeout=600_000)
            expect(page.locator("#objective-plot")).to_be_visible(timeout=60_000)
            expect(page.locator("#train-facts")).to_contain_text(re.compile(r"Preference accuracy"))
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "tab-train-dpo.png"), full_page=True)
        except Exception:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "dpo-failure.png"), full_page=True)
            raise
        finally:
            browser.close()

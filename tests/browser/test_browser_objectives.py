"""The Train tab in headless Chromium: choosing dpo shows the weights and beta inputs, choosing
distill shows the teacher picker and its settings, and a plain mode hides them again."""

import re

import pytest
from helpers import ROOT
from webapp_helpers import make_shipped, pick

pytestmark = pytest.mark.browser


def test_dpo_and_distill_show_their_own_inputs(tmp_path, studio_page):
    from playwright.sync_api import expect

    shipped = tmp_path / "checkpoints" / "minimind-tang"  # the picker only lists it: a stand-in folder does
    shipped.mkdir(parents=True)
    (shipped / "config.json").write_text("{}")
    page = studio_page(shipped_dir=shipped.parent, background_jobs=False)
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
    studio_page.screenshot("tab-train-distill")

    mode.get_by_text("lora", exact=True).click()
    expect(weights).to_be_hidden()
    expect(teacher).to_be_hidden()
    expect(page.locator("#train-steps input")).to_have_value("100")


def test_a_dpo_run_from_the_page(tmp_path, studio_page):
    """A newcomer's DPO: upload the preference sample, save it, start a LoRA DPO run of the shipped
    model from the Train tab, watch it finish; the objective's own plot and figures appear."""
    from playwright.sync_api import expect

    page = studio_page(shipped_dir=make_shipped(tmp_path / "checkpoints"))
    expect(page.locator("#title")).to_contain_text("MiniMind Studio")
    studio_page.inspect_upload(ROOT / "samples" / "tang_preference.jsonl")
    expect(page.locator("#corpus-summary")).to_contain_text("preference", timeout=120_000)
    expect(page.locator("#corpus-summary")).to_contain_text("720")
    studio_page.save_corpus("poem-pairs")

    page.get_by_role("tab", name="Train").click()
    pick(page, "Start from", "shipped: minimind-tang")
    page.locator("#train-mode").get_by_text("dpo", exact=True).click()
    page.locator("#train-weights").get_by_text("LoRA", exact=True).click()
    pick(page, "Corpus", "poem-pairs")
    studio_page.fill_train_form(steps=4, seq_len=128, batch_size=2)
    studio_page.start_run()
    expect(page.locator("#train-progress")).to_contain_text("finished: step 4/4", timeout=600_000)
    expect(page.locator("#objective-plot")).to_be_visible(timeout=60_000)
    expect(page.locator("#train-facts")).to_contain_text(re.compile(r"Preference accuracy"))
    studio_page.screenshot("tab-train-dpo")

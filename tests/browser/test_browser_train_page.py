"""The Train tab in headless Chromium, as a newcomer meets it: the basics shown (the corpus saved
last already chosen), the rest under closed Advanced settings; the Runs table has named columns
before any run; the steps and minutes fields show as "Stop after" says; a LoRA run of the shipped
MiniMind-Tang, named on the form, is that name in the Runs table; stopped from the page, it says in
the page's words how to go on (no command-line hint), and once resumed and finished, says so; and
the browser's console logs no error all along. (A run for a budget in minutes, its two loss lines
drawn live and named: the newcomer's walk and the short runs.)"""

import re

import pytest
from helpers import ROOT
from webapp_helpers import needs_shipped, pick

from webapp.workspace import Workspace

pytestmark = [pytest.mark.browser, needs_shipped("minimind-tang")]


def _step(page) -> int:
    return int(page.locator("#run-progress").get_attribute("data-step") or 0)


def test_a_named_run_is_stopped_and_resumed_in_page_words(studio_page):
    from playwright.sync_api import expect

    ws = Workspace(studio_page.workspace)
    ws.save_corpus("chats", [ROOT / "samples" / "tang_chat_sample.jsonl"], {"kind": "auto"},
                   {"kind": "chat", "documents": 314})
    page = studio_page()  # the shipped models of the repository
    errors = []  # what the browser's console says is wrong (a script's exception included)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.get_by_role("tab", name="Train").click()
    # two layers: the basics, each mode's own fields only for it, and the rest under closed Advanced settings
    for basic in ("#train-base", "#train-mode", "#train-corpus", "#train-stop-after", "#train-steps",
                  "#train-run-name", "#estimate-btn", "#start-btn"):
        expect(page.locator(basic)).to_be_visible()
    expect(page.locator("#train-corpus input")).to_have_value("chats")  # the corpus saved last
    expect(page.locator("#train-advanced")).to_be_visible()
    expect(page.locator("#train-advanced [data-testid=accordion-content]")).to_be_hidden()
    for advanced in ("#train-batch", "#train-seq-len", "#train-lr", "#train-precision", "#train-processes",
                     "#train-report-to"):
        expect(page.locator(advanced)).to_be_hidden()
    for other_modes in ("#train-beta", "#train-teacher", "#train-grpo", "#train-architecture"):
        expect(page.locator(other_modes)).to_be_hidden()
    runs = page.locator("#runs-table")
    for moment in ("as drawn", "after the page's first watch"):
        if moment != "as drawn":
            expect(page.get_by_text("Queue: empty")).to_be_visible()
        expect(runs).to_contain_text("state")
        headers = [h.strip() for h in runs.locator("th").all_inner_texts() if h.strip()]
        assert {"run", "state", "mode", "step", "val_loss"} <= set(headers), (moment, headers)
        assert not {"1", "2", "3"} & set(headers), (moment, headers)  # not Gradio's placeholders
        expect(runs.locator("tbody tr")).to_have_count(0)  # no blank row

    pick(page, "Start from", "shipped: minimind-tang")
    pick(page, "Corpus", "chats")
    studio_page.fill_train_form(steps=150, seq_len=64, batch_size=4, eval_every=0)
    expect(page.locator("#train-rank")).to_be_visible()  # LoRA trains: its rank and alpha show
    expect(page.locator("#train-minutes")).to_be_hidden()
    page.locator("#train-stop-after").get_by_text("minutes", exact=True).click()
    expect(page.locator("#train-minutes")).to_be_visible()
    expect(page.locator("#train-steps")).to_be_hidden()
    page.locator("#train-stop-after").get_by_text("steps", exact=True).click()  # (a minutes budget: the newcomer's walk)
    expect(page.locator("#train-steps")).to_be_visible()
    page.locator("#train-run-name").get_by_role("textbox").fill("tang steps")

    # stop a run in steps, then resume it to the end
    page.locator("#start-btn").click()
    # the message says the run's state when Start answers: queued, or already training where the device was free
    expect(page.locator("#train-message")).to_contain_text(re.compile(r"Queued|is training"), timeout=60_000)
    expect(page.locator("#train-run input")).to_have_value("tang-steps")  # its name, made folder-safe
    expect(runs.locator("tbody tr").first).to_contain_text("tang-steps")
    for _ in range(30):  # the new run at once, never a "finished"
        assert "finished" not in page.locator("#train-progress").inner_text()
        page.wait_for_timeout(100)
    expect(page.locator("#train-progress")).to_contain_text(re.compile(r"running( \([^)]*\))?: step [1-9]"),
                                                            timeout=300_000)
    studio_page.screenshot("tab-train-running")
    page.locator("#stop-btn").click()
    message = page.locator("#train-message")
    expect(message).to_contain_text(re.compile(r"stopped at step \d+ — press Resume to continue"),
                                    timeout=120_000)
    log = page.locator("#train-log textarea")
    expect(log).to_have_value(re.compile(r"stopped at step \d+ \(checkpoint saved\) — press Resume to continue"),
                              timeout=90_000)
    assert "--resume" not in page.locator("body").inner_text() + log.input_value()
    stopped_at = _step(page)
    assert 0 < stopped_at < 150

    page.locator("#resume-btn").click()
    expect(message).to_contain_text(re.compile(r"to resume|is training \(resumed\)"), timeout=60_000)
    expect(page.locator("#train-progress")).to_contain_text("finished: step 150/150", timeout=600_000)
    expect(message).to_contain_text("finished: 150 steps", timeout=90_000)
    expect(message).not_to_contain_text("resume")
    assert "--resume" not in page.locator("body").inner_text() + log.input_value()
    assert errors == []

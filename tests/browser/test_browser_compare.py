"""The architecture lab in headless Chromium (issue 17, item 3): a new model with a non-default
position encoding (ALiBi) is created from the new-model form and trained a few steps on the
shipped Shakespeare sample, a new LSTM + attention beside it (after its Start the progress bar
never shows the first run's "finished"); both are picked in Compare runs,
which draws four lines (each run's train and validation loss) and a table naming each run's
architecture; then both answer side by side on the Chat tab. Screenshots go to test-artifacts/."""

import re

import pytest
from helpers import ROOT
from webapp_helpers import make_shipped, pick, wait_for

from minimind.config import POSITION_ENCODINGS
from minimind.training import RunDir
from webapp.workspace import Workspace

FIRST = "Transformer · ALiBi" if "alibi" in POSITION_ENCODINGS else "Transformer · learned positions"
SECOND = "LSTM + attention"

pytestmark = pytest.mark.browser


def _train(studio_page, ws: Workspace, architecture: str) -> str:
    """Fill the new-model form (pico, `architecture`), start it, wait for it to finish: its run id."""
    from playwright.sync_api import expect

    page = studio_page.page
    before = page.locator("#train-run input").input_value()

    pick(page, "Start from", "new model: pico")
    page.locator("#train-mode").get_by_text("pretrain", exact=True).click()
    studio_page.open_advanced()  # a new model's architecture is an advanced setting
    expect(page.locator("#train-architecture")).to_be_visible()
    pick(page, "Architecture", architecture)
    pick(page, "Corpus", "shakespeare")
    studio_page.fill_train_form(steps=6, batch_size=4, seq_len=32, eval_every=3)
    studio_page.start_run()
    run_input = page.locator("#train-run input")
    expect(run_input).not_to_have_value(before or "-")  # the new run is the one shown
    if before:  # ... at once: the bar never shows the previous run's "finished" (a refresh in flight)
        for _ in range(30):
            assert "finished" not in page.locator("#train-progress").inner_text()
            page.wait_for_timeout(100)
    run_id = run_input.input_value()
    run = RunDir(ws.runs / run_id)
    wait_for(lambda: run.read_status().get("state") in ("finished", "failed"), timeout=300, what=f"{run_id}")
    assert run.read_status()["state"] == "finished", run.read_status().get("error")
    expect(page.locator("#train-progress")).to_contain_text("finished: step 6/6", timeout=90_000)
    return run_id


def _ticks(plot) -> list[float]:
    """The numbers a plot shows (its axes' tick labels)."""
    return [float(n.replace(",", "")) for n in re.findall(r"^[\d,.]+$", plot.inner_text(), re.MULTILINE)] or [0.0]


def test_two_architectures_trained_compared_and_chatted_with(tmp_path, studio_page):
    from playwright.sync_api import expect

    ws = Workspace(studio_page.workspace)
    ws.save_corpus("shakespeare", [ROOT / "samples" / "shakespeare_sample.txt"], {"kind": "auto"},
                   {"kind": "text", "documents": 300})
    page = studio_page(shipped_dir=make_shipped(tmp_path / "checkpoints"))
    page.get_by_role("tab", name="Train").click()
    # the architecture belongs to a new model: hidden while a fine-tune's base is chosen
    pick(page, "Start from", "shipped: minimind-tang")
    expect(page.locator("#train-architecture")).to_be_hidden()

    first = _train(studio_page, ws, FIRST)
    expect(page.locator("#train-facts")).to_contain_text(f"Architecture: {FIRST}")
    second = _train(studio_page, ws, SECOND)
    assert first != second

    # Compare runs: both picked, four lines named in the legend, their final figures beside
    page.locator("#tab-train").get_by_role("button", name="Refresh").click()
    for run_id in (first, second):  # by exact name: a second run of the same second is "<first>-2"
        page.get_by_role("combobox", name="Runs to compare").click()
        page.get_by_role("option", name=run_id, exact=True).click()
    page.keyboard.press("Escape")
    chosen = page.locator("#compare-runs .token")
    expect(chosen).to_have_text([first, second])
    page.locator("#compare-btn").click()
    # the legend's names in full (its labels cut long ones short on screen)
    legend = page.locator("#compare-plot .role-legend").first
    expect(legend).to_have_attribute("aria-label", re.compile("with 4 values"), timeout=60_000)
    for run_id in (first, second):
        for line in ("train", "validation"):
            expect(legend).to_have_attribute("aria-label", re.compile(re.escape(f"{run_id} · {line}")))
    expect(page.locator("#compare-plot .role-legend-symbol path")).to_have_count(4)
    table = page.locator("#compare-table")
    for text in (first, second, FIRST, SECOND, "train_loss", "tokens_per_s"):
        expect(table).to_contain_text(text)
    # the x axis by tokens: the same lines, redrawn at the tokens each step had seen (tens of
    # them per step here: the axis reaches far past the 6 steps)
    page.locator("#compare-axis").get_by_text("tokens trained on", exact=True).click()
    plot = page.locator("#compare-plot")
    expect(plot).to_contain_text("tokens trained on", timeout=90_000)
    wait_for(lambda: max(_ticks(plot)) > 50, timeout=90, every=0.3, what="the tokens axis")
    expect(page.locator("#compare-plot .role-legend-symbol path")).to_have_count(4)
    studio_page.screenshot("compare-runs")

    # Chat with both runs side by side: the transformer and the LSTM answer the same message
    page.get_by_role("tab", name="Chat").click()
    pick(page, "Model", f"run {first}")
    page.locator("#chat-side-by-side input[type=checkbox]").check()
    pick(page, "Second model", f"run {second}")
    box = page.locator("#chat-input textarea")
    box.fill("To be, or not")
    box.press("Enter")
    for chatbot in ("#chatbot", "#chatbot-b"):
        answer = page.locator(f"{chatbot} [data-testid=bot]")
        expect(answer).to_have_count(1, timeout=60_000)
        expect(answer).to_have_text(re.compile(r"\S"), timeout=60_000)
        assert "\ufffd" not in answer.inner_text()
    studio_page.screenshot("compare-chat")

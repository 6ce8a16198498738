"""Issue 19's newcomer walk, in headless Chromium with the real shipped models: upload a Song ci
corpus (simplified characters), read how the shipped MiniMind-Tang's tokenizer spells it, save it,
LoRA-fine-tune MiniMind-Tang for a budget in minutes with the corpus's characters added to the
vocabulary, watch both loss lines drawn live and named, chat with the result (the message box
first, Enter sends), compare it side by side with the start model (panes named by model), and
export it with a perplexity that agrees with `minimind eval` on the same text. Every assertion is
on what a person sees; no command-line hint appears anywhere. Screenshots go to test-artifacts/."""

import math
import re

import pytest
from helpers import ROOT
from webapp_helpers import SHIPPED, needs_shipped, pick, table_headers, table_rows

from webapp.workspace import Workspace

SONGCI = ROOT / "samples" / "songci_sample.jsonl"
CLI_HINTS = re.compile(r"--resume|--set|python -m|minimind train")

pytestmark = [pytest.mark.browser, needs_shipped("minimind-tang")]


def _no_cli_hints(page) -> None:
    text = page.locator("body").inner_text() + "".join(page.locator("textarea").evaluate_all(
        "els => els.map(e => e.value)"))
    assert not CLI_HINTS.search(text), CLI_HINTS.search(text)


def test_a_newcomer_fine_tunes_on_song_ci_chats_and_exports(studio_page):
    from playwright.sync_api import expect

    from minimind.checkpoint import load_model, load_tokenizer_for
    from minimind.evaluate import evaluate_documents
    from minimind.export import default_eval_text

    page = studio_page(shipped_dir=SHIPPED)
    expect(page.locator("#title")).to_contain_text("MiniMind Studio")

    # Corpus: upload, inspect: the page says the shipped tokenizer spells it badly, and what to do
    studio_page.inspect_upload(SONGCI)
    summary = page.locator("#corpus-summary")
    expect(summary).to_contain_text("Documents", timeout=120_000)
    expect(summary).to_contain_text("Tokenizer coverage")
    expect(summary).to_contain_text(re.compile(r"minimind-tang: \d+\.\d % of the characters in byte pieces"))
    expect(summary).to_contain_text("Add the corpus's characters to the vocabulary")
    studio_page.save_corpus("songci")
    studio_page.screenshot("newcomer-corpus")

    # Train: LoRA of the shipped model, the vocabulary extended, for half a minute
    studio_page.choose_training("shipped: minimind-tang", "lora", "songci")
    studio_page.fill_train_form(seq_len=64, batch_size=4, eval_every=2)
    page.locator("#train-extend-vocab input[type=checkbox]").check()
    page.locator("#train-stop-after").get_by_text("minutes", exact=True).click()
    page.locator("#train-minutes input").fill("0.5")
    page.locator("#estimate-btn").click()
    expect(page.locator("#estimate")).to_contain_text(re.compile(r"the run adds [\d,]+ of them as tokens"),
                                                      timeout=120_000)
    studio_page.start_run()
    legend = page.locator("#loss-plot .role-legend").first
    expect(legend).to_contain_text("train", timeout=300_000)  # both lines from the first live draw
    expect(legend).to_contain_text("validation")
    expect(legend).to_contain_text("loss on")
    expect(legend).not_to_contain_text("series")
    expect(page.locator("#train-log textarea")).to_have_value(re.compile(r"eval step"), timeout=300_000)
    symbols = page.locator("#loss-plot .role-legend-symbol path")
    expect(symbols).to_have_count(2)  # a coloured symbol for each line: both are drawn
    strokes = symbols.evaluate_all("els => els.map(e => e.getAttribute('stroke'))")
    assert len(set(strokes)) == 2 and None not in strokes, strokes
    legend_box, plot_box = legend.bounding_box(), page.locator("#loss-plot").bounding_box()
    assert legend_box["y"] + legend_box["height"] <= plot_box["y"] + plot_box["height"]  # not clipped
    expect(page.locator("#train-progress")).to_contain_text("finished", timeout=300_000)
    run_id = page.locator("#train-run input").input_value()
    run = Workspace(studio_page.workspace).runs / run_id
    assert "characters added as tokens" in (run / "train.log").read_text(encoding="utf-8")
    _no_cli_hints(page)
    studio_page.screenshot("newcomer-train")

    # Chat: the message box is where typing goes, Enter sends; side by side names both models
    page.get_by_role("tab", name="Chat").click()
    pick(page, "Model", f"run {run_id}")
    box = page.locator("#chat-input textarea")
    box.fill("以《浣溪沙》为题写一首词")
    box.press("Enter")
    answer = page.locator("#chatbot [data-testid=bot]")
    expect(answer).to_have_count(1, timeout=60_000)
    expect(answer).to_have_text(re.compile(r"[^\s…]"), timeout=60_000)
    assert "\ufffd" not in answer.inner_text()
    page.locator("#chat-side-by-side input[type=checkbox]").check()
    pick(page, "Second model", "shipped: minimind-tang")
    expect(page.locator("#chatbot")).to_contain_text(run_id)
    expect(page.locator("#chatbot-b")).to_contain_text("minimind-tang")
    studio_page.screenshot("newcomer-chat")

    # Export: merged weights, scored on the run's own held-out text; the figure agrees with eval
    page.get_by_role("tab", name="Export").click()
    pick(page, "Model", f"run {run_id}")
    formats = page.locator("#export-formats")
    formats.get_by_label("hf", exact=True).uncheck()
    formats.get_by_label("merged", exact=True).check()
    page.locator("#export-btn").click()
    expect(page.locator("#export-table")).to_contain_text("verified", timeout=300_000)
    expect(page.locator("#export-message")).to_contain_text(f"validation split of run {run_id}")
    (row,) = table_rows(page, "export-table")
    shown = float(dict(zip(table_headers(page, "export-table"), row))["perplexity"].replace(",", ""))
    _no_cli_hints(page)
    studio_page.screenshot("newcomer-export")

    final = max((run / "checkpoints").glob("step-*"), key=lambda p: int(p.name[5:]))
    docs, _ = default_eval_text(final)
    model = load_model(final, merge=True)
    measured = evaluate_documents(model, load_tokenizer_for(final), docs,
                                  context=model.config.max_position_embeddings).perplexity
    assert math.isfinite(shown) and 0.5 < shown / measured < 2, (shown, measured)

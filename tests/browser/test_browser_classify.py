"""Issue 18's classification walk in headless Chromium: a new user uploads a CSV of labelled text
(Chinese poem lines and English play lines), sees its kind and classes, saves it, and on the Train
tab is offered the classification task; a short LoRA run (from a tiny stand-in for the shipped
model, so the walk takes seconds: the real MiniMind-Tang trains the same way, only slower) shows
its accuracy and macro-F1 and, once finished, its confusion matrix; on the Chat tab the Try panel
gives the label probabilities of a typed text; on the Export tab it exports as ONNX with its
held-out accuracy. Screenshots go to test-artifacts/."""

import importlib.util
import re
from pathlib import Path

import pytest
from helpers import SAMPLE_TEXTS
from webapp_helpers import make_shipped, pick, table_headers, table_rows, wait_for

from minimind.training import RunDir
from webapp.workspace import Workspace

pytestmark = pytest.mark.browser


def write_csv(path: Path, n: int = 60) -> Path:
    """Two classes of clearly different text: pieces of Tang poems ("poem"), of English plays ("play")."""
    poem, play = "".join(SAMPLE_TEXTS[:3]), " ".join(SAMPLE_TEXTS[3:6])
    lines = ["text,label"]
    for i in range(n):
        source, label = (poem, "poem") if i % 2 else (play, "play")
        start = (i * 7) % (len(source) - 12)
        piece = re.sub(r'[,"\n]', " ", source[start:start + 8 + i % 4]).strip() or "x"
        lines.append(f"{piece},{label}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_new_user_trains_a_classifier_sees_its_confusion_matrix_and_tries_it(tmp_path, studio_page):
    from playwright.sync_api import expect

    csv = write_csv(tmp_path / "lines.csv")
    page = studio_page(shipped_dir=make_shipped(tmp_path / "checkpoints"))
    # Corpus: the CSV is labelled text, with its two classes counted
    studio_page.inspect_upload(csv)
    summary = page.locator("#corpus-summary")
    expect(summary).to_contain_text("Kind: labelled", timeout=60_000)
    expect(summary).to_contain_text("Classes (2):")
    expect(summary).to_contain_text("play: 30")
    expect(summary).to_contain_text("poem: 30")
    studio_page.save_corpus("lines", saved="lines", timeout=60_000)

    # Train: the labelled corpus offers the classification task
    page.get_by_role("tab", name="Train").click()
    expect(page.locator("#train-corpus input")).to_have_value("lines")  # the corpus saved last, offered first
    expect(page.locator("#train-classify")).to_be_visible()
    pick(page, "Start from", "shipped: minimind-tang")
    pick(page, "Corpus", "lines")
    expect(page.locator("#train-classify")).to_be_visible()
    expect(page.locator("#train-task input[value=classify]")).to_be_checked()
    page.locator("#train-mode").get_by_text("lora", exact=True).click()
    studio_page.fill_train_form(steps=30, batch_size=8, seq_len=32, lr="0.003", eval_every=10)
    studio_page.start_run()
    run_id = page.locator("#train-run input").input_value()
    run = RunDir(Workspace(studio_page.workspace).runs / run_id)
    wait_for(lambda: run.read_status().get("state") in ("finished", "failed"), timeout=120, what=run_id)
    assert run.read_status()["state"] == "finished", run.read_status().get("error")

    # the run view: accuracy and macro-F1, their curves, and the confusion matrix
    expect(page.locator("#train-progress")).to_contain_text("finished: step 30/30", timeout=90_000)
    expect(page.locator("#train-facts")).to_contain_text("Val macro-F1:")
    expect(page.locator("#objective-plot")).to_be_visible()
    expect(page.locator("#confusion-line")).to_contain_text("Confusion matrix", timeout=90_000)
    table = page.locator("#confusion-table")
    expect(table).to_be_visible()
    for text in ("true \\ predicted", "play", "poem"):
        expect(table).to_contain_text(text)
    studio_page.screenshot("classify-run")

    # Chat tab: the Try panel gives each label's probability for a typed text
    page.get_by_role("tab", name="Chat").click()
    pick(page, "Classifier", f"run {run_id}")
    poem_line = csv.read_text(encoding="utf-8").splitlines()[2].rsplit(",", 1)[0]  # a "poem" row it learnt
    page.locator("#try-input textarea").fill(poem_line)
    page.locator("#try-btn").click()
    label = page.locator("#try-label")
    expect(label).to_contain_text("%", timeout=60_000)
    expect(label).to_contain_text("poem")
    expect(label).to_contain_text("play")
    expect(label.locator("h2")).to_have_text("poem")  # the most likely label, on top
    studio_page.screenshot("classify-try")

    # Export tab: picking the classifier checks ONNX; the table gives its held-out accuracy
    if importlib.util.find_spec("onnxruntime") and importlib.util.find_spec("onnxscript"):
        page.get_by_role("tab", name="Export").click()
        pick(page, "Model", f"run {run_id}")
        formats = page.locator("#export-formats")
        expect(formats.get_by_label("onnx", exact=True)).to_be_checked()
        expect(formats.get_by_label("hf", exact=True)).not_to_be_checked()
        page.locator("#export-btn").click()
        expect(page.locator("#export-table")).to_contain_text("verified", timeout=300_000)
        headers = table_headers(page, "export-table")
        assert "accuracy %" in headers and "perplexity" not in headers, headers
        (row,) = table_rows(page, "export-table")
        cells = dict(zip(headers, row))
        assert 50 <= float(cells["accuracy %"]) <= 100 and cells["accuracy %"] == cells["source accuracy %"]
        expect(page.locator("#export-message")).to_contain_text(f"validation split of run {run_id}")
        expect(page.locator("#export-files a").first).to_have_attribute("href", re.compile(r"-onnx\.zip$"))
        studio_page.screenshot("classify-export")

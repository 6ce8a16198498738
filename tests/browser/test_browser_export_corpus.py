"""What a newcomer sees on the Corpus and Export tabs, in headless Chromium (issue 19):
empty tables carry named headers and no blank rows, the length histogram is readable, and
exporting the shipped MiniMind-Tang gives a file named after it and a perplexity measured on
its own held-out text (hundreds, not millions). Screenshots go to test-artifacts/."""

import re

import pytest
from webapp_helpers import SHIPPED, needs_shipped, table_headers, table_rows

pytestmark = [pytest.mark.browser, needs_shipped("minimind-tang")]


def test_empty_corpus_tables_histogram_and_named_sane_export(tmp_path, studio_page):
    from playwright.sync_api import expect

    shipped = tmp_path / "checkpoints"
    shipped.mkdir()
    (shipped / "minimind-tang").symlink_to(SHIPPED / "minimind-tang")
    page = studio_page(shipped_dir=shipped)
    expect(page.locator("#title")).to_contain_text("MiniMind Studio")

    # Corpus tab before any upload: named headers, no "1 2 3", no blank saved-corpus row
    expect(page.locator("#saved-corpora")).to_contain_text("corpus")
    assert table_headers(page, "saved-corpora")[:4] == ["corpus", "kind", "documents", "tokenizer"]
    assert table_rows(page, "saved-corpora") == []
    assert table_headers(page, "corpus-samples") == ["sample"]
    for table in ("saved-corpora", "corpus-samples"):
        assert not re.fullmatch(r"[\d\s]*", " ".join(table_headers(page, table))), table_headers(page, table)
    studio_page.screenshot("corpus-empty")

    # the bundled Tang sample: at most 10 histogram bars with compact labels
    box = page.get_by_role("combobox", name="…or use a bundled sample")
    box.click()
    page.get_by_role("option", name="Tang poems (2,016 poems, JSONL)").click()
    page.locator("#inspect-btn").click()
    expect(page.locator("#corpus-summary")).to_contain_text("Documents", timeout=60_000)
    expect(page.locator("#corpus-samples tbody")).to_contain_text("，")
    expect(page.locator("#corpus-histogram canvas, #corpus-histogram svg").first).to_be_visible()
    studio_page.screenshot("corpus-histogram", page.locator("#corpus-histogram"))

    # Export the shipped model to one small format
    page.get_by_role("tab", name="Export").click()
    assert table_headers(page, "export-table")[:3] == ["format", "file", "size MB"]
    expect(page.get_by_role("combobox", name="Model")).to_have_value("shipped: minimind-tang")
    formats = page.locator("#export-formats")
    formats.get_by_label("hf", exact=True).uncheck()
    formats.get_by_label("gguf-q8_0", exact=True).check()
    page.locator("#export-btn").click()
    expect(page.locator("#export-table")).to_contain_text("verified", timeout=120_000)
    expect(page.locator("#export-files a").first).to_have_attribute(
        "href", re.compile(r"/minimind-tang-q8_0\.gguf$"))  # the file is named after the model
    expect(page.locator("#export-message")).to_contain_text("heldout_sample")  # names the text
    expect(page.locator("#export-message")).to_contain_text(re.compile(r"exports/\d{8}-\d{6}-minimind-tang\b"))
    headers = table_headers(page, "export-table")
    (row,) = table_rows(page, "export-table")
    cells = dict(zip(headers, row))
    assert cells["file"] == "minimind-tang-q8_0.gguf"
    ppl, source = float(cells["perplexity"]), float(cells["source perplexity"])
    assert 10 < source < 1000 and abs(ppl / source - 1) < 0.05, cells  # sane: hundreds, not millions
    studio_page.screenshot("export-shipped")

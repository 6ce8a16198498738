"""The README's screenshot is made here: MiniMind Studio as a newcomer first opens it, in English,
in a 1280 x 800 window, on the Train tab, saved to test-artifacts/studio.png. Copy that file to
docs/studio.png when the page changes; the second test checks that the README shows it and stays
short enough to read in five minutes."""

import re
import struct

import pytest
from helpers import ROOT
from webapp_helpers import ARTIFACTS, SHIPPED, make_shipped

pytestmark = pytest.mark.browser

README = ROOT / "README.md"
DOCS_IMAGE = ROOT / "docs" / "studio.png"
VIEWPORT = {"width": 1280, "height": 800}
TABS = ("Corpus", "Train", "Chat", "Export")


def png_size(path) -> tuple[int, int]:
    """(width, height) of a PNG file, read from its header."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_the_readme_screenshot_shows_the_tabs_and_the_train_form(tmp_path, studio_page):
    from playwright.sync_api import expect

    real = (SHIPPED / "minimind-tang" / "model.safetensors").is_file()
    shipped = SHIPPED if real else make_shipped(tmp_path / "checkpoints")
    page = studio_page(shipped_dir=shipped, locale="en-US")
    page.set_viewport_size(VIEWPORT)
    expect(page.locator("#title")).to_contain_text("MiniMind Studio")
    for name in TABS:
        expect(page.get_by_role("tab", name=name, exact=True)).to_be_visible()

    page.get_by_role("tab", name="Train", exact=True).click()
    expect(page.get_by_role("tab", name="Train", exact=True)).to_have_attribute("aria-selected", "true")
    expect(page.get_by_role("combobox", name="Start from")).to_have_value(re.compile(r"minimind-tang"))
    start = page.locator("#start-btn")
    expect(start).to_be_visible()
    expect(start).to_have_text("Start training")
    expect(page.locator("#estimate-btn")).to_be_visible()
    expect(page.locator("#tab-train")).to_contain_text(re.compile(r"Device: \w"))  # filled in when the page loads
    expect(page.locator(".pending")).to_have_count(0)  # nothing drawn faded, still loading

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "studio.png"
    page.screenshot(path=str(shot))  # the window, not the whole page: what a visitor sees first
    assert png_size(shot) == (VIEWPORT["width"], VIEWPORT["height"])
    assert 20_000 < shot.stat().st_size < 400_000  # a page was drawn, and small enough for the README


def test_the_readme_is_short_and_shows_the_screenshot():
    text = README.read_text(encoding="utf-8")
    lines = text.count("\n") + (not text.endswith("\n"))
    assert lines <= 260, f"README.md has {lines} lines: a newcomer reads it in five minutes (at most 260)"
    assert "](docs/studio.png)" in text, "README.md shows docs/studio.png"
    assert DOCS_IMAGE.is_file(), "docs/studio.png: copy test-artifacts/studio.png there"
    assert png_size(DOCS_IMAGE) == (VIEWPORT["width"], VIEWPORT["height"])
    assert DOCS_IMAGE.stat().st_size < 400_000
    # the test command CI runs (.ci/run) is the README's, word for word
    assert "pip install -r requirements-test.txt && pytest\n" in text

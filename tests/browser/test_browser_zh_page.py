"""The Chinese page (issue 19, item 9): a browser whose language is zh-CN sees every tab's
labels, buttons, the Device line and the messages the page composes at run time in Chinese,
with none of the English labels left over. Screenshots go to test-artifacts/."""

import re

import pytest
from webapp_helpers import make_shipped

pytestmark = pytest.mark.browser

# English labels the page translates: none may be left on the zh-CN page (whole words, case as shown)
DENY = ["Device", "Corpus", "Train", "Chat", "Export", "Inspect", "Statistics", "Samples", "Save corpus",
        "Saved corpora", "Kind", "Characters", "Documents", "Tokens", "Start from", "Mode", "Steps",
        "Batch size", "Learning rate", "Estimate", "Start training", "Stop", "Resume", "Refresh", "Queue",
        "empty", "Loss", "Log", "Runs", "Run", "Message", "Send", "Regenerate", "Clear", "Side by side",
        "Settings", "Formats", "Results", "Downloads", "Held-out", "paragraph", "No problems found",
        # table headers
        "corpus", "documents", "tokenizer", "state", "mode", "step", "perplexity", "status"]
DENIED = re.compile(r"\b(" + "|".join(re.escape(w) for w in DENY) + r")\b")


def _leftovers(page, elem_id: str) -> list[str]:
    """The deny-listed English words in what a person sees of a tab (its rendered text)."""
    text = page.locator(f"#{elem_id}").inner_text()
    return sorted({m.group(0) for m in DENIED.finditer(text)})


def test_chinese_page_has_no_english_labels_left(tmp_path, studio_page):
    from playwright.sync_api import expect

    page = studio_page(shipped_dir=make_shipped(tmp_path / "checkpoints"), locale="zh-CN")
    expect(page.get_by_role("tab", name="语料")).to_be_visible()

    # Corpus: a bundled sample, inspected: the statistics the server composes are Chinese too
    page.get_by_role("combobox", name="……或使用内置示例").click()
    page.get_by_role("option", name="唐诗（2,016 首，JSONL）").click()  # the samples' names are Chinese too
    page.locator("#inspect-btn").click()
    expect(page.locator("#corpus-summary")).to_contain_text("字符数", timeout=60_000)
    expect(page.locator("#corpus-problems")).to_contain_text("未发现问题")
    expect(page.locator("#inspect-btn")).to_have_text("检查")
    # the histogram drawn (its axis titles are text of the tab once it is)
    expect(page.locator("#corpus-histogram")).to_contain_text("文档数", timeout=90_000)
    assert _leftovers(page, "tab-corpus") == []
    studio_page.screenshot("zh-tab-corpus")

    # Train: the Device line and the run-time queue line (the timer's first tick)
    page.get_by_role("tab", name="训练").click()
    expect(page.locator("#tab-train")).to_contain_text("设备：")
    expect(page.locator("#tab-train")).to_contain_text("队列：", timeout=90_000)
    expect(page.locator("#start-btn")).to_have_text("开始训练")
    expect(page.locator("#estimate-btn")).to_have_text("估算规模与时间")
    expect(page.locator("#runs-table thead")).to_contain_text("状态")
    assert _leftovers(page, "tab-train") == []
    studio_page.screenshot("zh-tab-train")

    page.get_by_role("tab", name="对话").click()
    expect(page.locator("#chat-send")).to_have_text("发送")
    assert _leftovers(page, "tab-chat") == []

    page.get_by_role("tab", name="导出").click()
    expect(page.locator("#export-btn")).to_have_text("导出")
    assert _leftovers(page, "tab-export") == []
    studio_page.screenshot("zh-tab-export")

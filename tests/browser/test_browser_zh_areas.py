"""The Chinese page throughout (issue 44, item 7): on a zh-CN browser every area of the page is
Chinese, what the server composes included: the Corpus tab after inspecting a sample and after a
bad upload (its problems, and the pop-ups of a save without an inspection and of a bad name), the
Train tab with a finished run (the runs table's state, the progress line, the facts, the log, the
loss plot's axes and legend), Compare runs (axes, legend, table), Chat (its pop-up), Export and the
API panel. Each area fails the test listing the English left in it: the words the page used to
leave (DENY), and any run of three or more English words (names aside: NAMES)."""

import re
import time

import pytest
from helpers import ROOT
from webapp_helpers import make_shipped, pick, wait_for

from minimind.training import RunDir
from webapp.workspace import Workspace

pytestmark = pytest.mark.browser

# English the zh page used to leave (whole words, case as shown)
DENY = ["finished", "running", "queued", "stopped", "failed", "loss on", "validation", "train", "series",
        "metric", "value", "shipped", "imported", "Tang poems", "eval step", "saved", "speed probe",
        "measured", "decoder layers", "resumed from", "parameters", "trainable", "rows", "threads", "yes",
        "sample", "mean", "longest", "found", "expected", "malformed", "choose", "inspect", "upload",
        "The same models", "Classifier runs", "wall time", "Saved corpus", "Kind", "Documents", "Characters",
        "Device", "Corpus", "Train", "Chat", "Export", "Statistics", "Samples", "State", "Loss", "Log", "Runs",
        "Queue", "empty", "step", "mode", "state", "corpus", "documents", "tokenizer", "perplexity", "status"]
DENIED = re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in DENY) + r")(?![\w-])")
# names and symbols that stay as they are: in quotes or backticks, paths, runs, checkpoints, models
NAMES = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|\S*/\S*|\S+\.(?:jsonl|json|txt|csv|md|parquet)\b|"
                   r"\b\d{8}-\d{6}-[\w-]+|\bstep-\d+|minimind-\w+|MiniMind|Q?LoRA|GRPO|DPO|GGUF|ONNX|bf16|fp32|"
                   r"fp16|OpenAI|Hugging Face|Gradio|torch\.compile|Transformer|RoPE|TensorBoard|trackio|"
                   r"MINIMIND_\w+|HTTP Basic|JSONL|glibc mmap/trim|BPC|KL|Top-[pk]|CPU|GPU|DDP|FSDP2")
ENGLISH_RUN = re.compile(r"[A-Za-z]{2,}(?:[ \t,;:()·-]+[A-Za-z]{2,}){2,}")  # three or more words on a line

SEEN = """el => {
    const code = [...el.querySelectorAll('pre, code')];
    code.forEach(c => { c.dataset.display = c.style.display; c.style.display = 'none'; });
    const text = el.innerText;
    code.forEach(c => { c.style.display = c.dataset.display; });
    const values = [...el.querySelectorAll('input, textarea')]
        .filter(e => e.offsetParent !== null && !['file', 'radio', 'checkbox'].includes(e.type)).map(e => e.value);
    const drawn = [...el.querySelectorAll('svg text')].filter(t => t.getBBox().width > 0).map(t => t.textContent);
    return [text, ...values, ...drawn].join('\\n');
}"""


def english_left(page, selector: str) -> list[str]:
    """The English a person sees in an area (its text, its fields' values, its plots' words; code
    blocks aside): deny-listed words and runs of three or more English words, names aside."""
    seen = NAMES.sub(" ", page.locator(selector).first.evaluate(SEEN))
    left = {m.group(0) for m in DENIED.finditer(seen)}
    left |= {m.group(0) for line in seen.splitlines() for m in ENGLISH_RUN.finditer(line)}
    return sorted(left)


def popup(page, expected: str, studio_page=None) -> None:
    """The error pop-up says `expected` (in Chinese), its title too (a screenshot of it with
    `studio_page`); it is then closed."""
    from playwright.sync_api import expect

    toast = page.locator("[data-testid='toast-body']").last
    expect(toast).to_contain_text(expected, timeout=30_000)
    assert not re.search(r"[a-z]{3,} [a-z]{3,}", toast.locator(".toast-messages").inner_text()), toast.inner_text()
    title = toast.locator(".toast-title").evaluate("e => getComputedStyle(e, '::before').content + e.innerText")
    assert "出错了" in title, title  # Gradio's own title ("Error") is replaced on a Chinese page
    if studio_page is not None:
        studio_page.screenshot("zh-areas-popup", toast)
    toast.locator("[data-testid='toast-close']").click()


def test_every_area_of_the_chinese_page_is_chinese(tmp_path, studio_page):
    from playwright.sync_api import expect

    started = time.time()
    ws = Workspace(studio_page.workspace)
    ws.save_corpus("chats", [ROOT / "samples" / "tang_chat_sample.jsonl"], {"kind": "auto"},
                   {"kind": "chat", "documents": 314})
    page = studio_page(shipped_dir=make_shipped(tmp_path / "checkpoints"), locale="zh-CN")
    left = {}

    # Train: a short LoRA run of the shipped model
    page.get_by_role("tab", name="训练").click()
    pick(page, "起点模型", "内置：minimind-tang")
    pick(page, "语料", "chats")
    page.locator("#train-steps input").fill("4")
    advanced = page.locator("#train-advanced")  # the settings below (closed at first)
    if advanced.count() and not advanced.locator("[data-testid=accordion-content]").is_visible():
        advanced.locator(".label-wrap").first.click()
    for label, value in (("批大小", 2), ("序列长度", 64), ("每隔多少步评估（0 = 自动）", 2)):
        page.get_by_label(label).fill(str(value))
    page.locator("#start-btn").click()
    expect(page.locator("#train-message")).to_contain_text(re.compile("已排队|正在训练"), timeout=60_000)
    run_id = page.locator("#train-run input").input_value()

    # the finished run in the runs table, the progress line, the facts, the log, the plot: the page opened
    # anew once it has finished (Gradio 6 leaves the lines of a plot first drawn empty undrawn when a whole
    # curve arrives in one update, as a four-step run's does, in any language)
    run = RunDir(ws.runs / run_id)
    wait_for(lambda: run.read_status().get("state") in ("finished", "failed"), timeout=240, what="the run")
    assert run.read_status()["state"] == "finished", run.read_status().get("error")
    page.reload()
    page.get_by_role("tab", name="训练").click()
    expect(page.locator("#train-progress")).to_contain_text("已完成：第 4/4 步", timeout=60_000)
    expect(page.locator("#runs-table tbody")).to_contain_text("已完成")
    expect(page.locator("#train-log textarea")).to_have_value(re.compile("第 \\d+ 步评估：损失"), timeout=30_000)
    expect(page.locator("#train-log textarea")).to_have_value(re.compile("完成：4 步"))
    legend = page.locator("#loss-plot .role-legend").first
    expect(legend).to_contain_text("数据集", timeout=60_000)
    expect(legend).to_contain_text("训练集")
    expect(legend).to_contain_text("验证集")
    expect(page.locator("#loss-plot .role-axis-title").first).to_be_visible()

    # Compare runs: the finished run on its axes, with its legend and table
    page.get_by_role("combobox", name="要对比的训练").click()
    page.get_by_role("option", name=run_id, exact=True).click()
    page.keyboard.press("Escape")
    page.locator("#compare-btn").click()
    expect(page.locator("#compare-plot .role-legend").first).to_contain_text("训练 · 损失", timeout=60_000)
    expect(page.locator("#compare-table tbody")).to_contain_text(run_id)
    left["Train"] = english_left(page, "#tab-train")
    studio_page.screenshot("zh-areas-train")

    # Corpus: a sample inspected (its statistics, kinds and samples table), a bad upload's problems
    page.get_by_role("tab", name="语料").click()
    page.locator("#save-corpus-btn").click()  # nothing inspected yet: a pop-up says what to do
    popup(page, "请先检查语料，再保存", studio_page)
    pick(page, "……或使用内置示例", "唐诗偏好（720 对，用于 DPO，JSONL）")
    page.locator("#inspect-btn").click()
    expect(page.locator("#corpus-summary")).to_contain_text("偏好", timeout=60_000)
    expect(page.locator("#corpus-summary")).to_contain_text("平均")
    expect(page.locator("#corpus-samples thead")).to_contain_text("较好的回答")
    expect(page.locator("#corpus-histogram")).to_contain_text("文档数", timeout=60_000)
    left["Corpus, a sample"] = english_left(page, "#tab-corpus")
    page.get_by_label("语料名称").fill("!!!")
    page.locator("#save-corpus-btn").click()
    popup(page, "不能用作名称")
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"text": "床前明月光"}\n{"text": broken\n{"title": "静夜思"}\n', encoding="utf-8")
    studio_page.inspect_upload(bad)
    expect(page.locator("#corpus-problems")).to_contain_text("JSON 格式错误", timeout=60_000)
    expect(page.locator("#corpus-problems")).to_contain_text("第 3 行：缺少字段 'text'")
    left["Corpus, a bad upload"] = english_left(page, "#tab-corpus")
    studio_page.screenshot("zh-areas-corpus")

    # Chat: a message left empty is refused in Chinese
    page.get_by_role("tab", name="对话").click()
    page.locator("#chat-send").click()
    popup(page, "请先输入消息")
    left["Chat"] = english_left(page, "#tab-chat")

    page.get_by_role("tab", name="导出").click()
    expect(page.locator("#export-btn")).to_have_text("导出")
    left["Export"] = english_left(page, "#tab-export")

    page.get_by_text("OpenAI 兼容接口").click()
    expect(page.locator("#api-help")).to_contain_text("同样的模型也在")
    left["API panel"] = english_left(page, "#api-panel")
    studio_page.screenshot("zh-areas-api")

    assert {area: words for area, words in left.items() if words} == {}
    assert time.time() - started < 150

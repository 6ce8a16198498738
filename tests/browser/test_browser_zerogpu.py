"""A ZeroGPU Space's Train tab in headless Chromium, through the ZeroGPU stand-in: a LoRA run started
from the page trains in GPU slices, the page says which slice it is in, and the run finishes."""

import re

import pytest
from helpers import ROOT
from training_helpers import save_base_model
from zerogpu_standin import StandInGpu

from webapp.workspace import Workspace

pytestmark = pytest.mark.browser


def test_a_run_started_on_the_page_trains_in_gpu_slices(studio_page, tmp_path, tokenizer, monkeypatch):
    from playwright.sync_api import expect

    monkeypatch.setenv("MINIMIND_SLICE_SECONDS", "8")
    save_base_model(tmp_path / "shipped" / "tiny", tokenizer)
    Workspace(studio_page.workspace).save_corpus("chats", [ROOT / "samples" / "tang_chat_sample.jsonl"],
                                                 {"kind": "auto"}, {"kind": "chat", "documents": 314})
    gpu = StandInGpu()
    page = studio_page(shipped_dir=tmp_path / "shipped", gpu_slices=gpu)
    studio_page.choose_training("shipped: tiny", "lora", "chats")
    studio_page.fill_train_form(steps=300, seq_len=64, batch_size=4)  # 2 slices alone, 3 beside the other test process
    studio_page.start_run()
    expect(page.locator("#train-facts")).to_contain_text(re.compile(r"GPU slice: [2-9]\d* \(up to 8 s each\)"),
                                                         timeout=300_000)
    expect(page.locator("#train-progress")).to_contain_text("finished: step 300/300", timeout=600_000)
    assert len(gpu.calls) >= 2 and all(call["outcome"] == "ok" for call in gpu.calls)
    studio_page.screenshot("tab-train-zerogpu")

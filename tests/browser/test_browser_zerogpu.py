"""A ZeroGPU Space's Train tab in headless Chromium, through the ZeroGPU stand-in: a LoRA run started
from the page trains in GPU slices, the page says which slice it is in, and the run finishes.
(How many slices a run takes depends on the machine's speed: 300 steps took 1 slice of 8 s on an
idle AVX2 core, 3 beside the other test process. A run resumed across slices from the app is
tests/studio/test_webapp_zerogpu.py, whose runs take 3 slices of 6 s.)"""

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
    studio_page.fill_train_form(steps=300, seq_len=64, batch_size=4)
    studio_page.start_run()
    expect(page.locator("#train-progress")).to_contain_text("finished: step 300/300", timeout=600_000)
    # the page names the last slice, one per call of the decorated function; the last ended well (beside
    # the other test process an 8-s slice that loads the model can overrun and be aborted, as ZeroGPU
    # aborts it: the next resumes from its last save, tests/training/test_training_slices.py)
    expect(page.locator("#train-facts")).to_contain_text(re.compile(r"GPU slice: [1-9]\d* \(up to 8 s each\)"))
    slices = int(re.search(r"GPU slice: (\d+)", page.locator("#train-facts").inner_text())[1])
    assert slices == len(gpu.calls) and gpu.calls[-1]["outcome"] == "ok", gpu.calls
    studio_page.screenshot("tab-train-zerogpu")

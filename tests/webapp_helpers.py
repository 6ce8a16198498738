"""A live MiniMind Studio server for tests: real uvicorn on 127.0.0.1, tiny shipped model."""

import socket
import threading
import time
from pathlib import Path

import torch
import uvicorn

from minimind import MiniMindForCausalLM
from minimind.tokenizer import build_tokenizer
from helpers import SAMPLE_TEXTS, tiny_config


# how many inputs /start_training takes (the page's Train form; the newest last, each with a default)
START_INPUTS = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_shipped(folder: Path) -> Path:
    """checkpoints/-like folder with one tiny chat-capable model named minimind-tang."""
    target = folder / "minimind-tang"
    tokenizer = build_tokenizer(SAMPLE_TEXTS, vocab_size=512, min_frequency=1)
    torch.manual_seed(0)
    model = MiniMindForCausalLM(tiny_config(vocab_size=len(tokenizer), max_position_embeddings=512))
    model.save_pretrained(target)
    tokenizer.save_pretrained(target, save_jinja_files=False)
    return folder


class LiveServer:
    def __init__(self, app, port: int):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.time() + 60
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)


def wait_for(predicate, timeout: float = 300, every: float = 0.5, what: str = "condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_page(pw, executable: str, **page_options):
    """(browser, page) in Debian's Chromium, headless, a 1400 x 1100 page waiting up to 60 s per step."""
    browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1400, "height": 1100}, **page_options)
    page.set_default_timeout(60_000)
    return browser, page


def pick(page, label: str, option: str) -> None:
    """Choose `option` in the Gradio dropdown labelled `label`."""
    page.get_by_role("combobox", name=label).click()
    page.get_by_role("option", name=option).first.click()


def table_headers(page, elem_id: str) -> list[str]:
    """The non-empty column headers of the Gradio table with elem_id `elem_id`."""
    return [h.strip() for h in page.locator(f"#{elem_id} thead th").all_inner_texts() if h.strip()]


def table_rows(page, elem_id: str) -> list[list[str]]:
    """The cells of each body row that holds anything, read from the first table (Gradio's
    layout copy of the data; the scrolling grid repeats it)."""
    rows = page.locator(f"#{elem_id} table").first.locator("tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.querySelectorAll('td')].map(c => c.textContent.trim()))")
    return [r for r in rows if any(r)]

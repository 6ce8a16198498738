"""A live MiniMind Studio server for tests: real uvicorn on 127.0.0.1, tiny shipped model."""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
import torch
import uvicorn
from helpers import ROOT, SAMPLE_TEXTS, free_port, tiny_config

from minimind import MiniMindForCausalLM
from minimind.tokenizer import build_tokenizer

# how many inputs /start_training takes (the page's Train form; the newest last, each with a default)
START_INPUTS = 31


# the sample corpora a page test saves, by the name it saves them under: (file in samples/, summary)
SAMPLE_CORPORA = {"chats": ("tang_chat_sample.jsonl", {"kind": "chat", "documents": 314}),
                  "prompts": ("tang_prompts.jsonl", {"kind": "prompts", "documents": 2000})}


def fake_model(folder: Path, adapter: bool = False) -> Path:
    """A folder the page lists as a model (config.json; adapter_config.json too for an adapter),
    with no weights: for handlers that only read the list."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    if adapter:
        (folder / "adapter_config.json").write_text("{}")
    return folder


def page_workspace(tmp_path: Path, corpora=("chats",)):
    """(workspace, shipped folder): the shipped MiniMind-Tang as a fake model folder and the named
    SAMPLE_CORPORA saved, as the Train tab's handlers read them."""
    from webapp.workspace import Workspace

    shipped = tmp_path / "checkpoints"
    fake_model(shipped / "minimind-tang")
    ws = Workspace(tmp_path / "ws")
    for name in corpora:
        file, summary = SAMPLE_CORPORA[name]
        ws.save_corpus(name, [ROOT / "samples" / file], {"kind": "auto"}, dict(summary))
    return ws, shipped


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
        # close now: a client's open stream (a queue's event stream) otherwise holds a graceful
        # shutdown until the join's 10 s run out
        self.server.should_exit = self.server.force_exit = True
        self.thread.join(timeout=10)


def wait_for(predicate, timeout: float = 300, every: float = 0.5, what: str = "condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def train_through_the_page(client, inputs: list, runs: Path, what: str = "the run") -> tuple[str, dict]:
    """Start a run through the page's API (/start_training with `inputs`, a gradio_client Client):
    the page says it is queued; it then finishes within 10 minutes in `runs`: (run id, its status)."""
    from minimind.training import RunDir

    run_choice, message = client.predict(*inputs, api_name="/start_training")
    run_id = run_choice if isinstance(run_choice, str) else run_choice["value"]
    assert "Queued" in message
    run = RunDir(runs / run_id)
    wait_for(lambda: run.read_status().get("state") in ("finished", "failed"), timeout=600, what=what)
    status = run.read_status()
    assert status["state"] == "finished", status.get("error")
    return run_id, status


CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"  # the browser walks' screenshots
SHIPPED = ROOT / "checkpoints"


def chromium_page(pw, executable: str, **page_options):
    """(browser, page) in Debian's Chromium, headless, a 1400 x 1100 page waiting up to 60 s per step."""
    browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1400, "height": 1100}, **page_options)
    page.set_default_timeout(60_000)
    return browser, page


def needs_shipped(*names: str):
    """Skip mark for a walk that uses the repository's shipped models (checkpoints/<name>, weights
    included); default: MiniMind-Tang."""
    missing = [n for n in names or ("minimind-tang",) if not (SHIPPED / n / "model.safetensors").is_file()]
    return pytest.mark.skipif(bool(missing), reason=f"needs the shipped {', '.join(missing)}")


class StudioPage:
    """What the `studio_page` fixture (tests/conftest.py) gives a browser walk: call it to serve
    MiniMind Studio on a free port and open it in headless Chromium; the server, the browser and
    Playwright close after the test (in that order reversed: browser, Playwright, server)."""

    def __init__(self, workspace: Path, stack: ExitStack):
        self.workspace = workspace  # the default workspace: <tmp_path>/workspace
        self._stack = stack
        self.url: str | None = None
        self.page = None

    def __call__(self, workspace: Path | None = None, *, locale: str | None = None,
                 accept_downloads: bool = False, **settings):
        """The page, at the Studio's address: `build_app(workspace, **settings)` (shipped_dir,
        background_jobs, access, ...) served by uvicorn, a 1400 x 1100 page (`locale`, e.g.
        "zh-CN"; `accept_downloads`) waiting up to 60 s per step."""
        from playwright.sync_api import sync_playwright

        from webapp.app import build_app

        assert self.page is None, "one page a test"
        app = build_app(workspace or self.workspace, **settings)
        self.url = self._stack.enter_context(LiveServer(app, free_port())).url
        pw = self._stack.enter_context(sync_playwright())
        options = {"accept_downloads": True} if accept_downloads else {}
        browser, self.page = chromium_page(pw, CHROMIUM, **({"locale": locale} if locale else {}), **options)
        self._stack.callback(browser.close)
        self.page.goto(self.url)
        # the page draws itself (or its login) after it loads: under the suite's load, more than expect()'s 5 s
        self.page.locator("#title, input[type=password]").first.wait_for(timeout=60_000)
        return self.page

    # the steps many walks take, each as a person does it on the page

    def inspect_upload(self, path: Path) -> None:
        """Corpus tab: upload the file at `path` and press Inspect once the upload has finished (its
        download link shows): pressed while the page still says "Uploading", Inspect reads no file."""
        from playwright.sync_api import expect

        self.page.locator("#corpus-upload input[type=file]").set_input_files(str(path))
        expect(self.page.locator(f'#corpus-upload a[download="{path.name}"]')).to_be_visible(timeout=60_000)
        self.page.locator("#inspect-btn").click()

    def save_corpus(self, name: str, saved: str = "Saved corpus", timeout: float = 120_000) -> None:
        """Corpus tab: save the inspected corpus as `name`; the page then says `saved`."""
        from playwright.sync_api import expect

        self.page.get_by_label("Corpus name").fill(name)
        self.page.locator("#save-corpus-btn").click()
        expect(self.page.locator("#corpus-saved")).to_contain_text(saved, timeout=timeout)

    def choose_training(self, start: str, mode: str, corpus: str) -> None:
        """Train tab (opened): start from `start` (e.g. "shipped: minimind-tang"), in mode `mode`, on the
        saved corpus `corpus`."""
        self.page.get_by_role("tab", name="Train").click()
        pick(self.page, "Start from", start)
        self.page.locator("#train-mode").get_by_text(mode, exact=True).click()
        pick(self.page, "Corpus", corpus)

    def open_advanced(self) -> None:
        """Train tab: open its Advanced settings (closed at first), unless they are open."""
        from playwright.sync_api import expect

        content = self.page.locator("#train-advanced [data-testid=accordion-content]")
        if not content.is_visible():
            self.page.locator("#train-advanced .label-wrap").first.click()
            expect(content).to_be_visible()

    def fill_train_form(self, *, steps=None, seq_len=None, batch_size=None, lr=None, eval_every=None) -> None:
        """Train tab: type the numbers given into their fields (the others keep their values), the
        Advanced settings opened for those under them."""
        page = self.page
        if any(value is not None for value in (seq_len, batch_size, lr, eval_every)):
            self.open_advanced()
        fields = [(page.locator("#train-steps input"), steps), (page.get_by_label("Sequence length"), seq_len),
                  (page.get_by_label("Batch size"), batch_size), (page.get_by_label("Learning rate"), lr),
                  (page.get_by_label("Evaluate every (steps, 0 = auto)"), eval_every)]
        for field, value in fields:
            if value is not None:
                field.fill(str(value))

    def start_run(self) -> None:
        """Train tab: press Start training; the page says the run is queued or training."""
        from playwright.sync_api import expect

        self.page.locator("#start-btn").click()
        expect(self.page.locator("#train-message")).to_contain_text(re.compile(r"Queued|is training"),
                                                                    timeout=60_000)

    def screenshot(self, name: str, element=None) -> Path:
        """A screenshot into test-artifacts/<name>.png: the full page, or just `element` (a locator)."""
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        if element is not None:
            element.screenshot(path=str(path))
        else:
            self.page.screenshot(path=str(path), full_page=True)
        return path


def pick(page, label: str, option: str) -> None:
    """Choose `option` in the Gradio dropdown labelled `label`."""
    page.get_by_role("combobox", name=label).click()
    page.get_by_role("option", name=option).first.click()


def download(page, link, folder: Path) -> Path:
    """Click a download link on `page` (opened with accept_downloads=True); the file saved in `folder`."""
    with page.expect_download() as info:
        link.click()
    saved = folder / info.value.suggested_filename
    info.value.save_as(saved)
    return saved


def table_headers(page, elem_id: str) -> list[str]:
    """The non-empty column headers of the Gradio table with elem_id `elem_id`."""
    return [h.strip() for h in page.locator(f"#{elem_id} thead th").all_inner_texts() if h.strip()]


def table_rows(page, elem_id: str) -> list[list[str]]:
    """The cells of each body row that holds anything, read from the first table (Gradio's
    layout copy of the data; the scrolling grid repeats it)."""
    rows = page.locator(f"#{elem_id} table").first.locator("tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.querySelectorAll('td')].map(c => c.textContent.trim()))")
    return [r for r in rows if any(r)]


def gradio_call(url: str, api_name: str, data: list, http=httpx, session_hash: str | None = None,
                timeout: float = 300, **kw) -> tuple[str, object]:
    """(event, payload) of one call through Gradio's HTTP API, as a script (not gradio_client,
    which would upload a local path itself) would make it; "refused" when the server answered 400
    before Gradio saw it. `http`: httpx, or a client holding a page session (with `session_hash`,
    calls share that session's state)."""
    body = {"data": data, **({"session_hash": session_hash} if session_hash else {})}
    started = http.post(f"{url}/gradio_api/call{api_name}", json=body, timeout=30, **kw)
    if started.status_code == 400:  # refused before Gradio saw it
        return "refused", started.json()
    assert started.status_code == 200, started.text
    stream = http.get(f"{url}/gradio_api/call{api_name}/{started.json()['event_id']}", timeout=timeout, **kw).text
    event, payload = "", None
    for line in stream.splitlines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            payload = json.loads(line[6:])
    return event, payload


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@contextmanager
def studio_process(root: Path, settings: dict[str, str], ready_auth=None):
    """The Studio as users run it (`python -m webapp`), in its own process so its memory can be
    read: (url, process) once /v1/models answers (with `ready_auth`, HTTP Basic, when it has a
    login). `settings` are its MINIMIND_* variables; none of the caller's own reach it."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIMIND_") and k not in (
        "SPACE_ID", "GRADIO_TEMP_DIR")}
    env.update({"PYTHONPATH": str(ROOT), "MINIMIND_HOME": str(root / "ws"), "GRADIO_SERVER_PORT": str(port),
                "GRADIO_SERVER_NAME": "127.0.0.1", **settings})
    url = f"http://127.0.0.1:{port}"
    with open(root / "server.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "webapp"], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)

        def up():
            assert proc.poll() is None, (root / "server.log").read_text()
            try:
                return httpx.get(url + "/v1/models", auth=ready_auth, timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            wait_for(up, timeout=180, every=0.5, what="the Studio to start")
            yield url, proc
        finally:
            proc.terminate()
            proc.wait(timeout=30)

"""The ONNX exports load in transformers.js in a real browser (headless Chromium), not only in Node.

A local HTTP server on 127.0.0.1 serves tests/js/browser.html + browser.mjs, tests/js/node_modules
(transformers.js's web build, ONNX Runtime Web and its wasm) and the export folders under /models/;
the page loads a folder with AutoTokenizer + AutoModelForCausalLM.from_pretrained(name) and default
options (in a browser: the wasm device, dtype q8 unless config.json's "transformers.js_config" says
otherwise) and shows its greedy ids, which must equal ours: the float export's PyTorch's, the int8
export's our ONNX Runtime runner's (as tests/export/test_export_onnx_js.py checks in Node).

Skipped where Debian's chromium or the ONNX packages are missing, or tests/js/node_modules is and
npm cannot install it. Nothing is fetched from outside 127.0.0.1 (a CDN's wasm fails the test); the
page's console is in the message of any failure.
"""

import json
import posixpath
import re
import shutil
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote, urlencode, urlsplit

import pytest
from helpers import free_port
from webapp_helpers import CHROMIUM, chromium_page

for package in ("onnxruntime", "onnxscript", "onnx"):  # as the Node test: skipped without the ONNX packages
    pytest.importorskip(package)

from minimind import MiniMindForCausalLM
from minimind.export.onnx import EXTERNAL_DATA, write_onnx
from minimind.export.onnx_runner import OnnxCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "export"))
import test_export_onnx_js as node_check  # the Node test: its fixtures, exports and reference ids
from test_export_onnx_js import JS, NEW_TOKENS, PACKAGE, PROMPT, _npm_ci, _until_end

# pytest finds these fixtures by their names here: the same trained model, export and reference ids
model_dir, exported, prompt_ids, torch_greedy = (
    node_check.model_dir, node_check.exported, node_check.prompt_ids, node_check.torch_greedy)

pytestmark = pytest.mark.browser

PAGE_TIMEOUT_MS = 180_000  # loading ONNX Runtime's wasm and generating 20 tokens takes seconds; a failure shows at once


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int):
        super().__init__(("127.0.0.1", port), _Handler)
        self.models: dict[str, Path] = {}  # /models/NAME/... -> the folder
        self.requested: list[str] = []  # every GET's path, in order


class _Handler(SimpleHTTPRequestHandler):
    """tests/js at /, the registered export folders at /models/NAME/; a missing file is a 404, which
    transformers.js reads as "no such optional file"."""

    extensions_map: ClassVar[dict[str, str]] = {
        **SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript", ".js": "text/javascript",
        ".wasm": "application/wasm", ".json": "application/json"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=str(JS), **kwargs)

    def translate_path(self, path: str) -> str:
        path = posixpath.normpath(unquote(urlsplit(path).path))
        parts = path.lstrip("/").split("/")
        if parts[0] == "models" and len(parts) > 2 and parts[1] in self.server.models and ".." not in parts:
            return str(self.server.models[parts[1]].joinpath(*parts[2:]))
        if parts[0] == "models":
            return str(JS / "no-such-file")
        return super().translate_path(path)

    def do_GET(self):
        self.server.requested.append(urlsplit(self.path).path)
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def web_packages() -> str:
    """The installed @huggingface/transformers version: tests/js/node_modules, installed with npm
    by the Node test's helper where missing (serving it needs no node)."""
    if not PACKAGE.is_file():
        if not shutil.which("npm"):
            pytest.skip("tests/js/node_modules is missing, and npm is needed to install it")
        _npm_ci()
    if not (JS / "node_modules" / "onnxruntime-web" / "dist").is_dir():
        pytest.skip("tests/js/node_modules has no onnxruntime-web")
    return json.loads(PACKAGE.read_text(encoding="utf-8"))["version"]


@pytest.fixture(scope="module")
def server(web_packages):
    assert web_packages.startswith("3."), web_packages
    srv = _Server(free_port())
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium, page = chromium_page(pw, CHROMIUM)
        page.close()
        yield chromium
        chromium.close()


def _browser_greedy(browser, server, name: str, folder: Path) -> tuple[list[int], list[int], list[str]]:
    """(prompt ids, greedy ids, the files the page fetched from the folder) from tests/js/browser.html."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    server.models[name] = folder
    start = len(server.requested)
    page = browser.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    page.on("requestfailed", lambda r: console.append(f"requestfailed: {r.url} {r.failure}"))
    page.on("response", lambda r: r.status >= 400 and console.append(f"HTTP {r.status}: {r.url}"))
    outside: list[str] = []  # nothing may come from elsewhere (a CDN's wasm, the Hub)
    page.route(re.compile(r"^(?!http://127\.0\.0\.1:)"), lambda route: (outside.append(route.request.url),
                                                                       route.abort()))
    try:
        query = urlencode({"model": name, "prompt": PROMPT, "new": NEW_TOKENS})
        page.goto(f"http://127.0.0.1:{server.server_port}/browser.html?{query}")
        try:
            page.locator("#result:not(:empty), #error:not(:empty)").first.wait_for(timeout=PAGE_TIMEOUT_MS)
        except PlaywrightTimeout:
            pytest.fail(f"no result in {PAGE_TIMEOUT_MS / 1000:.0f} s; status "
                        f"{page.locator('#status').text_content()!r}; console:\n" + "\n".join(console))
        error = page.locator("#error").text_content()
        assert not error, error + "\nconsole:\n" + "\n".join(console)
        out = json.loads(page.locator("#result").text_content())
        assert not outside, outside
    finally:
        page.close()
    print(f"{name}: {out}\nconsole:\n" + "\n".join(console))  # shown when an assertion below fails
    fetched = [p.removeprefix(f"/models/{name}/") for p in server.requested[start:]
               if p.startswith(f"/models/{name}/")]
    return out["prompt_ids"], out["generated_ids"], fetched


def test_browser_transformers_js_decodes_the_float_export_as_pytorch_does(browser, server, exported, prompt_ids,
                                                                          torch_greedy):
    """config.json's "transformers.js_config" says fp32, so the browser's default (q8) gives way to it."""
    js_prompt, js_ids, fetched = _browser_greedy(browser, server, "onnx", exported / "onnx")
    assert js_prompt == prompt_ids  # the exported tokenizer.json, read by transformers.js
    assert "onnx/model.onnx" in fetched and "onnx/model_quantized.onnx" not in fetched, fetched
    assert js_ids == torch_greedy


def test_browser_transformers_js_decodes_the_int8_export_as_onnx_runtime_does(browser, server, exported,
                                                                              prompt_ids, tokenizer):
    """q8, the browser's default dtype, is onnx/model_quantized.onnx; its greedy ids equal our ONNX
    Runtime runner's on the same graph."""
    ours = OnnxCausalLM(exported / "onnx-int8").generate_greedy(prompt_ids, NEW_TOKENS)
    js_prompt, js_ids, fetched = _browser_greedy(browser, server, "onnx-int8", exported / "onnx-int8")
    assert js_prompt == prompt_ids
    assert "onnx/model_quantized.onnx" in fetched and "onnx/model.onnx" not in fetched, fetched
    assert js_ids == _until_end(ours, tokenizer.eos_token_id)


def test_browser_transformers_js_fetches_weights_kept_outside_the_graph(browser, server, model_dir, tokenizer,
                                                                        tmp_path, torch_greedy):
    """A graph over the single-file limit (here: any) keeps its weights in onnx/model.onnx_data; the
    browser fetches them as config.json says (the old layout's external data failed here with
    "Module.MountedFiles is not available")."""
    model = MiniMindForCausalLM.from_pretrained(model_dir).eval()
    folder = write_onnx(model, tokenizer, tmp_path / "split", single_file_limit=0)
    assert sorted(p.name for p in (folder / "onnx").iterdir()) == ["model.onnx", EXTERNAL_DATA]
    _, js_ids, fetched = _browser_greedy(browser, server, "split", folder)
    assert f"onnx/{EXTERNAL_DATA}" in fetched, fetched
    assert js_ids == torch_greedy

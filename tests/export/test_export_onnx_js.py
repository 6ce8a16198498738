"""The ONNX exports load in transformers.js (Node) with default options and decode what we decode.

tests/js/ pins @huggingface/transformers; `npm ci` installs it into tests/js/node_modules on the
first run (npm's cache makes later installs offline). Skipped where node or npm is missing, or the
package cannot be installed; also skipped without the ONNX packages, like test_export_onnx.py.
"""

import fcntl
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
pytest.importorskip("onnx")

from minimind import MiniMindForCausalLM  # noqa: E402
from minimind.export import export_many  # noqa: E402
from minimind.export.onnx import EXTERNAL_DATA, write_onnx  # noqa: E402
from minimind.export.onnx_runner import GRAPH, OnnxCausalLM  # noqa: E402
from minimind.export.runner import greedy, model_logits, uncached  # noqa: E402
from test_export import EVAL_TEXTS, trained_model_dir  # noqa: E402

JS = Path(__file__).resolve().parents[1] / "js"
PACKAGE = JS / "node_modules" / "@huggingface" / "transformers" / "package.json"
PROMPT = "ROMEO"  # the trained model goes on for 17 varied tokens before its end-of-text
NEW_TOKENS = 20


def _npm_ci() -> None:
    """Install tests/js's locked packages once (a lock on package.json keeps parallel test workers
    from installing over each other). --ignore-scripts: the only install scripts fetch GPU
    binaries for onnxruntime-node and would build sharp from source; the CPU runtime ships in the
    package itself."""
    with open(JS / "package.json") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if PACKAGE.is_file():
            return
        try:
            done = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=JS,
                                  capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            pytest.skip("npm ci in tests/js took over 10 minutes")
        if done.returncode != 0 or not PACKAGE.is_file():
            pytest.skip("npm ci could not install @huggingface/transformers: " + done.stderr[-500:])


@pytest.fixture(scope="module")
def transformers_js() -> str:
    """The installed @huggingface/transformers version (installing it when missing)."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("node and npm are needed to run transformers.js")
    _npm_ci()
    return json.loads(PACKAGE.read_text(encoding="utf-8"))["version"]


def _node_greedy(folder: Path) -> tuple[list[int], list[int]]:
    """(prompt ids, greedy ids) from tests/js/greedy.mjs: transformers.js with default options."""
    done = subprocess.run(["node", "greedy.mjs", str(folder), PROMPT, str(NEW_TOKENS)], cwd=JS,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["prompt_ids"], out["generated_ids"]


def _until_end(ids: list[int], eos: int) -> list[int]:
    """`ids` up to and with the first end-of-text: where transformers.js's generate stops."""
    return ids[:ids.index(eos) + 1] if eos in ids else ids


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer):
    return trained_model_dir(tmp_path_factory, tokenizer)


@pytest.fixture(scope="module")
def exported(model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx-js")
    results = export_many(model_dir, ["onnx", "onnx-int8"], out, eval_text=EVAL_TEXTS)
    assert all(r.verified for r in results), [r.error for r in results]
    return out


@pytest.fixture(scope="module")
def prompt_ids(tokenizer):
    return tokenizer(PROMPT, add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def torch_greedy(model_dir, prompt_ids, tokenizer):
    """The source model's greedy continuation (plain argmax, as verification decodes)."""
    model = MiniMindForCausalLM.from_pretrained(model_dir).eval()
    with torch.no_grad():
        ids = greedy(uncached(model_logits(model)), prompt_ids, NEW_TOKENS)
    ids = _until_end(ids, tokenizer.eos_token_id)
    assert len(ids) >= 12 and len(set(ids)) >= 10, ids  # a short or repetitive answer would prove little
    return ids


def test_transformers_js_decodes_the_float_export_as_pytorch_does(transformers_js, exported, prompt_ids,
                                                                  torch_greedy):
    assert transformers_js.startswith("3.")
    js_prompt, js_ids = _node_greedy(exported / "onnx")
    assert js_prompt == prompt_ids  # the exported tokenizer.json, read by transformers.js
    assert js_ids == torch_greedy


def test_transformers_js_decodes_the_int8_export_as_onnx_runtime_does(transformers_js, exported, prompt_ids,
                                                                      tokenizer):
    """q8 is transformers.js's name for onnx/model_quantized.onnx; its greedy ids equal our ONNX
    Runtime runner's on the same graph (int8 rounding may part both from PyTorch's)."""
    ours = OnnxCausalLM(exported / "onnx-int8").generate_greedy(prompt_ids, NEW_TOKENS)
    js_prompt, js_ids = _node_greedy(exported / "onnx-int8")
    assert js_prompt == prompt_ids
    assert js_ids == _until_end(ours, tokenizer.eos_token_id)


def test_transformers_js_fetches_weights_kept_outside_the_graph(transformers_js, model_dir, tokenizer, tmp_path,
                                                               torch_greedy):
    """A graph over the single-file limit (here: any) keeps its weights in onnx/model.onnx_data, and
    config.json tells transformers.js to fetch them."""
    model = MiniMindForCausalLM.from_pretrained(model_dir).eval()
    folder = write_onnx(model, tokenizer, tmp_path / "split", single_file_limit=0)
    assert sorted(p.name for p in (folder / "onnx").iterdir()) == ["model.onnx", EXTERNAL_DATA]
    assert (folder / GRAPH).stat().st_size < (folder / "onnx" / EXTERNAL_DATA).stat().st_size
    js_config = json.loads((folder / "config.json").read_text())["transformers.js_config"]
    assert js_config == {"dtype": "fp32", "use_external_data_format": {"model.onnx": True}}
    assert _node_greedy(folder)[1] == torch_greedy

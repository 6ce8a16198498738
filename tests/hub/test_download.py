"""`minimind import OWNER/NAME` through the real huggingface_hub client, up to the network: a local
stand-in answers as the Hub does (tests/hub_server.py). Only what an import reads is fetched (never a
pickle or code), progress is shown, and 404, gated, too-big and pickle-only models are refused with a
sentence that says what to do."""

import os
import re
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from minimind.checkpoint import load_model

from hub_models import build_family_model
from hub_server import FakeHub


def _import(hub: FakeHub, tmp_path, repo: str, *extra: str):
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf-home"),
           "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "HF_TOKEN": ""}
    return subprocess.run([sys.executable, "-m", "minimind", "import", repo, "--out", str(tmp_path / "model"), *extra],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hub-repo") / "tiny-qwen"
    original, _ = build_family_model("qwen2", folder, shard=True)
    torch.save({"x": torch.zeros(1)}, folder / "pytorch_model.bin")       # a pickle beside the safetensors
    (folder / "modeling_qwen_custom.py").write_text("raise SystemExit('never run')\n")
    return folder, original


def test_a_hub_model_is_fetched_without_pickles_or_code_and_imported(source, tmp_path):
    folder, original = source
    with FakeHub({"tiny/qwen": folder}) as hub:
        out = _import(hub, tmp_path, "tiny/qwen", "--max-gb", "1")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "pytorch_model.bin" not in hub.fetched and "modeling_qwen_custom.py" not in hub.fetched
    assert {"config.json", "tokenizer.json", "model.safetensors.index.json", "LICENSE"} <= set(hub.fetched)
    assert sum(name.endswith(".safetensors") for name in hub.fetched) > 1         # every shard
    assert "fetching model-00001-of" in out.stderr and "Qwen2ForCausalLM" in out.stdout
    imported = tmp_path / "model"
    assert "base_model: tiny/qwen" in (imported / "README.md").read_text()
    ids = torch.tensor([[5, 9, 40, 77, 12, 3]])
    with torch.no_grad():
        assert (load_model(imported)(ids).logits - original(ids).logits).abs().max().item() <= 1e-4
    assert not any(k.endswith("inv_freq") for f in imported.glob("*.safetensors") for k in load_file(str(f)))


@pytest.mark.parametrize("repo, message", [
    ("nobody/nothing", "nobody/nothing: no such model on the Hugging Face Hub"),
    ("tiny/gated", "tiny/gated is gated: accept its terms on huggingface.co/tiny/gated and set HF_TOKEN"),
    ("tiny/big", r"tiny/big: its weights are \d+\.\d GB, over this studio's limit of 4 GB"),
    ("tiny/pickled", "tiny/pickled: no safetensors weights on the Hub .it has pytorch_model.bin: pickled"),
])
def test_what_the_hub_refuses_or_we_refuse_is_said_in_one_sentence(source, tmp_path, repo, message):
    folder, _ = source
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text((folder / "config.json").read_text())
    torch.save({"x": torch.zeros(1)}, pickled / "pytorch_model.bin")
    repos = {"tiny/gated": folder, "tiny/big": folder, "tiny/pickled": pickled}
    with FakeHub(repos, gated={"tiny/gated"}, sizes={"*.safetensors": 2_000_000_000}) as hub:
        out = _import(hub, tmp_path, repo, "--max-gb", "4")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert re.search(message, out.stderr), out.stderr
    assert not (tmp_path / "model").exists() and hub.fetched == []

"""Exports that load beyond this studio's own transformers: the tokenizer and config files of every
folder export read the same in transformers 4.4x and 5.x, in `PreTrainedTokenizerFast(tokenizer_file=...)`
and in bare `tokenizers`; the config holds the rotary settings in both versions' keys; and
`model_max_length` is the context the model holds.

The fast tests read the written files and load them with this process's transformers 5.x. The slow
test builds clean venvs with transformers 4.57 (what Optimum pins) and, where it installs there,
optimum[onnxruntime], and with 4.44 (tokenizers < 0.20), and checks there that the `llama` export (and,
with Optimum, the `onnx` one) loads with default options, keeps the model's rotary frequencies, and
decodes greedily to the same tokens as the source.
"""

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import tokenizers
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, PreTrainedTokenizerFast

from minimind import MiniMindForCausalLM
from minimind.export import export_many
from minimind.export.llama import llama_config
from minimind.export.onnx_runner import missing_packages
from minimind.hub.families import legacy_rope
from minimind.tokenizer import CHAT_TEMPLATE, IM_END, IM_START, save_tokenizer
from helpers import tiny_config
from test_export import EVAL_TEXTS, train_briefly

THETA, FACTOR, CONTEXT = 50000.0, 2.0, 256   # not transformers' defaults (10000, unscaled, 2048)
MESSAGES = [{"role": "user", "content": "床前明月光，"}]
NEW_TOKENS = 16
TOKENIZER_FORMATS = ["hf", "llama", "int8", "bnb-8bit"] + ([] if missing_packages() else ["onnx"])
LLAMA_CONFIG_FORMATS = ["llama", "int8"] + ([] if missing_packages() else ["onnx"])


def portable_config():
    """The tiny test shape with a rotary base and a scaling that 4.x would get wrong if it missed them."""
    return tiny_config(rope_theta=THETA, rope_scaling_type="linear", rope_scaling_factor=FACTOR,
                       max_position_embeddings=CONTEXT)


@pytest.fixture(scope="module")
def source(tmp_path_factory, tokenizer):
    """A MiniMind folder with theta 50000, linear rotary scaling x2 and a 256-token context."""
    folder = tmp_path_factory.mktemp("portable-source")
    torch.manual_seed(0)
    model = train_briefly(MiniMindForCausalLM(portable_config()), tokenizer)
    model.save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    return folder


@pytest.fixture(scope="module")
def exports(source, tmp_path_factory):
    out = tmp_path_factory.mktemp("portable-exports")
    results = export_many(source, TOKENIZER_FORMATS, out, verify=False)  # the tests load them
    failed = {r.format: r.error for r in results if r.error}
    assert not failed, failed
    return {r.format: r.folder for r in results}


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("fmt", TOKENIZER_FORMATS)
def test_tokenizer_config_is_one_both_transformers_versions_read(exports, fmt):
    config = read_json(exports[fmt] / "tokenizer_config.json")
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["additional_special_tokens"] == [IM_START, IM_END]
    assert not isinstance(config.get("extra_special_tokens", {}), list)   # 4.x calls .keys() on it
    assert config["chat_template"] == CHAT_TEMPLATE
    assert (config["bos_token"], config["eos_token"], config["pad_token"]) == (
        "<|startoftext|>", "<|endoftext|>", "<|pad|>")
    assert config["model_max_length"] == CONTEXT
    assert "local_files_only" not in config and "is_local" not in config
    merges = read_json(exports[fmt] / "tokenizer.json")["model"]["merges"]
    assert merges and all(isinstance(m, str) and m.count(" ") == 1 for m in merges)  # tokenizers < 0.20 too


@pytest.mark.parametrize("fmt", LLAMA_CONFIG_FORMATS)
def test_config_holds_the_rotary_settings_in_both_versions_keys(exports, fmt):
    config = read_json(exports[fmt] / "config.json")
    assert config["rope_parameters"] == {"rope_type": "linear", "rope_theta": THETA, "factor": FACTOR}
    assert config["rope_theta"] == THETA
    assert config["rope_scaling"] == {"type": "linear", "factor": FACTOR}
    assert config["max_position_embeddings"] == CONTEXT


@pytest.mark.parametrize("overrides", [
    {},
    {"rope_theta": 500000.0},
    {"rope_scaling_type": "ntk", "rope_scaling_factor": 4.0},
    {"rope_scaling_type": "linear", "rope_scaling_factor": 2.0},
    {"rope_scaling_type": "llama3", "rope_scaling_factor": 8.0, "rope_original_max_position": 64},
], ids=["default", "theta", "ntk", "linear", "llama3"])
def test_both_rope_forms_say_the_same(overrides, tmp_path):
    """5.x reads `rope_scaling` before `rope_parameters`: reloaded, the config has our frequencies."""
    config = tiny_config(**overrides)
    llama_config(config).save_pretrained(tmp_path)
    written = read_json(tmp_path / "config.json")
    assert written["rope_theta"] == config.rope_dict()["rope_theta"]
    assert (written["rope_scaling"] is None) == (config.rope_dict()["rope_type"] == "default")
    reread = LlamaConfig.from_pretrained(tmp_path).rope_parameters
    assert {k: v for k, v in reread.items() if k != "type"} == config.rope_dict()
    assert legacy_rope(config.rope_dict()) == {"rope_theta": written["rope_theta"],
                                               "rope_scaling": written["rope_scaling"]}


def our_ids(tokenizer) -> list[list[int]]:
    return tokenizer(EVAL_TEXTS, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("fmt", TOKENIZER_FORMATS)
def test_transformers_5_and_tokenizers_load_the_files_every_way(exports, fmt, tokenizer):
    folder = exports[fmt]
    auto = AutoTokenizer.from_pretrained(folder)
    fast = PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    bare = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    expected = our_ids(tokenizer)
    assert auto(EVAL_TEXTS, add_special_tokens=False)["input_ids"] == expected
    assert fast(EVAL_TEXTS, add_special_tokens=False)["input_ids"] == expected
    assert [e.ids for e in bare.encode_batch(EVAL_TEXTS, add_special_tokens=False)] == expected
    assert auto.model_max_length == CONTEXT
    assert (auto.bos_token, auto.eos_token, auto.pad_token) == (tokenizer.bos_token, tokenizer.eos_token,
                                                                 tokenizer.pad_token)
    assert auto.convert_tokens_to_ids([IM_START, IM_END]) == tokenizer.convert_tokens_to_ids([IM_START, IM_END])
    assert auto.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False) == \
        tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert bare.decode(expected[0]) == EVAL_TEXTS[0]


def test_llama_export_runs_the_scaled_rotary_in_transformers_5(exports, source):
    ours = MiniMindForCausalLM.from_pretrained(source).eval()
    theirs = AutoModelForCausalLM.from_pretrained(exports["llama"]).eval()
    ids = torch.randint(5, 400, (1, 200), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert torch.allclose(ours(ids).logits, theirs(ids).logits, atol=1e-4)


def test_our_own_loader_reads_an_export_tokenizer(exports, tokenizer):
    from minimind.tokenizer import load_tokenizer

    loaded = load_tokenizer(exports["llama"])
    assert loaded(EVAL_TEXTS, add_special_tokens=False)["input_ids"] == our_ids(tokenizer)
    assert loaded.chat_template == CHAT_TEMPLATE


# ---- transformers 4.x (and Optimum) in clean venvs --------------------------------------------

# transformers 4.x versions checked: 4.57 with what installs beside it (optimum 2.1.0 + optimum-onnx 0.1.0
# pin transformers < 4.58), and 4.44, the last with tokenizers < 0.20 (merges only as "a b" strings)
OLD_STACKS = {"4.57": "2.1.0", "4.44": None}


def compat_cache(key: str) -> Path:
    """Where a clean venv is kept between runs (it takes minutes to build)."""
    root = os.environ.get("MINIMIND_COMPAT_CACHE") or Path.home() / ".cache" / "minimind-compat"
    return Path(root) / key


def pip(python: Path, *args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", "install", "-q", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module", params=list(OLD_STACKS))
def old_python(request) -> tuple[str, Path, bool]:
    """(transformers version, python of a clean venv with this torch, that transformers and safetensors,
    whether optimum[onnxruntime] installed there too). Built once under `compat_cache`, keyed by the
    versions (optimum is tried once, when the venv is built); skips when PyPI cannot be reached."""
    version, optimum = request.param, OLD_STACKS[request.param]
    torch_version = torch.__version__.split("+")[0]
    key = f"py{sys.version_info.major}{sys.version_info.minor}-torch{torch_version}-transformers{version}" + (
        f"-optimum{optimum}" if optimum else "")
    folder = compat_cache(key)
    python = folder / "bin" / "python"
    ready, optimum_flag = folder / "transformers-ready", folder / "optimum-ready"
    if not ready.is_file():
        venv.EnvBuilder(with_pip=True, clear=True).create(folder)
        done = pip(python, f"torch=={torch_version}", f"transformers=={version}.*", "safetensors")
        if done.returncode:
            pytest.skip(f"could not install transformers {version} in a venv: {done.stderr[-800:]}")
        ready.write_text(key)
        if optimum and pip(python, f"transformers=={version}.*", f"optimum[onnxruntime]=={optimum}").returncode == 0:
            optimum_flag.write_text(key)
    return version, python, optimum_flag.is_file()


def onnx_model_file(folder: Path) -> Path:
    """The float ONNX graph of an `onnx` export, wherever the export puts it (`onnx/model.onnx`, the
    Hub / transformers.js layout, or a graph at the top of the folder)."""
    graphs = sorted(p for p in folder.rglob("*.onnx") if "quantized" not in p.name)
    assert graphs, f"no .onnx graph in {folder}"
    return min(graphs, key=lambda p: (p.name != "model.onnx", len(p.relative_to(folder).parts)))


def greedy(model, ids: list[int], steps: int, stop: set[int]) -> list[int]:
    """Greedy continuation of `ids` by full forward passes (no cache), ending at an end token."""
    out = list(ids)
    with torch.no_grad():
        for _ in range(steps):
            token = int(model(torch.tensor([out])).logits[0, -1].argmax())
            out.append(token)
            if token in stop:
                break
    return out[len(ids):]


OLD_TRANSFORMERS_CHECK = r'''
import json, sys
from pathlib import Path

import tokenizers, torch, transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

case = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
report = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
folder = case["llama"]
tok = AutoTokenizer.from_pretrained(folder)
report["tokenizer_class"] = type(tok).__name__
report["model_max_length"] = tok.model_max_length
report["specials"] = [tok.bos_token, tok.eos_token, tok.pad_token, tok.additional_special_tokens]
report["text"] = tok.apply_chat_template(case["messages"], add_generation_prompt=True, tokenize=False)
prompt = tok.apply_chat_template(case["messages"], add_generation_prompt=True, tokenize=True)
report["prompt"] = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
report["ids"] = tok(case["texts"], add_special_tokens=False)["input_ids"]
fast = PreTrainedTokenizerFast(tokenizer_file=folder + "/tokenizer.json")
report["fast_ids"] = fast(case["texts"], add_special_tokens=False)["input_ids"]
bare = tokenizers.Tokenizer.from_file(folder + "/tokenizer.json")
report["bare_ids"] = [e.ids for e in bare.encode_batch(case["texts"], add_special_tokens=False)]
model = AutoModelForCausalLM.from_pretrained(folder).eval()
report["model_class"] = type(model).__name__
report["rope_theta"] = model.config.rope_theta
report["rope_scaling"] = model.config.rope_scaling
report["inv_freq"] = model.model.rotary_emb.inv_freq.tolist()
ids = torch.tensor([case["prompt"]])
out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=case["new_tokens"], do_sample=False,
                   eos_token_id=case["stop"])
report["greedy"] = out[0, ids.shape[1]:].tolist()
if case.get("onnx"):
    import onnxruntime, optimum
    from importlib.metadata import version
    from optimum.onnxruntime import ORTModelForCausalLM
    report["optimum"], report["onnxruntime"] = version("optimum"), onnxruntime.__version__
    onnx_folder, sub, name = case["onnx"]["folder"], case["onnx"]["subfolder"], case["onnx"]["file_name"]
    ort = ORTModelForCausalLM.from_pretrained(onnx_folder, subfolder=sub, file_name=name)
    onnx_tok = AutoTokenizer.from_pretrained(onnx_folder)
    report["onnx_ids"] = onnx_tok(case["texts"], add_special_tokens=False)["input_ids"]
    report["onnx_model_max_length"] = onnx_tok.model_max_length
    out = ort.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=case["new_tokens"], do_sample=False,
                   eos_token_id=case["stop"])
    report["onnx_greedy"] = out[0, ids.shape[1]:].tolist()
Path(sys.argv[2]).write_text(json.dumps(report), encoding="utf-8")
'''


@pytest.mark.slow
def test_llama_and_onnx_exports_run_in_transformers_4_and_optimum(old_python, source, exports, tokenizer,
                                                                     tmp_path):
    version, python, has_optimum = old_python
    model = MiniMindForCausalLM.from_pretrained(source).eval()
    prompt = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    stop = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(IM_END)}
    expected = greedy(model, prompt, NEW_TOKENS, stop)
    case = {"llama": str(exports["llama"]), "messages": MESSAGES, "texts": EVAL_TEXTS, "prompt": prompt,
            "new_tokens": NEW_TOKENS, "stop": sorted(stop)}
    check_onnx = has_optimum and "onnx" in exports
    if check_onnx:
        graph = onnx_model_file(exports["onnx"])
        sub = graph.parent.relative_to(exports["onnx"]).as_posix()
        case["onnx"] = {"folder": str(exports["onnx"]), "subfolder": "" if sub == "." else sub,
                        "file_name": graph.name}
    (tmp_path / "case.json").write_text(json.dumps(case, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "check.py").write_text(OLD_TRANSFORMERS_CHECK, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run = subprocess.run([str(python), str(tmp_path / "check.py"), str(tmp_path / "case.json"),
                          str(tmp_path / "report.json")], capture_output=True, text=True, timeout=600,
                         env={**env, "HF_HUB_OFFLINE": "1"}, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    report = read_json(tmp_path / "report.json")
    print({k: report.get(k) for k in ("transformers", "tokenizers", "optimum", "onnxruntime")})
    assert report["transformers"].startswith(version + ".")
    assert report["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert report["model_max_length"] == CONTEXT
    assert report["specials"] == [tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token, [IM_START, IM_END]]
    assert report["text"] == tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert report["prompt"] == prompt
    assert report["ids"] == report["fast_ids"] == report["bare_ids"] == our_ids(tokenizer)
    assert report["model_class"] == "LlamaForCausalLM"
    assert report["rope_theta"] == THETA
    assert report["rope_scaling"]["rope_type"] == "linear" and report["rope_scaling"]["factor"] == FACTOR
    head_dim = model.config.head_dim
    inv_freq = 1.0 / (THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)) / FACTOR
    assert torch.allclose(torch.tensor(report["inv_freq"]), inv_freq, rtol=1e-5)
    assert report["greedy"] == expected
    if check_onnx:
        assert report["onnx_ids"] == our_ids(tokenizer)
        assert report["onnx_model_max_length"] == CONTEXT
        assert report["onnx_greedy"] == expected

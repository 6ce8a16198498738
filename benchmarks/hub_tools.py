"""Third-party tools open the exports (issue 45): does each tool people would reach for load every
export of ours that it should, with DEFAULT options, and decode what we decode?

The model is the shipped MiniMind-Tang (checkpoints/minimind-tang), exported once per version of
the export code into `.cache/hub_tools/` as hf, llama, gguf-f16, gguf-q8_0, onnx and onnx-int8
(`--fresh` exports again). The prompt is the chat template's rendering of 以《春晓》为题写一首五言绝句
(38 tokens); the reference is our greedy decoding of the float32 source in PyTorch (a plain argmax
loop, minimind.export.runner.greedy), 20 new tokens. For each tool the "prompt ids" column says
whether the tool's own tokenizer turns the prompt text into our ids, and the greedy column counts
the leading tokens (of 20) the tool picks identically, decoding from our prompt ids. Quantized
exports are compared with what they should match: gguf-q8_0 with the float32 source (q8_0 rounding
may part them; honest k/20), onnx-int8 in transformers.js and Optimum with our ONNX Runtime runner
on the same int8 graph.

Tools: transformers 5.x here (AutoModelForCausalLM / AutoTokenizer on `llama`, and its GGUF loader,
`from_pretrained(folder, gguf_file=...)`, on the GGUF files); transformers 4.57 with optimum 2.1.0
(ORTModelForCausalLM.from_pretrained(folder)) and 4.44 in the clean venvs the slow test
tests/export/test_export_portability.py builds under ~/.cache/minimind-compat/ (not built here:
without them the rows say "not available here"); llama-cpp-python (`Llama(model_path=...,
verbose=False)`, temperature 0); gguf's GGUFReader; ONNX Runtime's `InferenceSession(path)`;
transformers.js in Node (tests/js/greedy.mjs); huggingface_hub's ModelCard.load on each README.md.

    python -m benchmarks.hub_tools            # prints the table, writes its section of RESULTS.md
    python -m benchmarks.hub_tools --no-write # prints only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

NAME = "hub_tools"
DESCRIPTION = "third-party tools open every relevant export with default options (issue 45)"
ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "checkpoints" / "minimind-tang"
CACHE = ROOT / ".cache" / "hub_tools"
JS = ROOT / "tests" / "js"
JS_PACKAGE = JS / "node_modules" / "@huggingface" / "transformers" / "package.json"
FORMATS = ["hf", "llama", "gguf-f16", "gguf-q8_0", "onnx", "onnx-int8"]
MESSAGES = [{"role": "user", "content": "以《春晓》为题写一首五言绝句"}]
NEW_TOKENS = 20
SECTION = "## Third-party tools open the exports (issue 45)"
BEGIN, END = "<!-- hub_tools: begin -->", "<!-- hub_tools: end -->"
NOT_AVAILABLE = "not available here"


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return NOT_AVAILABLE


def _error(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".replace("\n", " ").replace("|", "/")
    return text[:400]


def leading_equal(ids: list[int], reference: list[int]) -> int:
    return next((i for i, (a, b) in enumerate(zip(ids, reference)) if a != b), min(len(ids), len(reference)))


def greedy_cell(ids: list[int] | None, reference: list[int]) -> str:
    if ids is None:
        return "-"
    k = leading_equal(list(ids), reference)
    short = f" (stopped after {len(ids)})" if len(ids) < len(reference) and k == len(ids) else ""
    return f"{k}/{len(reference)} equal{short}"


# ---- the exports -------------------------------------------------------------------------------

def _export_key(source: Path) -> str:
    """A hash of the export code and the source's files: a cached export is reused only while both
    are unchanged."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "minimind" / "export").glob("*.py")) + sorted(
            p for p in source.iterdir() if p.is_file()):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def exports(source: Path, fresh: bool) -> tuple[dict[str, Path], dict[str, Path], dict[str, str], float]:
    """({format: what to load}, {format: its folder}, {format: export error}, seconds spent exporting)."""
    from minimind.export import export_many

    out = CACHE / f"{source.name}-{_export_key(source)}"
    manifest = out / "manifest.json"
    if manifest.is_file() and not fresh:
        done = json.loads(manifest.read_text(encoding="utf-8"))
        return ({k: Path(v) for k, v in done["paths"].items()}, {k: Path(v) for k, v in done["folders"].items()},
                done["errors"], 0.0)
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    results = export_many(source, FORMATS, out, overwrite=True)
    seconds = time.perf_counter() - start
    paths = {r.format: str(r.path) for r in results if not r.error}
    folders = {r.format: str(r.folder) for r in results if not r.error}
    errors = {r.format: r.error for r in results if r.error}
    manifest.write_text(json.dumps({"paths": paths, "folders": folders, "errors": errors}, ensure_ascii=False),
                        encoding="utf-8")
    return {k: Path(v) for k, v in paths.items()}, {k: Path(v) for k, v in folders.items()}, errors, seconds


# ---- the tools in this process -----------------------------------------------------------------

def generate_greedy(model, prompt: list[int]) -> list[int]:
    """The NEW_TOKENS ids a transformers model's own `generate` picks greedily after `prompt`."""
    import torch

    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS, do_sample=False)
    return out[0, len(prompt):].tolist()


def transformers_here(llama: Path, text: str, prompt: list[int], reference: list[int]) -> dict:
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    row = {"tool": "transformers AutoModelForCausalLM + AutoTokenizer", "version": transformers.__version__,
           "export": "llama"}
    try:
        tok = AutoTokenizer.from_pretrained(llama)
        model = AutoModelForCausalLM.from_pretrained(llama).eval()
        theirs = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True)
        theirs = list(theirs["input_ids"] if hasattr(theirs, "keys") else theirs)
        row.update(result=f"opens ({type(model).__name__}, {type(tok).__name__})",
                   prompt="same as ours (chat template)" if theirs == prompt else f"differ: {theirs}",
                   greedy=greedy_cell(generate_greedy(model, prompt), reference), compared="source float32")
    except Exception as err:  # noqa: BLE001 - a tool's failure is a result
        row.update(result=f"FAILED: {_error(err)}")
    return row


def transformers_gguf(fmt: str, path: Path, text: str, prompt: list[int], reference: list[int]) -> dict:
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    row = {"tool": "transformers GGUF loader (from_pretrained(folder, gguf_file=...))",
           "version": f"{transformers.__version__} (gguf {_version('gguf')})", "export": fmt}
    try:
        tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        theirs = tok(text, add_special_tokens=False)["input_ids"]
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name).eval()
        row.update(result=f"opens ({type(model).__name__}, {type(tok).__name__})",
                   prompt="same as ours" if theirs == prompt else f"differ ({len(theirs)} ids: {theirs[:12]}...)",
                   greedy=greedy_cell(generate_greedy(model, prompt), reference), compared="source float32")
    except Exception as err:  # noqa: BLE001
        row.update(result=f"FAILED: {_error(err)}")
    return row


def llama_cpp(fmt: str, path: Path, text: str, prompt: list[int], reference: list[int], tokenizer) -> list[dict]:
    """Two rows: greedy from our prompt ids (`generate`, temperature 0), and the chat API a user calls,
    `create_chat_completion(messages)` with the GGUF's own chat template (its text read back into ids
    by our tokenizer)."""
    row = {"tool": "llama-cpp-python Llama(model_path=..., verbose=False)", "export": fmt}
    chat = {"tool": "llama-cpp-python create_chat_completion(messages, temperature=0) (the GGUF's chat template)",
            "export": fmt}
    try:
        import llama_cpp as lc
    except ImportError:
        return [{**r, "version": NOT_AVAILABLE, "result": NOT_AVAILABLE + " (llama_cpp not installed)"}
                for r in (row, chat)]
    row["version"] = chat["version"] = lc.__version__
    try:
        llm = lc.Llama(model_path=str(path), verbose=False)
    except Exception as err:  # noqa: BLE001
        return [{**r, "result": f"FAILED: {_error(err)}"} for r in (row, chat)]
    try:
        try:
            theirs = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
            picks = []
            for token in llm.generate(prompt, temp=0.0):  # temperature 0: llama.cpp's greedy sampler
                picks.append(int(token))
                if len(picks) == NEW_TOKENS or token == llm.token_eos():
                    break
            row.update(result="opens", prompt="same as ours" if list(theirs) == prompt
                       else f"differ ({len(theirs)} ids: {list(theirs)[:12]}...)",
                       greedy=greedy_cell(picks, reference), compared="source float32")
        except Exception as err:  # noqa: BLE001
            row.update(result=f"FAILED: {_error(err)}")
        try:
            answer = llm.create_chat_completion(messages=MESSAGES, max_tokens=NEW_TOKENS, temperature=0.0)
            content = answer["choices"][0]["message"]["content"]
            ids = tokenizer(content, add_special_tokens=False)["input_ids"]
            chat.update(result=f"answers (chat format {llm.chat_format})",
                        prompt=_chat_prompt_cell(lc, llm, text),
                        greedy=greedy_cell(ids, reference) + (", text identical" if content == tokenizer.decode(
                            reference) else ", text differs"), compared="source float32")
        except Exception as err:  # noqa: BLE001
            chat.update(result=f"FAILED: {_error(err)}")
    finally:
        llm.close()
    return [row, chat]


def _chat_prompt_cell(lc, llm, text: str) -> str:
    """Whether the GGUF's embedded chat template, rendered as llama-cpp-python renders it, gives our
    prompt text."""
    try:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = llm.metadata.get("tokenizer.chat_template")
        if not template:
            return "no embedded template"
        eos, bos = (llm._model.token_get_text(t) for t in (llm.token_eos(), llm.token_bos()))
        rendered = Jinja2ChatFormatter(template, eos_token=eos, bos_token=bos)(messages=MESSAGES).prompt
        return "its template renders our prompt text" if rendered == text else f"its template renders {rendered!r}"
    except Exception as err:  # noqa: BLE001
        return f"template not checked: {_error(err)}"


def gguf_reader(fmt: str, path: Path, tokenizer) -> dict:
    row = {"tool": "gguf GGUFReader", "version": _version("gguf"), "export": fmt}
    try:
        import gguf
    except ImportError:
        return {**row, "result": NOT_AVAILABLE + " (gguf not installed)"}
    try:
        reader = gguf.GGUFReader(path)
        field = lambda key: None if reader.get_field(key) is None else reader.get_field(key).contents()
        arch = field("general.architecture")
        tokens = field("tokenizer.ggml.tokens") or []
        ours = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        row.update(result=f"opens: {arch}, {len(reader.tensors)} tensors, {len(reader.fields)} fields, "
                          f"chat template {'present' if field('tokenizer.chat_template') else 'absent'}",
                   prompt=f"vocabulary {'= ours' if tokens == ours else 'differs from ours'} ({len(tokens)} tokens)",
                   greedy="- (a reader, no decoding)")
    except Exception as err:  # noqa: BLE001
        row.update(result=f"FAILED: {_error(err)}")
    return row


def onnx_runtime(fmt: str, folder: Path, graph: str, prompt: list[int], reference: list[int],
                 compared: str) -> tuple[dict, list[int] | None]:
    """InferenceSession(path) with no options at all, decoded greedily by our runner's loop."""
    row = {"tool": "ONNX Runtime InferenceSession(path)", "export": f"{fmt} ({graph})"}
    try:
        import onnxruntime as ort

        from minimind.export.onnx_runner import OnnxCausalLM
    except ImportError:
        return {**row, "version": NOT_AVAILABLE, "result": NOT_AVAILABLE + " (onnxruntime not installed)"}, None
    row["version"] = ort.__version__
    try:
        session = ort.InferenceSession(str(folder / graph))
        runner = OnnxCausalLM(folder, graph=graph)
        runner.session = session  # our loop over the default session
        ids = runner.generate_greedy(prompt, NEW_TOKENS)
        row.update(result=f"opens ({', '.join(session.get_providers())}; {len(session.get_inputs())} inputs)",
                   prompt="- (a graph, no tokenizer)", greedy=greedy_cell(ids, reference), compared=compared)
        return row, ids
    except Exception as err:  # noqa: BLE001
        return {**row, "result": f"FAILED: {_error(err)}"}, None


def model_cards(folders: dict[str, Path]) -> list[dict]:
    import huggingface_hub
    from huggingface_hub import ModelCard

    rows = []
    for fmt, folder in folders.items():
        row = {"tool": "huggingface_hub ModelCard.load", "version": huggingface_hub.__version__,
               "export": f"{fmt} (README.md)"}
        try:
            data = ModelCard.load(folder / "README.md").data
            facts = {k: getattr(data, k, None) for k in ("license", "library_name", "pipeline_tag")}
            gguf = fmt.startswith("gguf") and not facts["library_name"]
            missing = [k for k, v in facts.items() if not v and not (gguf and k == "library_name")]
            row["result"] = ("parsed: " if not missing else f"parsed, MISSING {', '.join(missing)}: ") + ", ".join(
                f"{k}={v}" for k, v in facts.items() if v or k in missing) + (
                "; no library_name, as card.py intends for GGUF (the Hub recognises the file)" if gguf else "")
        except Exception as err:  # noqa: BLE001
            row["result"] = f"FAILED: {_error(err)}"
        rows.append(row)
    return rows


# ---- transformers 4.x (+ Optimum) in the slow test's clean venvs --------------------------------

COMPAT_CHECK = r'''
import json, sys, traceback
from importlib.metadata import version
from pathlib import Path

case = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
report = {}

def err(e):
    return (type(e).__name__ + ": " + str(e)).replace("\n", " ").replace("|", "/")[:400]

try:
    import torch, transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    report["transformers"] = transformers.__version__
    tok = AutoTokenizer.from_pretrained(case["llama"])
    model = AutoModelForCausalLM.from_pretrained(case["llama"]).eval()
    prompt = tok.apply_chat_template(case["messages"], add_generation_prompt=True, tokenize=True)
    report["prompt"] = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    report["classes"] = [type(model).__name__, type(tok).__name__]
    ids = torch.tensor([case["prompt"]])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=case["new_tokens"],
                             do_sample=False)
    report["greedy"] = out[0, ids.shape[1]:].tolist()
except Exception as e:
    report["error"] = err(e)
try:
    from optimum.onnxruntime import ORTModelForCausalLM
    report["optimum"] = version("optimum")
    report["onnxruntime"] = version("onnxruntime")
except Exception as e:
    report["optimum_missing"] = err(e)
if "optimum" in report:
    for fmt in ("onnx", "onnx-int8"):
        if fmt not in case["onnx"]:
            continue
        try:
            ort = ORTModelForCausalLM.from_pretrained(case["onnx"][fmt])
            ids = torch.tensor([case["prompt"]])
            out = ort.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=case["new_tokens"],
                               do_sample=False)
            report[fmt] = {"greedy": out[0, ids.shape[1]:].tolist(), "class": type(ort).__name__}
        except Exception as e:
            report[fmt] = {"error": err(e)}
Path(sys.argv[2]).write_text(json.dumps(report), encoding="utf-8")
'''


def compat_pythons() -> dict[str, Path | None]:
    """transformers version -> python of the slow test's clean venv for it (built, this Python and torch),
    or None where it is not built here."""
    import torch

    root = Path(os.environ.get("MINIMIND_COMPAT_CACHE") or Path.home() / ".cache" / "minimind-compat")
    base = f"py{sys.version_info.major}{sys.version_info.minor}-torch{torch.__version__.split('+')[0]}"
    found: dict[str, Path | None] = {}
    for version in ("4.57", "4.44"):
        venvs = sorted(p for p in root.glob(f"{base}-transformers{version}*")
                       if (p / "transformers-ready").is_file() and (p / "bin" / "python").is_file())
        found[version] = venvs[0] / "bin" / "python" if venvs else None
    return found


def compat_rows(paths: dict[str, Path], prompt: list[int], reference: list[int],
                ours_int8: list[int] | None) -> list[dict]:
    rows = []
    for version, python in compat_pythons().items():
        llama_row = {"tool": "transformers AutoModelForCausalLM + AutoTokenizer (clean venv)",
                     "version": version, "export": "llama"}
        optimum_rows = [{"tool": "Optimum ORTModelForCausalLM.from_pretrained(folder)", "version": "-",
                         "export": fmt} for fmt in ("onnx", "onnx-int8") if version == "4.57"]
        if python is None:
            note = (f"{NOT_AVAILABLE} (no transformers {version} venv; `pytest -m slow "
                    "tests/export/test_export_portability.py` builds it)")
            rows += [{**r, "result": note} for r in [llama_row, *optimum_rows]]
            continue
        with tempfile.TemporaryDirectory() as tmp:
            case = {"llama": str(paths["llama"]), "messages": MESSAGES, "prompt": prompt, "new_tokens": NEW_TOKENS,
                    "onnx": {f: str(paths[f]) for f in ("onnx", "onnx-int8") if f in paths}}
            (Path(tmp) / "case.json").write_text(json.dumps(case, ensure_ascii=False), encoding="utf-8")
            (Path(tmp) / "check.py").write_text(COMPAT_CHECK, encoding="utf-8")
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
            done = subprocess.run([str(python), "check.py", "case.json", "report.json"], cwd=tmp, env=env,
                                  check=False, capture_output=True, text=True, timeout=600)
            report_file = Path(tmp) / "report.json"
            if done.returncode or not report_file.is_file():
                error = f"FAILED: the venv's check exited {done.returncode}: {done.stderr[-400:]}"
                rows += [{**r, "result": error} for r in [llama_row, *optimum_rows]]
                continue
            report = json.loads(report_file.read_text(encoding="utf-8"))
        llama_row["version"] = report.get("transformers", version)
        if "error" in report:
            llama_row["result"] = "FAILED: " + report["error"]
        else:
            llama_row.update(result=f"opens ({', '.join(report['classes'])})",
                             prompt="same as ours (chat template)" if report["prompt"] == prompt
                             else f"differ: {report['prompt']}",
                             greedy=greedy_cell(report["greedy"], reference), compared="source float32")
        rows.append(llama_row)
        for row in optimum_rows:
            if "optimum" not in report:
                row["result"] = f"{NOT_AVAILABLE} (optimum not installed in that venv)"
                rows.append(row)
                continue
            row["version"] = (f"optimum {report['optimum']}, onnxruntime {report['onnxruntime']}, "
                              f"transformers {report.get('transformers')}")
            got = report.get(row["export"], {"error": "not exported"})
            if "error" in got:
                row["result"] = "FAILED: " + got["error"]
            else:
                int8 = row["export"] == "onnx-int8"
                row.update(result=f"opens ({got['class']})", prompt="- (our ids fed)",
                           greedy=greedy_cell(got["greedy"], ours_int8 if int8 and ours_int8 else reference),
                           compared="our ONNX Runtime int8 runner" if int8 and ours_int8 else "source float32")
            rows.append(row)
    return rows


# ---- transformers.js in Node --------------------------------------------------------------------

def transformers_js(folders: dict[str, Path], text: str, prompt: list[int], reference: list[int],
                    ours_int8: list[int] | None) -> list[dict]:
    base = {"tool": "transformers.js AutoModelForCausalLM + AutoTokenizer (Node, tests/js/greedy.mjs)"}
    wanted = [f for f in ("onnx", "onnx-int8") if f in folders]
    if not (shutil.which("node") and shutil.which("npm")):
        return [{**base, "version": NOT_AVAILABLE, "export": f, "result": NOT_AVAILABLE + " (no node/npm)"}
                for f in wanted]
    if not JS_PACKAGE.is_file():  # the locked install the test does (npm's cache makes it offline)
        subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=JS, check=False, capture_output=True,
                       text=True, timeout=300)
    if not JS_PACKAGE.is_file():
        return [{**base, "version": NOT_AVAILABLE, "export": f,
                 "result": NOT_AVAILABLE + " (npm ci in tests/js could not install @huggingface/transformers)"}
                for f in wanted]
    node = subprocess.run(["node", "--version"], check=False, capture_output=True, text=True).stdout.strip()
    version = f"{json.loads(JS_PACKAGE.read_text(encoding='utf-8'))['version']} (node {node})"
    rows = []
    for fmt in wanted:
        row = {**base, "version": version, "export": fmt}
        done = subprocess.run(["node", "greedy.mjs", str(folders[fmt]), text, str(NEW_TOKENS)], cwd=JS,
                              check=False, capture_output=True, text=True, timeout=300)
        if done.returncode:
            row["result"] = "FAILED: " + done.stderr.strip().replace("\n", " ").replace("|", "/")[-400:]
        else:
            out = json.loads(done.stdout.strip().splitlines()[-1])
            int8 = fmt == "onnx-int8"
            row.update(result="opens", prompt="same as ours" if out["prompt_ids"] == prompt
                       else f"differ ({len(out['prompt_ids'])} ids: {out['prompt_ids'][:12]}...)",
                       greedy=greedy_cell(out["generated_ids"], ours_int8 if int8 and ours_int8 else reference),
                       compared="our ONNX Runtime int8 runner" if int8 and ours_int8 else "source float32")
            if out["prompt_ids"] != prompt:
                row["greedy"] += " (from its own prompt ids)"
        rows.append(row)
    return rows


# ---- the run -----------------------------------------------------------------------------------

def run(quick: bool = False, fresh: bool = False, source: Path = SHIPPED) -> dict:
    """The checks (`quick` is the suite's flag; every check is already quick). `fresh`: export again."""
    import torch
    from transformers.utils import logging as hf_logging

    from minimind.export import load_source
    from minimind.export.onnx_runner import GRAPH, QUANTIZED_GRAPH
    from minimind.export.runner import greedy, model_logits, uncached

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    start = time.perf_counter()
    paths, folders, export_errors, export_seconds = exports(source, fresh)
    src = load_source(source)
    tok = src.tokenizer
    text = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    prompt = tok(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        reference = greedy(uncached(model_logits(src.model)), prompt, NEW_TOKENS)

    rows: list[dict] = []
    timings: dict[str, float] = {}

    def timed(name: str, fn, *args):
        t = time.perf_counter()
        try:
            return fn(*args)
        finally:
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - t

    def safe(name: str, fn, *args, fallback: dict):
        try:
            return timed(name, fn, *args)
        except Exception as err:  # noqa: BLE001 - one tool's crash must not hide the others'
            traceback.print_exc()
            return {**fallback, "result": f"FAILED (benchmark): {_error(err)}"}

    for fmt, error in export_errors.items():
        rows.append({"tool": "our exporter", "version": "-", "export": fmt, "result": f"EXPORT FAILED: {error}"})
    if "llama" in paths:
        rows.append(safe("transformers", transformers_here, paths["llama"], text, prompt, reference,
                         fallback={"tool": "transformers", "export": "llama"}))
    for fmt in ("gguf-f16", "gguf-q8_0"):
        if fmt in paths:
            rows.append(safe("transformers gguf", transformers_gguf, fmt, paths[fmt], text, prompt, reference,
                             fallback={"tool": "transformers GGUF loader", "export": fmt}))
    for fmt in ("gguf-f16", "gguf-q8_0"):
        if fmt in paths:
            got = safe("llama.cpp", llama_cpp, fmt, paths[fmt], text, prompt, reference, tok,
                       fallback={"tool": "llama-cpp-python", "export": fmt})
            rows += got if isinstance(got, list) else [got]
    for fmt in ("gguf-f16", "gguf-q8_0"):
        if fmt in paths:
            rows.append(safe("GGUFReader", gguf_reader, fmt, paths[fmt], tok,
                             fallback={"tool": "gguf GGUFReader", "export": fmt}))
    ours_int8 = None
    if "onnx" in paths:
        row, _ = timed("onnxruntime", onnx_runtime, "onnx", paths["onnx"], GRAPH, prompt, reference, "source float32")
        rows.append(row)
    if "onnx-int8" in paths:
        row, ours_int8 = timed("onnxruntime", onnx_runtime, "onnx-int8", paths["onnx-int8"], QUANTIZED_GRAPH,
                               prompt, reference, "source float32 (int8 rounding)")
        rows.append(row)
    for row in timed("compat venvs", compat_rows, paths, prompt, reference, ours_int8):
        rows.append(row)
    rows += timed("transformers.js", transformers_js, folders, text, prompt, reference, ours_int8)
    rows += timed("ModelCard", model_cards, folders)
    for row in rows:
        for key in ("tool", "version", "export", "result", "prompt", "greedy", "compared"):
            row.setdefault(key, "-")

    failed = [r for r in rows if "FAILED" in r["result"]]
    missing = [r for r in rows if r["result"].startswith(NOT_AVAILABLE)]
    summary = {
        "model": str(source.relative_to(ROOT) if source.is_relative_to(ROOT) else source.name),
        "prompt": f"chat template of {MESSAGES[0]['content']!r} ({len(prompt)} tokens)",
        "reference greedy (ours, float32 source)": tok.decode(reference),
        "checks": len(rows), "opened": sum(r["result"].startswith(("opens", "answers", "parsed")) for r in rows),
        "failed": len(failed), "not available here": len(missing),
        "export seconds (0: reused the cache)": export_seconds,
        "seconds per tool": ", ".join(f"{k} {v:.1f}" for k, v in timings.items()),
        "threads": torch.get_num_threads(),
    }
    return {"rows": rows, "summary": summary, "wall_s": time.perf_counter() - start, "failed": failed}


def section(result: dict) -> str:
    from benchmarks._harness import table
    from benchmarks._report import _git_commit

    measured = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = _git_commit()
    tree = ("the tree had uncommitted changes beside the benchmark outputs" if "uncommitted" in commit
            else "clean tree")
    lines = [BEGIN, SECTION, "",
             (f"{DESCRIPTION}. Measured {measured} by `python -m benchmarks.hub_tools` (commit "
             f"{commit.split(' ')[0]}, {tree}; PyTorch threads: {result['summary']['threads']}; "
             f"{result['wall_s']:.0f} s). Each tool loads the export with its default options; "
             "\"prompt ids\": the tool's tokenizer on the prompt text against ours; \"greedy\": how many of the "
             f"first {NEW_TOKENS} greedy tokens (from our prompt ids) equal those of \"compared\". "
             "\"not available here\" is a tool this machine lacks, not a failure. See the module docstring of "
             "benchmarks/hub_tools.py."), "",
             table(result["rows"]), "",
             table([{"summary": k, "value": v} for k, v in result["summary"].items()]), END]
    return "\n".join(lines)


def write_section(text: str, results_md: Path = ROOT / "benchmarks" / "RESULTS.md") -> None:
    """Put the section into RESULTS.md: in place of the previous one, else before the GPU section
    (else at the end). The suite (`python -m minimind bench`) carries it when it rewrites the file."""
    from benchmarks._report import put_section

    doc = results_md.read_text(encoding="utf-8") if results_md.is_file() else "# Benchmark results\n"
    results_md.write_text(put_section(doc, text, "hub_tools"), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh", action="store_true", help="export again even when the cache is current")
    parser.add_argument("--no-write", action="store_true", help="print the table only; leave RESULTS.md alone")
    args = parser.parse_args()
    for key, value in (("HF_HUB_OFFLINE", "1"), ("HF_UPDATE_DOWNLOAD_COUNTS", "0"),
                       ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(key, value)
    from benchmarks._harness import table

    result = run(fresh=args.fresh)
    print(table(result["rows"]))
    print(json.dumps(result["summary"], indent=1, ensure_ascii=False, default=str))
    print(f"took {result['wall_s']:.0f} s")
    if not args.no_write:
        write_section(section(result))
        print("wrote its section of benchmarks/RESULTS.md")


if __name__ == "__main__":
    main()

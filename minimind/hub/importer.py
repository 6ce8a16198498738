"""`import`: a Llama-family model (a folder, or a Hub id fetched by minimind.hub.download) becomes a
MiniMind model folder, so every part of the studio (trainer, engine, API, page, exports) takes it
unchanged.

The weights keep their names and bytes: MiniMind's parameters are named as in these families, so
the safetensors files are checked (every tensor the MiniMind model needs, of the right shape,
nothing else) from their headers alone and then copied, without loading a byte into memory. The
tokenizer, its chat template, the generation config (its end tokens) and the license files are
kept; a tokenizer without a padding token gets one (its unknown token, or its end token), which
training needs. README.md names the source and its license; `import.json` records where it came from.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer

from ..byte_level import tokenizer_style
from ..chat_format import token_id
from ..config import MiniMindConfig
from ..errors import CheckpointError
from ..model import MiniMindForCausalLM
from ..tokenizer import CHAT_TEMPLATE, IM_END, IM_START, save_tokenizer
from .families import ARCHITECTURE, config_from_hf, refuse

INDEX = "model.safetensors.index.json"
RECORD = "import.json"
LICENSE_FILES = re.compile(r"^(LICEN[CS]E|NOTICE|USE_POLICY)(\.[A-Za-z]+)?$", re.IGNORECASE)
IGNORED_KEYS = re.compile(r"(^|\.)rotary_emb\.inv_freq$")   # a buffer old checkpoints saved: recomputed here


@dataclass
class ImportReport:
    """What an import produced."""

    folder: str                 # the MiniMind model folder written
    source: str                 # the Hub id or folder it came from
    family: str                 # llama, mistral, qwen2 or qwen3
    architecture: str           # the source's architecture class
    parameters: int
    dtype: str                  # the weights' stored dtype
    license: str                # as the source states it ("unknown" when it names none)
    tokenizer: str              # "byte-level" or "byte-fallback" (sentencepiece style)
    chat_template: bool         # whether the tokenizer can render conversations (chat SFT, DPO, /v1/chat)
    seconds: float


def _read_json(path: Path, source: str) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{source}: {path.name} is unreadable ({err})") from err
    if not isinstance(value, dict):
        raise CheckpointError(f"{source}: {path.name} is not a JSON object")
    return value


def weight_files(folder: Path, source: str) -> list[Path]:
    """The safetensors files of a model folder (the index's shards when sharded); pickles are refused."""
    index = folder / INDEX
    if index.is_file():
        shards = sorted(set(_read_json(index, source).get("weight_map", {}).values()))
        missing = [s for s in shards if not (folder / s).is_file() or "/" in s or "\\" in s]
        if not shards or missing:
            raise CheckpointError(f"{source}: {INDEX} names shards that are not in the folder "
                                  f"({', '.join(missing[:3]) or 'none listed'})")
        return [folder / s for s in shards]
    files = sorted(p for p in folder.glob("*.safetensors") if not p.name.startswith("consolidated"))
    if files:
        return files
    pickles = sorted(p.name for p in (*folder.glob("*.bin"), *folder.glob("*.pt"), *folder.glob("*.pth")))
    found = f" (found {', '.join(pickles[:3])}: pickled weights can run code when loaded and are refused)" \
        if pickles else ""
    raise CheckpointError(f"{source}: no safetensors weights{found}")


def check_weights(files: list[Path], config: MiniMindConfig, source: str) -> tuple[int, str, set[str]]:
    """(parameters, stored dtype, keys to drop): CheckpointError unless the files hold every tensor the
    MiniMind model of `config` has, each of its shape, and nothing else. Reads headers only."""
    with torch.device("meta"):
        expected = {k: tuple(v.shape) for k, v in MiniMindForCausalLM(config).state_dict().items()}
    optional = {"lm_head.weight"} if config.tie_word_embeddings else set()
    found, dtypes, dropped = {}, set(), set()
    for path in files:
        try:
            with safe_open(str(path), framework="pt") as f:
                for key in f.keys():
                    if IGNORED_KEYS.search(key):
                        dropped.add(key)
                        continue
                    piece = f.get_slice(key)
                    found[key] = tuple(piece.get_shape())
                    dtypes.add(piece.get_dtype())
        except (OSError, ValueError, RuntimeError, SafetensorError) as err:
            raise CheckpointError(f"{source}: {path.name} is not a readable safetensors file ({err})") from err
    missing = sorted(set(expected) - set(found) - optional)
    unexpected = sorted(set(found) - set(expected))
    wrong = sorted(k for k in set(found) & set(expected) if found[k] != expected[k])
    if missing or unexpected or wrong:
        detail = "; ".join(part for part in (
            missing and f"missing {', '.join(missing[:3])}",
            unexpected and f"unexpected {', '.join(unexpected[:3])}",
            wrong and f"{wrong[0]} is {found[wrong[0]]}, expected {expected[wrong[0]]}") if part)
        raise refuse(source, f"the weights do not match its config.json ({detail})")
    parameters = sum(torch.Size(shape).numel() for key, shape in found.items()
                     if not (config.tie_word_embeddings and key == "lm_head.weight"))
    names = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}
    dtype = "/".join(sorted(names.get(d, d.lower()) for d in dtypes))
    return parameters, dtype, dropped


def load_source_tokenizer(folder: Path, source: str, vocab_size: int):
    """(the source's tokenizer, its style): tokenizer.json only, no remote code, no sentencepiece model file."""
    if not (folder / "tokenizer.json").is_file():
        raise refuse(source, "no tokenizer.json beside the model (a tokenizer.model alone is not supported; "
                             "save the fast tokenizer with transformers first)")
    config_file = folder / "tokenizer_config.json"
    if config_file.is_file() and _read_json(config_file, source).get("auto_map"):
        raise refuse(source, "its tokenizer needs its own Python code (auto_map), which the studio never runs")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise refuse(source, f"its tokenizer does not load ({err})") from err
    if len(tokenizer) > vocab_size:
        raise refuse(source, f"its tokenizer has {len(tokenizer):,} tokens but the model only {vocab_size:,} rows")
    style = tokenizer_style(tokenizer)
    if style is None:
        raise refuse(source, "its tokenizer is neither byte-level BPE nor byte-fallback BPE, so the studio cannot "
                             "tell which bytes a token writes (answers could end mid-character)")
    if tokenizer.pad_token is None:  # padding batches needs one; an unknown or end token is never a target there
        tokenizer.pad_token = tokenizer.unk_token or tokenizer.eos_token
    if not getattr(tokenizer, "chat_template", None) and all(token_id(tokenizer, t) is not None
                                                              for t in (IM_START, IM_END)):
        tokenizer.chat_template = CHAT_TEMPLATE  # a base model with ChatML's tokens (SmolLM2): ChatML it is
    return tokenizer, style


def source_license(folder: Path) -> str:
    """The license the source states: its README's `license:` (with `license_name` for "other"),
    else the first line of a LICENSE file, else "unknown"."""
    readme = folder / "README.md"
    if readme.is_file():
        text = readme.read_text(encoding="utf-8", errors="replace")
        front = re.match(r"^---\s*\n(.*?)\n---", text, re.DOTALL)
        if front:
            fields = dict(re.findall(r"^(license(?:_name)?):\s*[\"']?([^\"'\n]+?)[\"']?\s*$", front.group(1), re.M))
            if fields.get("license"):
                name = fields["license"]
                return f"{name} ({fields['license_name']})" if name == "other" and fields.get("license_name") else name
    for path in sorted(folder.iterdir()):
        if LICENSE_FILES.match(path.name) and path.name.upper().startswith("LICEN") and path.is_file():
            first = next((line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
                          if line.strip()), "")
            return f"see {path.name}" + (f" ({first[:80]})" if first else "")
    return "unknown"


PROBES = ("Hello world! 你好，世界。 1234 5678", "  two  spaces\tand a tab\n\nnew lines 🙂",
          "床前明月光，疑是地上霜。", "ROMEO: But, soft! what light through yonder window breaks?")


def _check_round_trip(tokenizer, out: Path, source: str) -> None:
    """The saved tokenizer splits text exactly as the source's did (a class that rebuilt its pipeline
    on saving would change the ids every weight was trained on)."""
    saved = AutoTokenizer.from_pretrained(str(out))
    for text in PROBES:
        if saved(text)["input_ids"] != tokenizer(text)["input_ids"]:
            raise refuse(source, "its tokenizer does not split text the same way once saved again; import "
                                 "a model whose tokenizer.json is self-contained")


def _write_weights(files: list[Path], folder: Path, out: Path, dropped: set[str]) -> None:
    """Copy the shards (and their index); a shard holding a dropped buffer is rewritten without it."""
    for path in files:
        target = out / path.name
        if dropped:
            with safe_open(str(path), framework="pt") as f:
                holds = bool(dropped & set(f.keys()))
            if holds:
                tensors = load_file(str(path))
                save_file({k: v for k, v in tensors.items() if k not in dropped}, str(target), metadata={"format": "pt"})
                continue
        shutil.copyfile(path, target)
    if (folder / INDEX).is_file():
        index = _read_json(folder / INDEX, str(folder))
        index["weight_map"] = {k: v for k, v in index["weight_map"].items() if k not in dropped}
        (out / INDEX).write_text(json.dumps(index, indent=2), encoding="utf-8")


def _card(report: ImportReport, config: MiniMindConfig) -> str:
    billions = report.parameters / 1e9
    size = f"{billions:.2f}B" if billions >= 0.1 else f"{report.parameters / 1e6:.1f}M"
    license_id = report.license if re.fullmatch(r"[\w.\-]+", report.license) and report.license != "unknown" \
        else "other"                                  # the card's metadata takes an id; the text below says the rest
    return (
        f"---\nbase_model: {report.source}\nlicense: {license_id}\nlibrary_name: transformers\n"
        f"tags:\n- minimind\n- {report.family}\n---\n\n"
        f"# {Path(report.folder).name}\n\n"
        f"Imported into MiniMind Studio from `{report.source}` ({report.architecture}, {size} parameters, "
        f"{report.dtype} weights). The weights are the source's, unchanged; the tokenizer "
        f"({report.tokenizer}), its chat template and the generation config are the source's too.\n\n"
        f"**License: {report.license}**, as the source states it; the source's license files are kept beside "
        f"this card. Whatever you train or export from this model stays under that license.\n\n"
        f"| | |\n|---|---|\n| Layers | {config.num_hidden_layers} |\n| Width | {config.hidden_size} |\n"
        f"| Heads (query / key-value) | {config.num_attention_heads} / {config.num_key_value_heads} |\n"
        f"| Context | {config.max_position_embeddings:,} tokens |\n| Vocabulary | {config.vocab_size:,} |\n\n"
        "Train it, chat with it or export it with MiniMind Studio (`python -m minimind train --init-from "
        "<this folder>`); exports write the source family's own layout back.\n")


def import_folder(folder: str | Path, out: str | Path, source: str | None = None) -> ImportReport:
    """Import the model in `folder` into the new folder `out`; `source` names it on the card (default: the folder)."""
    start = time.perf_counter()
    folder, out = Path(folder), Path(out)
    source = source or str(folder)
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"{source}: not a model folder (no config.json)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CheckpointError(f"{out}: already exists and is not empty; choose a new folder")
    raw = _read_json(folder / "config.json", source)
    generation_file = folder / "generation_config.json"
    generation = _read_json(generation_file, source) if generation_file.is_file() else None
    config = config_from_hf(raw, source, generation)
    files = weight_files(folder, source)
    parameters, dtype, dropped = check_weights(files, config, source)
    tokenizer, style = load_source_tokenizer(folder, source, config.vocab_size)
    if config.pad_token_id is None:
        config.pad_token_id = tokenizer.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    try:
        config.save_pretrained(out)
        _write_weights(files, folder, out, dropped)
        save_tokenizer(tokenizer, out)
        _check_round_trip(tokenizer, out, source)
        if generation is not None:
            shutil.copyfile(generation_file, out / generation_file.name)
        for path in folder.iterdir():
            if LICENSE_FILES.match(path.name) and path.is_file():
                shutil.copyfile(path, out / path.name)
        report = ImportReport(
            folder=str(out), source=source, family=config.family, architecture=ARCHITECTURE[config.family],
            parameters=parameters, dtype=dtype, license=source_license(folder),
            tokenizer=style, chat_template=bool(getattr(tokenizer, "chat_template", None)),
            seconds=time.perf_counter() - start)
        (out / "README.md").write_text(_card(report, config), encoding="utf-8")
        (out / RECORD).write_text(json.dumps({**asdict(report), "folder": out.name,
                                              "imported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                                             indent=2), encoding="utf-8")
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return report

"""The license an export carries, and the license files that travel beside its weights.

An exported folder leaves the studio, so it must carry the terms of everything it was made
from. Those are found where the studio keeps them, following the model back to its start:

- beside a model folder: its license files (a shipped model keeps its corpus's, e.g.
  LICENSE.chinese-poetry) and, for an imported model, `import.json`'s record of the license
  its source stated and the Hub id it came from (the export's `base_model`);
- beside the corpus files of the run a checkpoint belongs to (RUN/config.yaml names them; the
  page stores a sample corpus with its LICENSE.<corpus> file);
- then the model that run started from (`model.init_from`) and an adapter's base, in turn.

One license for all of it is named by its Hub id; several different ones become `other`
with a `license_name` and a `license_link` to a copied file. When any part's license is not
known (a corpus with no license file beside it, a model with none), no license is claimed:
the card says what is missing, and the Hub asks whoever publishes it to choose one.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..checkpoint import adapter_base, is_adapter
from ..hub.download import is_model_id
from ..hub.importer import RECORD
from .heldout import run_folder

LICENSE_FILE = re.compile(r"^(LICEN[CS]E|NOTICE|USE_POLICY)([.\-_][\w.\-]+)?$", re.IGNORECASE)
PLAIN_NAME = re.compile(r"^LICEN[CS]E(\.(txt|md))?$", re.IGNORECASE)   # renamed LICENSE.<corpus> beside a corpus
HUB_ID = re.compile(r"^[a-z0-9][a-z0-9.+\-]*$")
MAX_LICENSE_BYTES = 1 << 20   # a license file is text; a larger "license" is not read
MAX_FOLDERS = 16              # how far back a model's origins are followed

# (pattern, Hub id) in the order tried: a file that licenses code one way and text another
# (LICENSE.shakespeare: code MIT, texts CC-BY 2.5) is read for the text's, which a model learns from
_CC = re.compile(r"creativecommons\.org/licenses/(by(?:-nc)?(?:-sa|-nd)?)/(\d\.\d)", re.IGNORECASE)
_CC_NAME = re.compile(r"Creative Commons Attribution(?:[- ]NonCommercial)?(?:[- ](?:ShareAlike|NoDerivs|"
                      r"NoDerivatives))?[^\n]*?v?(\d\.\d)", re.IGNORECASE)
_TEXTS = [
    (re.compile(r"creativecommons\.org/publicdomain/zero/1\.0|\bCC0 1\.0", re.IGNORECASE), "cc0-1.0"),
    (re.compile(r"LLAMA 3\.3 COMMUNITY LICENSE", re.IGNORECASE), "llama3.3"),
    (re.compile(r"LLAMA 3\.2 COMMUNITY LICENSE", re.IGNORECASE), "llama3.2"),
    (re.compile(r"LLAMA 3\.1 COMMUNITY LICENSE", re.IGNORECASE), "llama3.1"),
    (re.compile(r"META LLAMA 3 COMMUNITY LICENSE", re.IGNORECASE), "llama3"),
    (re.compile(r"LLAMA 2 COMMUNITY LICENSE", re.IGNORECASE), "llama2"),
    (re.compile(r"Gemma Terms of Use", re.IGNORECASE), "gemma"),
    (re.compile(r"Apache License,?\s+Version 2\.0", re.IGNORECASE), "apache-2.0"),
    (re.compile(r"GNU AFFERO GENERAL PUBLIC LICENSE\s+Version 3", re.IGNORECASE), "agpl-3.0"),
    (re.compile(r"GNU LESSER GENERAL PUBLIC LICENSE\s+Version 3", re.IGNORECASE), "lgpl-3.0"),
    (re.compile(r"GNU LESSER GENERAL PUBLIC LICENSE\s+Version 2\.1", re.IGNORECASE), "lgpl-2.1"),
    (re.compile(r"GNU GENERAL PUBLIC LICENSE\s+Version 3", re.IGNORECASE), "gpl-3.0"),
    (re.compile(r"GNU GENERAL PUBLIC LICENSE\s+Version 2", re.IGNORECASE), "gpl-2.0"),
    (re.compile(r"Mozilla Public License,?\s+(?:Version|v\.?)\s*2\.0", re.IGNORECASE), "mpl-2.0"),
    (re.compile(r"free and unencumbered software released into the public domain", re.IGNORECASE), "unlicense"),
    (re.compile(r"\bMIT License\b|Permission is hereby granted, free of charge", re.IGNORECASE), "mit"),
    (re.compile(r"Neither the name of .{0,200}? may be used to endorse", re.IGNORECASE | re.DOTALL),
     "bsd-3-clause"),
    (re.compile(r"Redistribution and use in source and binary forms", re.IGNORECASE), "bsd-2-clause"),
]


# the license ids the Hub knows (huggingface.co/docs/hub/repositories-licenses); any other is "other"
HUB_LICENSES = frozenset("""
apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0 bigcode-openrail-m
afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda cc cc0-1.0 cc-by-2.0
cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0 cc-by-nc-4.0 cc-by-nd-4.0
cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0 cdla-sharing-1.0
cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1 agpl-3.0 gfdl gpl
gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc lppl-1.3c ms-pl mpl-2.0 odc-by odbl openrail++ osl-3.0 postgresql
ofl-1.1 ncsa unlicense zlib pddl lgpl-lr deepfloyd-if-license llama2 llama3 llama3.1 llama3.2 llama3.3 gemma
""".split())


@dataclass(frozen=True)
class Piece:
    """One thing an export was made from, and its license as far as it is known."""

    what: str                   # for the card: "corpus tang_poems_sample.jsonl", "imported model Qwen/Qwen3-0.6B"
    license: str | None         # a Hub license id; None when not known
    name: str | None = None     # the license's name when `license` is "other"
    files: tuple[tuple[str, Path], ...] = ()   # (name in the export, file) of its license files


@dataclass(frozen=True)
class Terms:
    """What an export's card states about its license, and the files that go beside it."""

    license: str | None                  # the Hub id for the card; None: not known, none claimed
    license_name: str | None = None      # with license "other"
    license_link: str | None = None      # with license "other": a copied file
    pieces: tuple[Piece, ...] = ()
    files: dict[str, Path] = field(default_factory=dict)   # name in the export -> file to copy
    base_models: tuple[str, ...] = ()    # Hub ids of imported models it descends from

    @property
    def unknown(self) -> list[str]:
        """What the export was made from whose license is not known."""
        return [p.what for p in self.pieces if p.license is None]


def license_id(text: str) -> str | None:
    """The Hub license id a license text states, or None when it is none this module knows."""
    found = _CC.search(text)
    if found:
        return f"cc-{found.group(1).lower()}-{found.group(2)}"
    found = _CC_NAME.search(text)
    if found:
        words = found.group(0).lower()
        kind = "by" + ("-nc" if "noncommercial" in words else "") + (
            "-sa" if "sharealike" in words else "-nd" if "noderiv" in words else "")
        return f"cc-{kind}-{found.group(1)}"
    return next((hub_id for pattern, hub_id in _TEXTS if pattern.search(text)), None)


def slug(text: str) -> str:
    """A license_name the Hub takes: lowercase letters, digits, dots and dashes."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.") or "custom"


def _read(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_LICENSE_BYTES:
            return ""
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def license_files(folder: Path) -> list[Path]:
    """The license, notice and use-policy files directly in `folder`, sorted by name."""
    try:
        return sorted(p for p in folder.iterdir() if LICENSE_FILE.match(p.name) and p.is_file())
    except OSError:
        return []


def _file_piece(what: str, files: list[tuple[str, Path]]) -> Piece:
    """A piece licensed by the files given: the id their license texts state (several different
    ones: `other`, named after them all); a text this module does not know is `other`, named after
    its file. NOTICE and use-policy files travel along but name no license."""
    ids = []
    for name, path in files:
        if name.upper().startswith("LICEN"):
            ids.append(license_id(_read(path)) or slug(name.split(".", 1)[1] if "." in name else what.split()[-1]))
    ids = list(dict.fromkeys(ids))
    if not ids:
        return Piece(what, None, None, tuple(files))
    if len(ids) == 1 and ids[0] in HUB_LICENSES:
        return Piece(what, ids[0], None, tuple(files))
    return Piece(what, "other", "-and-".join(ids), tuple(files))


def _for_corpus(corpus: Path, files: list[Path]) -> list[Path]:
    """The license files that name this corpus (LICENSE.shakespeare for shakespeare_sample.txt)
    when some do, else all of them: a folder may hold several corpora's licenses."""
    named = [f for f in files if "." in f.name and slug(f.name.split(".", 1)[1]) in slug(corpus.stem)]
    return named or files


def _record_piece(folder: Path, record: dict) -> Piece:
    """An imported model: the license its source stated when imported (minimind.hub.importer)."""
    source = str(record.get("source") or folder.name)
    what = f"imported model {source}"
    files = [(p.name, p) for p in license_files(folder)]
    stated = str(record.get("license") or "unknown").strip()
    other = re.fullmatch(r"other \((.+)\)", stated)
    if other:
        return Piece(what, "other", slug(other.group(1)), tuple(files))
    if stated in HUB_LICENSES:
        return Piece(what, stated, None, tuple(files))
    if HUB_ID.match(stated) and stated not in ("unknown", "other"):
        return Piece(what, "other", stated, tuple(files))
    return _file_piece(what, files) if files else Piece(what, None)


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _run_config(run: Path) -> dict:
    try:
        value = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return value if isinstance(value, dict) else {}


def _corpus_pieces(config: dict) -> list[Piece]:
    """One piece per corpus file a run trained on, licensed by the license files beside it; a
    plain LICENSE there is named LICENSE.<corpus> in the export (two corpora may each have one)."""
    data = config.get("data") or {}
    root = data.get("root")
    pieces = []
    for given in data.get("files") or []:
        path = Path(root) / given if root else Path(str(given))
        what = f"corpus {path.name}"
        files = [(f"LICENSE.{slug(path.stem)}" if PLAIN_NAME.match(f.name) else f.name, f)
                 for f in _for_corpus(path, license_files(path.parent))] if path.is_file() else []
        pieces.append(_file_piece(what, files) if files else Piece(what, None))
    return pieces


def _parents(folder: Path) -> list[Path]:
    """The models `folder` was made from: an adapter's base, the model its run started from."""
    parents = []
    if is_adapter(folder):
        try:
            parents.append(Path(adapter_base(folder)))
        except (OSError, ValueError, KeyError):
            pass
    run = run_folder(folder)
    if run is not None:
        init = (_run_config(run).get("model") or {}).get("init_from")
        if init:
            parents.append(Path(str(init)))
    return [p for p in parents if p.is_dir()]


def _folder_pieces(folder: Path) -> tuple[list[Piece], str | None]:
    """(pieces, Hub id of an imported source or None) of one model folder on the way back."""
    record = _read_json(folder / RECORD) if (folder / RECORD).is_file() else None
    if record is not None:
        source = str(record.get("source") or "")
        return [_record_piece(folder, record)], source if is_model_id(source) else None
    pieces = []
    files = [(p.name, p) for p in license_files(folder)]
    if files:
        pieces.append(_file_piece(f"model {folder.name}", files))
    run = run_folder(folder)
    if run is not None:
        pieces += _corpus_pieces(_run_config(run))
    if not pieces and not _parents(folder):
        pieces.append(Piece(f"model {folder.name}", None))   # made elsewhere, nothing says how
    return pieces, None


def origins(model: str | Path, adapter: str | Path | None = None) -> tuple[list[Piece], list[str]]:
    """(every piece the model was made from, Hub ids of imported models among them), following
    adapters and runs back to where they started."""
    queue = [Path(adapter)] if adapter is not None else []
    queue.append(Path(model))
    seen, pieces, bases = set(), [], []
    while queue and len(seen) < MAX_FOLDERS:
        folder = queue.pop(0)
        key = folder.resolve()
        if key in seen:
            continue
        seen.add(key)
        found, base = _folder_pieces(folder)
        pieces += found
        if base and base not in bases:
            bases.append(base)
        if (folder / RECORD).is_file():
            continue  # an import is where a model began here
        queue += _parents(folder)
    return pieces, bases


def _named_files(pieces: list[Piece]) -> dict[str, Path]:
    """name in the export -> file: each license text once (two corpora from one folder share
    theirs); a name two different texts would share gets a number."""
    named: dict[str, Path] = {}
    texts: set[str] = set()
    for piece in pieces:
        for name, path in piece.files:
            text = _read(path)
            if text in texts:
                continue
            final, n = name, 2
            while final in named:
                final, n = f"{name}.{n}", n + 1
            named[final] = path
            texts.add(text)
    return named


def resolve_terms(model: str | Path, adapter: str | Path | None = None) -> Terms:
    """The license terms of an export of `model` (+ `adapter`): see the module's docstring."""
    pieces, bases = origins(model, adapter)
    files = _named_files(pieces)
    known = [p for p in pieces if p.license is not None]
    if not pieces or len(known) < len(pieces):
        return Terms(None, pieces=tuple(pieces), files=files, base_models=tuple(bases))
    ids = list(dict.fromkeys(p.license for p in known))
    if len(ids) == 1 and ids[0] != "other":
        return Terms(ids[0], pieces=tuple(pieces), files=files, base_models=tuple(bases))
    names = list(dict.fromkeys(p.name if p.license == "other" else p.license for p in known))
    link = next((n for n in files if n.upper().startswith("LICEN")), None)
    return Terms("other", slug("-and-".join(n or "custom" for n in names)), link, tuple(pieces), files,
                 tuple(bases))


def copy_license_files(terms: Terms, folder: Path) -> list[str]:
    """Copy the terms' license files into the export `folder`; their names there."""
    for name, path in terms.files.items():
        shutil.copyfile(path, Path(folder) / name)
    return list(terms.files)

"""The on-disk workspace: uploads, named corpora, runs and exports under one root.

Every path a user can name is resolved inside the root; upload names are
sanitised and their type and size checked before anything is stored. The
workspace survives restarts because it is nothing but folders and files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from minimind.errors import MiniMindError

ALLOWED_TYPES = (".txt", ".md", ".jsonl", ".json", ".csv", ".tsv", ".parquet")
DEFAULT_UPLOAD_LIMIT_MB = 200


class WorkspaceError(MiniMindError):
    """A name, path or upload the workspace refuses; the message says why."""


def safe_name(name: str, max_len: int = 80) -> str:
    """A file or folder name with no path, no leading dots and only word characters, '.', '-', '_'."""
    base = unicodedata.normalize("NFC", os.path.basename(str(name).replace("\\", "/"))).strip()
    base = re.sub(r"[^\w.\-]+", "_", base).strip("._")
    if not base:
        raise WorkspaceError(f"{name!r} is not a usable name: use letters, digits, '.', '-' or '_'")
    if len(base) <= max_len:
        return base
    stem, suffix = os.path.splitext(base)
    if not stem or len(suffix) > 16:
        return base[:max_len]
    return stem[:max_len - len(suffix)] + suffix  # a long name keeps its extension: the type is read from it


@dataclass
class Workspace:
    root: Path
    upload_limit_mb: float = DEFAULT_UPLOAD_LIMIT_MB

    def __post_init__(self):
        self.root = Path(self.root).resolve()
        for sub in ("uploads", "corpora", "runs", "exports", "cache"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_env(cls) -> "Workspace":
        limit = float(os.environ.get("MINIMIND_UPLOAD_LIMIT_MB", DEFAULT_UPLOAD_LIMIT_MB))
        return cls(Path(os.environ.get("MINIMIND_HOME", "workspace")), limit)

    # ---- paths ----------------------------------------------------------------

    def inside(self, path: str | Path) -> Path:
        """`path` resolved, refused unless it lies inside the workspace."""
        resolved = (self.root / path).resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise WorkspaceError(f"{path}: outside the workspace")
        return resolved

    @property
    def uploads(self) -> Path:
        return self.root / "uploads"

    @property
    def corpora(self) -> Path:
        return self.root / "corpora"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def exports(self) -> Path:
        return self.root / "exports"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    # ---- uploads ----------------------------------------------------------------

    def store_upload(self, source: str | Path, original_name: str | None = None) -> Path:
        """Copy an uploaded temp file into uploads/<stamp>/<safe name> after checking type and size."""
        source = Path(source)
        name = safe_name(original_name or source.name)
        suffix = Path(name).suffix.lower()
        if suffix not in ALLOWED_TYPES:
            raise WorkspaceError(f"{name}: file type {suffix or '(none)'} is not accepted; "
                                 f"upload one of {', '.join(ALLOWED_TYPES)}")
        size = source.stat().st_size
        if size > self.upload_limit_mb * 1024 * 1024:
            raise WorkspaceError(f"{name}: {size / 2**20:.1f} MB is over the upload limit of "
                                 f"{self.upload_limit_mb:g} MB")
        folder = self.uploads / f"{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**6:06d}"
        folder.mkdir(parents=True)
        target = folder / name
        shutil.copyfile(source, target)
        return target

    # ---- named corpora ---------------------------------------------------------

    def save_corpus(self, name: str, files: list[Path], settings: dict, summary: dict) -> Path:
        """A named corpus: its files copied into corpora/<name>/ with corpus.json describing them."""
        folder = self.corpora / safe_name(name)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        stored = []
        for f in files:
            target = folder / safe_name(Path(f).name)
            shutil.copyfile(self.inside(f) if not Path(f).is_absolute() else f, target)
            stored.append(target.name)
        meta = {"name": folder.name, "files": stored, "settings": settings, "summary": summary,
                "created": time.time()}
        (folder / "corpus.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1), encoding="utf-8")
        return folder

    def list_corpora(self) -> list[dict]:
        found = []
        for meta_file in sorted(self.corpora.glob("*/corpus.json")):
            try:
                meta = json.loads(meta_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            meta["paths"] = [str(meta_file.parent / f) for f in meta.get("files", [])]
            found.append(meta)
        return found

    def corpus(self, name: str) -> dict:
        for meta in self.list_corpora():
            if meta["name"] == name:
                return meta
        raise WorkspaceError(f"no corpus named {name!r}; save one on the Corpus tab first")

    # ---- runs and exports ---------------------------------------------------------

    def new_run_dir(self, label: str = "") -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        name = f"{stamp}-{safe_name(label)}" if label else stamp
        path = self.runs / name
        n = 1
        while path.exists():
            n += 1
            path = self.runs / f"{name}-{n}"
        return path

    def run_dir(self, run_id: str) -> Path:
        path = self.inside(Path("runs") / safe_name(run_id))
        if not (path / "config.yaml").is_file():
            raise WorkspaceError(f"no run named {run_id!r}")
        return path

    def new_export_dir(self, label: str) -> Path:
        path = self.exports / f"{time.strftime('%Y%m%d-%H%M%S')}-{safe_name(label)}"
        path.mkdir(parents=True, exist_ok=True)
        return path

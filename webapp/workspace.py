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
import tempfile
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from minimind.errors import MiniMindError
from minimind.hardware import on_space

ALLOWED_TYPES = (".txt", ".md", ".jsonl", ".json", ".csv", ".tsv", ".parquet")
DEFAULT_UPLOAD_LIMIT_MB = 200


class WorkspaceError(MiniMindError):
    """A name, path or upload the workspace refuses; the message says why."""


def safe_name(name: str, max_len: int = 80) -> str:
    """A file or folder name with no path, no leading dots and only word characters, '.', '-', '_'.
    A name whose stem has none of those (😀.txt) becomes "file" + its extension: the type is read
    from the extension, so it is kept, also when a long name is cut."""
    base = unicodedata.normalize("NFC", os.path.basename(str(name).replace("\\", "/"))).strip()
    stem, suffix = os.path.splitext(base)
    if not re.fullmatch(r"\.[\w\-]{1,16}", suffix):
        stem, suffix = base, ""
    stem = re.sub(r"[^\w.\-]+", "_", stem).strip("._")
    if not stem and suffix and base.removesuffix(suffix).strip():
        stem = "file"  # the stem held only symbols (an emoji): the type still counts
    if not stem:
        raise WorkspaceError(f"{name!r} is not a usable name: use letters, digits, '.', '-' or '_'")
    return stem[:max_len - len(suffix)] + suffix


MAX_RUN_NAME = 24  # characters of a run's id at most: a plot's legend cuts its entries ("<run> · validation") near 30


def run_name(name) -> str:
    """A run name as typed (e.g. "Tang poems v2") made a run id: letters and digits of any script,
    '-' and '_' (each other run of characters becomes one '-'), at most MAX_RUN_NAME characters.
    A name with a path in it ("../x", "a/b") or nothing usable is refused: a run id is never a path."""
    if not isinstance(name, str):
        raise WorkspaceError(f"a run name must be text (got {type(name).__name__})")
    text = unicodedata.normalize("NFC", name).strip()
    if "/" in text or "\\" in text or ".." in text:
        raise WorkspaceError(f"{name!r} is not a usable run name: a run name is a name, not a path "
                             "(use letters, digits, '-' or '_')")
    cleaned = re.sub(r"-{2,}", "-", re.sub(r"[^\w\-]+", "-", text)).strip("-_")[:MAX_RUN_NAME].rstrip("-_")
    if not cleaned:
        raise WorkspaceError(f"{name!r} is not a usable run name: use letters, digits, '-' or '_'")
    return cleaned


def use_private_gradio_temp(workspace: str | Path) -> Path:
    """Point Gradio's upload and file cache (machine-wide /tmp/gradio unless told otherwise) at
    <workspace>/cache/gradio, private to this server. Gradio reads GRADIO_TEMP_DIR when it is
    imported, so the entry points call this before anything imports gradio."""
    private = Path(workspace).resolve() / "cache" / "gradio"
    private.mkdir(parents=True, exist_ok=True)
    private.chmod(0o700)
    os.environ.setdefault("GRADIO_TEMP_DIR", str(private))
    return Path(os.environ["GRADIO_TEMP_DIR"])


PERSISTENT_MOUNT = Path("/data")  # where a Space's persistent storage (a storage bucket) is mounted by convention


def default_home(env=None, mount: Path = PERSISTENT_MOUNT) -> Path:
    """MINIMIND_HOME; else, on a Space with writable persistent storage at `mount`, a folder there (runs
    and exports then survive a restart); else ./workspace."""
    env = os.environ if env is None else env
    if env.get("MINIMIND_HOME"):
        return Path(env["MINIMIND_HOME"])
    if on_space(env) and mount.is_dir() and os.access(mount, os.W_OK):
        return mount / "minimind"
    return Path("workspace")


@dataclass
class Workspace:
    root: Path
    upload_limit_mb: float = DEFAULT_UPLOAD_LIMIT_MB

    def __post_init__(self):
        self.root = Path(self.root).resolve()
        for sub in ("uploads", "corpora", "runs", "exports", "cache", "models"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_env(cls) -> "Workspace":
        limit = float(os.environ.get("MINIMIND_UPLOAD_LIMIT_MB", DEFAULT_UPLOAD_LIMIT_MB))
        return cls(default_home(), limit)

    @property
    def persistent(self) -> bool:
        """Does this workspace outlive a restart? Everywhere but on a Space it is the disk's; on a Space
        only under the persistent storage mounted at PERSISTENT_MOUNT."""
        return not on_space() or self.root == PERSISTENT_MOUNT.resolve() or PERSISTENT_MOUNT.resolve() in self.root.parents

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
    def models(self) -> Path:
        """Models imported from the Hub or a folder (minimind.hub), one folder each."""
        return self.root / "models"

    def imported_models(self) -> dict[str, Path]:
        """Name -> folder of every finished import (a folder with its config.json and import.json)."""
        return {p.name: p for p in sorted(self.models.iterdir())
                if p.is_dir() and not p.name.startswith(".") and (p / "config.json").is_file()
                and (p / "import.json").is_file()}

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    # ---- uploads ----------------------------------------------------------------

    def store_upload(self, source: str | Path, original_name: str | None = None) -> Path:
        """Copy one uploaded temp file into a folder of its own under uploads/ (store_uploads)."""
        return self.store_uploads([(source, original_name)])[0]

    def store_uploads(self, sources: list[tuple[str | Path, str | None]]) -> list[Path]:
        """Copy uploaded temp files (path, the name the visitor gave it) into one new folder
        uploads/<stamp>-<random>/, each under its safe name (a repeated name gets -2, -3, ...),
        after checking every type and size first. Folders never collide, however many uploads
        arrive at once."""
        checked, taken = [], set()
        for source, original_name in sources:
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
            stem, n = Path(name).stem, 1
            while name.lower() in taken:
                n += 1
                name = f"{stem}-{n}{suffix}"
            taken.add(name.lower())
            checked.append((source, name))
        folder = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=self.uploads))
        stored = []
        for source, name in checked:
            shutil.copyfile(source, folder / name)
            stored.append(folder / name)
        return stored

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

    def new_run_dir(self, label: str = "", name: str | None = None) -> Path:
        """A new, empty folder runs/<id> for a run, made here (two runs started at once get two):
        the id is `name` (run_name: a readable, folder-safe form of it) or, without one,
        "<label>-<n>" (e.g. lora-3: the next number of that label), or a time stamp without a label;
        "-2", "-3", ... follow a name already taken. Ids made before (time stamps) keep working."""
        base = run_name(name) if name else ""
        if not base and label:
            base = f"{run_name(label)}-{self._next_number(run_name(label))}"
        base = base or time.strftime("%Y%m%d-%H%M%S")
        taken = {p.name.lower() for p in self.runs.iterdir()}
        for n in range(1, 10_000):
            suffix = "" if n == 1 else f"-{n}"
            candidate = base[:MAX_RUN_NAME - len(suffix)].rstrip("-_") + suffix
            if candidate.lower() in taken:
                continue
            path = self.runs / candidate
            if path.resolve().parent != self.runs.resolve():  # (run_name allows no separator: never taken)
                raise WorkspaceError(f"{name!r}: a run name must stay inside the runs folder")
            try:
                path.mkdir()
                return path
            except FileExistsError:  # another run took it meanwhile
                continue
        raise WorkspaceError(f"too many runs named {base!r}; choose another name")

    def _next_number(self, label: str) -> int:
        """1 + the highest n of the runs named <label>-<n> (1 for the first)."""
        pattern = re.compile(re.escape(label) + r"-(\d{1,6})", re.IGNORECASE)
        numbers = [int(m.group(1)) for p in self.runs.iterdir() if (m := pattern.fullmatch(p.name))]
        return max(numbers, default=0) + 1

    def run_dir(self, run_id: str) -> Path:
        path = self.inside(Path("runs") / safe_name(run_id))
        if not (path / "config.yaml").is_file():
            raise WorkspaceError(f"no run named {run_id!r}")
        return path

    def new_export_dir(self, label: str) -> Path:
        """A new folder exports/<stamp>-<label>[-n]: two exports in one second get two folders."""
        name = f"{time.strftime('%Y%m%d-%H%M%S')}-{safe_name(label)}"
        for n in range(1, 1000):
            path = self.exports / (name if n == 1 else f"{name}-{n}")
            try:
                path.mkdir(parents=True)
                return path
            except FileExistsError:
                continue
        raise WorkspaceError("too many exports at once; try again in a second")

    def export_file(self, relative: str) -> Path:
        """A file an export wrote, named relative to exports/ (what the download route serves);
        WorkspaceError for anything else, the same sentence whether or not it exists."""
        refusal = WorkspaceError("no such download")
        parts = str(relative).split("/")
        try:
            if not 2 <= len(parts) <= 3 or any(part != safe_name(part) for part in parts):
                raise refusal
        except WorkspaceError:
            raise refusal from None
        path = self.exports.joinpath(*parts)
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            raise refusal from None
        if real != path or self.exports not in real.parents or not real.is_file():
            raise refusal
        return real

"""Cache keys and atomic cache folders.

A key is a hash of everything that decides the output: file contents, the
tokenizer, the settings and a format version. A folder is built under a
temporary name and renamed into place, so a crash or a parallel run never
leaves a half-written cache that a later run would trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

from ..errors import ConfigError

FORMAT_VERSION = 1  # bump when the layout or content of cached data changes
META = "meta.json"


def key(*parts: object) -> str:
    """A short stable hash of JSON-serialisable parts."""
    blob = json.dumps([FORMAT_VERSION, *parts], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(blob.encode(), digest_size=12).hexdigest()


def tokenizer_key(tokenizer) -> str:
    """A hash of the tokenizer itself: its full JSON, special tokens and chat template."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    body = backend.to_str() if backend is not None else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    extra = [tokenizer.eos_token_id, tokenizer.pad_token_id, getattr(tokenizer, "chat_template", None)]
    return hashlib.blake2b((body + json.dumps(extra, default=str)).encode(), digest_size=12).hexdigest()


def ready(folder: Path) -> dict | None:
    """The metadata of a complete cache folder, or None when there is none."""
    try:
        return json.loads((folder / META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def new_workdir(final: Path) -> Path:
    """An empty private folder beside `final` to build into."""
    work = final.parent / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        work.mkdir(parents=True)
    except OSError as err:
        raise ConfigError(f"cannot write to the cache folder {final.parent} ({err.strerror}); "
                          "set cache_dir / --cache-dir or $MINIMIND_CACHE to a writable folder") from None
    return work


def publish(work: Path, final: Path, meta: dict) -> None:
    """Write the metadata last, then move the folder into place (another run may have won: keep theirs)."""
    (work / META).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    try:
        os.rename(work, final)
    except OSError:
        if ready(final) is None:
            shutil.rmtree(final, ignore_errors=True)
            os.rename(work, final)
        else:
            shutil.rmtree(work, ignore_errors=True)

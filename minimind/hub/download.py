"""Fetch a model from the Hugging Face Hub for an import: its config, safetensors weights, tokenizer,
generation config and license files only (never pickles or code), into huggingface_hub's own cache.

The size of the weights is read from the Hub before anything is downloaded and refused over a
limit (`MINIMIND_MAX_MODEL_GB`, 4 on the page); `HF_TOKEN` opens gated and private models. Every
failure (offline, no such model, gated, too big) is a `HubError` that says what to do. Offline,
a model already in the cache is used as it is.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from pathlib import Path

import httpx2
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from ..errors import HubError

WANTED = ("config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json",
          "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
          "chat_template.json", "LICENSE*", "LICENCE*", "NOTICE*", "USE_POLICY*", "README.md")
MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
DEFAULT_MAX_GB = 4.0

Progress = Callable[[int, int, str], None]     # (bytes done, bytes in all, file now fetched)


def is_model_id(source: str) -> bool:
    """Whether `source` reads as a Hub id ("owner/name") rather than a folder on this machine."""
    return bool(MODEL_ID.match(source)) and ".." not in source and not Path(source).exists()


def max_model_gb(default: float | None = DEFAULT_MAX_GB) -> float | None:
    """MINIMIND_MAX_MODEL_GB (a number; 0 or empty: `default`)."""
    raw = os.environ.get("MINIMIND_MAX_MODEL_GB", "").strip()
    try:
        value = float(raw) if raw else 0.0
    except ValueError:
        raise HubError(f"MINIMIND_MAX_MODEL_GB must be a number of gigabytes, got {raw!r}") from None
    return value if value > 0 else default


def _wanted(name: str) -> bool:
    """A top-level file an import reads (not Mistral's second copy of the weights, consolidated.safetensors)."""
    return "/" not in name and not name.startswith("consolidated") and \
        any(fnmatch.fnmatch(name, pattern) for pattern in WANTED)


def _explain(err: Exception, model_id: str) -> HubError:
    if isinstance(err, (OfflineModeIsEnabled, LocalEntryNotFoundError)):
        return HubError(f"{model_id}: the Hugging Face Hub cannot be reached (offline) and the model is not in "
                        "this machine's cache; download it where there is a network and import its folder")
    if isinstance(err, GatedRepoError):
        return HubError(f"{model_id} is gated: accept its terms on huggingface.co/{model_id} and set HF_TOKEN "
                        "to a token of that account")
    if isinstance(err, RepositoryNotFoundError):
        return HubError(f"{model_id}: no such model on the Hugging Face Hub (a private one needs HF_TOKEN)")
    if isinstance(err, RevisionNotFoundError):
        return HubError(f"{model_id}: no such revision on the Hub")
    status = getattr(getattr(err, "response", None), "status_code", None)
    if status in (401, 403):
        return HubError(f"{model_id}: the Hub refused access ({status}); set HF_TOKEN to a token that may read it")
    if isinstance(err, (ConnectionError, httpx2.TransportError)):
        return HubError(f"{model_id}: the connection to the Hub failed ({type(err).__name__}); try again")
    return HubError(f"{model_id}: the download failed ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})")


def download(model_id: str, *, token: str | None = None, max_gb: float | None = DEFAULT_MAX_GB,
             progress: Progress | None = None, cache_dir: str | Path | None = None) -> Path:
    """The local folder holding `model_id`'s files (see the module docstring). `progress` is told the
    bytes fetched so far after each file."""
    if not is_model_id(model_id):
        raise HubError(f"{model_id!r} is not a Hub model id (owner/name) nor a folder on this machine")
    token = token or os.environ.get("HF_TOKEN") or None
    try:
        info = HfApi(token=token).model_info(model_id, files_metadata=True)
    except Exception as err:  # noqa: BLE001 -- the network boundary: every failure becomes a sentence
        if isinstance(err, (OfflineModeIsEnabled, ConnectionError, httpx2.TransportError)):
            return _cached(model_id, cache_dir)
        raise _explain(err, model_id) from err
    files = [(s.rfilename, s.size or 0) for s in info.siblings or [] if _wanted(s.rfilename)]
    weights = sum(size for name, size in files if name.endswith(".safetensors"))
    if not weights:
        pickles = [s.rfilename for s in info.siblings or [] if s.rfilename.endswith((".bin", ".pt", ".pth"))]
        found = f" (it has {', '.join(pickles[:2])}: pickled weights are refused)" if pickles else ""
        raise HubError(f"{model_id}: no safetensors weights on the Hub{found}")
    if max_gb and weights > max_gb * 1e9:
        raise HubError(f"{model_id}: its weights are {weights / 1e9:.1f} GB, over this studio's limit of "
                       f"{max_gb:g} GB (MINIMIND_MAX_MODEL_GB); pick a smaller model")
    total, done, folder = sum(size for _, size in files), 0, None
    for name, size in sorted(files, key=lambda f: f[1]):   # small files first: a bad config fails fast
        if progress:
            progress(done, total, name)
        try:
            path = hf_hub_download(model_id, name, revision=info.sha, token=token, cache_dir=cache_dir)
        except Exception as err:  # noqa: BLE001 -- as above
            raise _explain(err, model_id) from err
        folder, done = Path(path).parent, done + size
    if progress:
        progress(done, total, "")
    return folder


def _cached(model_id: str, cache_dir) -> Path:
    """Offline: the cached snapshot of `model_id`, or HubError when there is none."""
    try:
        return Path(snapshot_download(model_id, allow_patterns=list(WANTED), local_files_only=True,
                                      cache_dir=cache_dir))
    except Exception as err:  # noqa: BLE001 -- nothing cached, whatever the client says
        raise _explain(LocalEntryNotFoundError(str(err)), model_id) from err

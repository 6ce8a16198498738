"""Models people bring from the Hugging Face Hub (or a folder): Llama, Mistral, Qwen2 and Qwen3
decoders imported as MiniMind models (importer), their configs mapped both ways (families), and
the download that fetches them (download); and the way back: an export published as a model repo
(publish)."""

from pathlib import Path

from .download import download, is_model_id, max_model_gb
from .families import FAMILIES, config_from_hf, hf_config_dict
from .importer import ImportReport, import_folder
from .publish import publish

__all__ = ["FAMILIES", "ImportReport", "config_from_hf", "download", "hf_config_dict", "import_folder",
           "import_model", "is_model_id", "max_model_gb", "publish"]


def import_model(source: str, out, *, token: str | None = None, max_gb: float | None = None,
                 progress=None, label: str | None = None) -> ImportReport:
    """Import `source` (a model folder, or a Hub id fetched first) into the new MiniMind folder `out`.
    `label` names a folder in messages and on the card (default: the path as given)."""
    if Path(source).is_dir() or not is_model_id(source):
        return import_folder(source, out, source=label)
    folder = download(source, token=token, max_gb=max_gb, progress=progress)
    return import_folder(folder, out, source=source)

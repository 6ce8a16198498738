"""What every tab needs, built once per app: the workspace, the job manager, the registry of
loaded models (shared with the API), the shipped checkpoints and the bundled samples. No
module-level state."""

from __future__ import annotations

import functools
import math
import re
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from minimind.errors import MiniMindError
from minimind.registry import ModelRegistry

from .bounded import BoundedWork, WorkLimits
from .classifiers import ClassifierCache
from .errors_zh import error_zh
from .i18n import language, tr
from .jobs import JobManager
from .uploads import UploadArea
from .workspace import Workspace, WorkspaceError

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_DIR = ROOT / "checkpoints"
SAMPLES_DIR = ROOT / "samples"
SAMPLES = {
    "Tang poems (2,016 poems, JSONL)": "tang_poems_sample.jsonl",
    "Shakespeare: The Comedy of Errors (txt)": "shakespeare_sample.txt",
    "Tang poem requests (314 chats, JSONL)": "tang_chat_sample.jsonl",
    "Tang poem preferences (720 pairs for DPO, JSONL)": "tang_preference.jsonl",
    "Tang poem prompts (2,000 requests for GRPO, JSONL)": "tang_prompts.jsonl",
    "Song ci (1,200 ci, simplified characters, JSONL)": "songci_sample.jsonl",
}
DEFAULT_MODEL = "minimind-tang"


@dataclass
class AppContext:
    workspace: Workspace
    jobs: JobManager
    models: ModelRegistry = field(default_factory=ModelRegistry)  # the one the API serves too
    shipped_dir: Path = SHIPPED_DIR
    uploads: UploadArea = field(default_factory=UploadArea)   # the files requests may hand in
    public_warning: str | None = None                         # shown on top of the page when set
    local_folders: bool = True                                # models may be imported from server folders (not
                                                              # on a public Space: a visitor names Hub ids only)
    classifiers: ClassifierCache = field(default_factory=ClassifierCache)  # loaded classifier runs (page + API)
    bounded: BoundedWork = field(default_factory=lambda: BoundedWork(WorkLimits()))  # runs a visitor's heavy work
                                                                                       # in a limited child (bounded.py)

    def shipped(self) -> dict[str, Path]:
        """Shipped checkpoints (folders with a config.json), the default one first."""
        found = {p.name: p for p in sorted(self.shipped_dir.glob("*")) if (p / "config.json").is_file()}
        return dict(sorted(found.items(), key=lambda kv: kv[0] != DEFAULT_MODEL))

    def offered_models(self) -> list[tuple[str, str, Path]]:
        """(label, id, folder) of every model a user can chat with or export; the id is
        `shipped:<name>`, `imported:<name>` (minimind.hub) or `run:<run id>`. The page and its API name
        models by id, never by folder."""
        offered = [(tr("model_shipped", name=name), f"shipped:{name}", path) for name, path in self.shipped().items()]
        offered += [(tr("model_imported", name=name), f"imported:{name}", path)
                    for name, path in self.workspace.imported_models().items()]
        offered += [(run_label(label), f"run:{run_id}", folder)
                    for run_id, label, folder in self.jobs.finished_models()]
        return offered

    def model_choices(self) -> list[tuple[str, str]]:
        """(label, id) for the page's model dropdowns."""
        return [(label, model_id) for label, model_id, _ in self.offered_models()]

    def model_folder(self, model_id: str | None) -> Path:
        """The folder of an offered model id; the page never loads any other folder."""
        if not model_id:
            raise WorkspaceError("choose a model")
        for _, offered_id, folder in self.offered_models():
            if offered_id == model_id:
                return folder
        raise WorkspaceError(f"{model_id!r} is not one of the shipped models, imported models or finished runs")


_RUN_LABEL = re.compile(r"run (?P<run>\S+) \((?P<mode>[^,()]*), step (?P<step>\d+)\)")


def run_label(label: str) -> str:
    """A finished run's name in the model lists ("run <id> (<mode>, step <n>)", as the job manager
    words it) in the request's language."""
    found = _RUN_LABEL.fullmatch(label)
    return tr("model_run", **found.groupdict()) if found else label


# an absolute path of two or more parts (not a URL, not "chars/token"): shown by its last part only
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~])/(?:[^\s/'\"`:,;()]+/)+([^\s/'\"`:,;()]*)")


def without_paths(message: str) -> str:
    """`message` with every absolute path cut to its last part: the page names no server path."""
    return _ABSOLUTE_PATH.sub(lambda m: m.group(1) or "(folder)", message)


INTERNAL_ERROR = "something went wrong on the server; its log has the details (please report it)"


def error_shown(message: str) -> str:
    """An error's message as the page shows it: no server path, and in Chinese on a zh request
    (errors_zh; the API and the CLI keep the English)."""
    message = without_paths(message)
    return error_zh(message) if language() == "zh" else message


def _popup(err: Exception) -> gr.Error:
    """The gr.Error a handler's error becomes: a page error (gr.Error) or a MiniMindError says its
    message in the page's words; anything else is a bug, shown as one sentence with no traceback,
    exception text or server path (the log keeps those)."""
    if isinstance(err, gr.Error):
        if language() != "zh" or not isinstance(err.message, str):
            return err
        return gr.Error(error_shown(err.message), duration=err.duration, visible=err.visible, title=err.title,
                        print_exception=False)
    if isinstance(err, MiniMindError):
        return gr.Error(error_shown(str(err)), print_exception=False)
    traceback.print_exc()
    return gr.Error(error_shown(INTERNAL_ERROR), print_exception=False)


def user_errors(fn):
    """Show a handler's error in the page as a pop-up (gr.Error), in the request's language (_popup)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as err:
            popup = _popup(err)
            if popup is err:
                raise
            raise popup from None
    return wrapper


def user_errors_gen(fn):
    """user_errors for generator handlers (streaming)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except Exception as err:
            popup = _popup(err)
            if popup is err:
                raise
            raise popup from None
    return wrapper


def shown(value, limit: int = 40) -> str:
    """A value a visitor sent, as an error message quotes it: its repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def form_number(value, what: str, low: float, high: float, whole: bool = False) -> float | int:
    """A number typed on the page (an emptied box arrives as None, an API caller may send text), in
    [low, high], a whole number when `whole`; WorkspaceError naming the field otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not (low <= number <= high) or (whole and number != math.floor(number)):  # NaN fails too
        kind = "a whole number" if whole else "a number"
        raise WorkspaceError(f"{what} must be {kind} between {low:g} and {high:g} (got {value!r})")
    return int(number) if whole else number

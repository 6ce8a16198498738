"""What every tab needs, built once per app: the workspace, the job manager, the loaded
models, the shipped checkpoints and the bundled samples. No module-level state."""

from __future__ import annotations

import functools
import threading
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from minimind.errors import MiniMindError

from .jobs import JobManager
from .workspace import Workspace, WorkspaceError

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_DIR = ROOT / "checkpoints"
SAMPLES_DIR = ROOT / "samples"
SAMPLES = {
    "Tang poems (2,016 poems, JSONL)": "tang_poems_sample.jsonl",
    "Shakespeare: The Comedy of Errors (txt)": "shakespeare_sample.txt",
    "Tang poem requests (314 chats, JSONL)": "tang_chat_sample.jsonl",
}
DEFAULT_MODEL = "minimind-tang"


class ModelCache:
    """A few loaded (model, tokenizer) pairs, newest kept, shared by chat and the API."""

    def __init__(self, capacity: int = 3):
        self.capacity = capacity
        self._items: OrderedDict[str, tuple] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str | Path):
        from minimind.checkpoint import load_model, load_tokenizer_for

        key = str(path)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            pair = (load_model(key, merge=True), load_tokenizer_for(key))  # adapters folded in: fast decode applies
            self._items[key] = pair
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
            return pair


@dataclass
class AppContext:
    workspace: Workspace
    jobs: JobManager
    models: ModelCache = field(default_factory=ModelCache)
    shipped_dir: Path = SHIPPED_DIR

    def shipped(self) -> dict[str, Path]:
        """Shipped checkpoints (folders with a config.json), the default one first."""
        found = {p.name: p for p in sorted(self.shipped_dir.glob("*")) if (p / "config.json").is_file()}
        return dict(sorted(found.items(), key=lambda kv: kv[0] != DEFAULT_MODEL))

    def model_choices(self) -> list[tuple[str, str]]:
        """(label, folder) for every model a user can chat with or export."""
        choices = [(f"shipped: {name}", str(path)) for name, path in self.shipped().items()]
        choices += [(label, str(path)) for label, path in self.jobs.finished_models()]
        return choices

    def known_model(self, value: str | None) -> str:
        """`value` if it is one of the offered models; the page never loads any other folder."""
        if not value:
            raise WorkspaceError("choose a model")
        if value not in {v for _, v in self.model_choices()}:
            raise WorkspaceError(f"{value!r} is not one of the shipped models or finished runs")
        return value


def user_errors(fn):
    """Show a MiniMindError's message in the page (gr.Error), never a traceback."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except MiniMindError as err:
            raise gr.Error(str(err), print_exception=False) from None
        except Exception as err:  # a bug: say so briefly, keep the traceback in the server log
            traceback.print_exc()
            raise gr.Error(f"internal error ({type(err).__name__}): {err}", print_exception=False) from None
    return wrapper


def user_errors_gen(fn):
    """user_errors for generator handlers (streaming)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except gr.Error:
            raise
        except MiniMindError as err:
            raise gr.Error(str(err), print_exception=False) from None
        except Exception as err:
            traceback.print_exc()
            raise gr.Error(f"internal error ({type(err).__name__}): {err}", print_exception=False) from None
    return wrapper

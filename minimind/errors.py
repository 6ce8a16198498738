"""Typed errors whose message a user can act on. Faces (CLI, web app, API) show
`str(error)` as is and never a traceback."""

from __future__ import annotations


class MiniMindError(Exception):
    """Base of every error caused by what a user asked for or handed in."""


def failure_message(err: BaseException) -> str:
    """What a failed run says: our own errors' sentence, anything else with its class name."""
    return str(err) if isinstance(err, MiniMindError) else f"{type(err).__name__}: {err}"


class CorpusError(MiniMindError):
    """A corpus file cannot be used; names the file and, where known, the line or record."""

    def __init__(self, message: str, file: str | None = None, position: str | None = None):
        where = ": ".join(p for p in (file, position) if p)
        super().__init__(f"{where}: {message}" if where else message)
        self.file = file
        self.position = position
        self.reason = message

    def __reduce__(self):  # pickled whole (a bounded child process hands it to the page)
        return type(self), (self.reason, self.file, self.position)


class CheckpointError(MiniMindError):
    """A model folder is missing, incomplete, or not something we can load safely."""


class ConfigError(MiniMindError):
    """A configuration value is out of range or inconsistent with another one."""


class TrainingError(MiniMindError):
    """A run cannot start or had to stop (diverged, out of memory, bad resume state)."""


class SamplingError(MiniMindError):
    """Generation parameters or a prompt are out of range."""


class ExportError(MiniMindError):
    """An export format does not apply to this model, or its verification failed."""


class HubError(MiniMindError):
    """A model cannot be fetched from the Hugging Face Hub (offline, unknown, gated, too big)."""

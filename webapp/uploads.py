"""Which files a request may hand to a handler: only the uploads this server received.

A Gradio API call names a file by path (`{"path": ..., "meta": {"_type":
"gradio.FileData"}}`), and a page mounted into a FastAPI app does not check that
path itself. So every handler that takes a file passes it through
`UploadArea.accept` first: the path must be one Gradio's upload route wrote in
this process, as written (no `..`, no symlink), inside its upload folder. The
refusal is the same sentence whether or not the path exists, and names no path.
"""

from __future__ import annotations

from pathlib import Path

from .workspace import WorkspaceError

REFUSAL = ("that file was not uploaded to this server: upload it with the file box (or by the API's "
           "upload route) and send what the upload returned")


class UploadArea:
    """The uploads of the running page. Attached to the page once it is mounted."""

    def __init__(self):
        self._received: set | None = None   # paths Gradio's upload route wrote (its own set)
        self._folder: Path | None = None    # Gradio's upload folder

    def attach(self, received: set, folder: str | Path) -> None:
        self._received, self._folder = received, Path(folder)

    def accept(self, item) -> Path:
        """The uploaded file `item` names (a path string or a file object), or WorkspaceError."""
        raw = getattr(item, "path", None) or getattr(item, "name", None) or item
        if not isinstance(raw, (str, Path)) or self._received is None or self._folder is None:
            raise WorkspaceError(REFUSAL)
        path = Path(raw)
        if str(raw) not in self._received or not path.is_absolute():
            raise WorkspaceError(REFUSAL)
        try:
            given = path.relative_to(self._folder)
            real = path.resolve(strict=True).relative_to(self._folder.resolve())
        except (ValueError, OSError, RuntimeError):
            raise WorkspaceError(REFUSAL) from None
        if given != real or ".." in given.parts or not path.is_file():
            raise WorkspaceError(REFUSAL)
        return path

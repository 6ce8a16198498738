"""Export downloads, named by the folder and file an export wrote, never by a server path.

Gradio's own file component hands the browser each file's absolute path in its cache (and copies
it there first); the Export tab links here instead: GET /downloads/<export folder>/<file> serves
a file below the workspace's exports/ and nothing else (workspace.export_file), behind the same
gate as the page.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from urllib.parse import quote

from fastapi import FastAPI
from fastapi.responses import FileResponse, JSONResponse

from minimind.serving.protocol import ApiError

from .workspace import Workspace, WorkspaceError

DOWNLOAD_ROUTE = "/downloads"


def download_url(workspace: Workspace, path: Path) -> str:
    """The page's link to a file an export wrote."""
    relative = Path(path).resolve().relative_to(workspace.exports)
    return f"{DOWNLOAD_ROUTE}/" + "/".join(quote(part) for part in relative.parts)


def download_list(workspace: Workspace, paths: list[Path], title: str = "Downloads") -> str:
    """HTML: `title`, then one link per file with its size (the Export tab's downloads)."""
    items = [f'<li><a href="{escape(download_url(workspace, p))}" download="{escape(p.name)}">{escape(p.name)}</a>'
             f" ({p.stat().st_size / 2**20:,.1f} MB)</li>" for p in paths]
    return f"<p><b>{escape(title)}</b></p><ul>{''.join(items)}</ul>" if items else ""


def add_download_route(app: FastAPI, workspace: Workspace) -> None:
    @app.get(DOWNLOAD_ROUTE + "/{relative:path}")
    async def download(relative: str):
        try:
            path = workspace.export_file(relative)
        except WorkspaceError as err:
            return JSONResponse(ApiError(404, str(err), code="not_found").body(), status_code=404)
        return FileResponse(path, filename=path.name)

"""Which files a request may hand to the page: only the uploads this server received.

A Gradio call names a file by path (`{"path": ..., "meta": {"_type":
"gradio.FileData"}}`), and Gradio reads, copies (or downloads, for a URL) it
before any handler runs. So two checks stand in front of it, with one rule: the
path must be one Gradio's upload route wrote in this process, as written (no
`..`, no symlink), inside its upload folder.
- `OnlyReceivedFiles` refuses a call naming any other file before Gradio sees it,
  for every event, named or not;
- every handler that takes a file passes it through `UploadArea.accept` too.
The refusal is the same sentence whether or not the path exists, and names no path.
"""

from __future__ import annotations

from pathlib import Path

from python_multipart.multipart import MultipartParser, parse_options_header

from minimind.serving.guards import parse_json, replaying, send_json
from minimind.serving.protocol import ApiError

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

    def received(self, raw) -> bool:
        """Is `raw` a path this server's upload route wrote, as written, still there?"""
        try:
            self.accept(raw)
            return True
        except WorkspaceError:
            return False

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


# Gradio's routes that run an event with data from the caller (queue/join is what the page uses)
GRADIO_CALLS = ("/gradio_api/queue/join", "/gradio_api/run/", "/gradio_api/call/", "/gradio_api/api/",
                "/gradio_api/component_server", "/gradio_api/stream/")


def _named_files(value) -> list[str]:
    """The `path` of every file reference inside `value`: any object with a "path" (Gradio's
    FileData has one; nothing else the page sends does)."""
    found, todo = [], [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            if "path" in item:
                found.append(item["path"])
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return found


class OnlyReceivedFiles:
    """ASGI middleware: a Gradio call whose data names a file this server did not receive (a
    path, a URL, anything not returned by its upload route) is refused before Gradio reads,
    copies or downloads it; so is one that is not plain JSON within /v1's bounds (depth,
    number of values, valid text). The body is already bounded by the request limit outside."""

    def __init__(self, app, area: UploadArea):
        self.app = app
        self.area = area

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") != "POST" or not path.startswith(GRADIO_CALLS):
            return await self.app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            data = parse_json(body)  # the same bounds as /v1: depth, values, valid text
        except ApiError as err:
            return await send_json(send, err.status, {"error": err.message})
        if any(not self.area.received(named) for named in _named_files(data)):
            return await send_json(send, 400, {"error": REFUSAL})
        return await self.app(scope, replaying(body, receive), send)


MAX_FORM_FIELD = 64 * 1024  # an upload's parts without a file name (Gradio holds them in memory)


def form_fields_within_limit(scope):
    """A chunk inspector for StreamLimit on the upload route: parses the multipart stream as it
    goes and objects to a part that is not a file (no filename) once it passes MAX_FORM_FIELD."""
    content_type = dict(scope.get("headers", [])).get(b"content-type", b"")
    kind, options = parse_options_header(content_type)
    if kind != b"multipart/form-data" or not options.get(b"boundary"):
        return None
    part = {"file": False, "size": 0, "header": b"", "value": b"", "disposition": b""}

    def header_field(data, start, end):
        part["header"] += data[start:end]

    def header_value(data, start, end):
        part["value"] += data[start:end]

    def header_end():
        if part["header"].lower() == b"content-disposition":
            part["disposition"] = part["value"]
        part["header"], part["value"] = b"", b""

    def headers_finished():
        part["file"] = b"filename" in parse_options_header(part["disposition"])[1]
        part["size"] = 0

    def part_data(data, start, end):
        if not part["file"]:
            part["size"] += end - start

    def part_begin():
        part.update(file=False, size=0, header=b"", value=b"", disposition=b"")

    parser = MultipartParser(options[b"boundary"], {
        "on_part_begin": part_begin, "on_header_field": header_field, "on_header_value": header_value,
        "on_header_end": header_end, "on_headers_finished": headers_finished, "on_part_data": part_data})
    refusal = ApiError(413, f"An upload's form fields are limited to {MAX_FORM_FIELD // 1024} KB each; send files "
                       "as file parts (with a file name).", code="request_too_large")

    def feed(chunk: bytes):
        try:
            parser.write(chunk)
        except Exception:  # a malformed form: Gradio's own parser answers it
            return None
        return refusal if part["size"] > MAX_FORM_FIELD else None

    return feed

"""A stand-in for the Hugging Face Hub's HTTP API on 127.0.0.1, so downloads run through the real
huggingface_hub client up to the network (HF_ENDPOINT points at it): model info with file sizes, file
downloads with the Hub's headers, and the Hub's error answers (404 RepoNotFound, 401 GatedRepo)."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SHA = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    """`FakeHub(repos, gated=...)`: repos maps "owner/name" to a folder whose files the Hub holds;
    `sizes` may claim other sizes in the model info (a model too big to fetch; see `size`)."""

    def __init__(self, repos: dict[str, Path], gated: set[str] = frozenset(), sizes: dict[str, int] | None = None):
        self.repos, self.gated, self.sizes = repos, set(gated), sizes or {}
        self.fetched: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def size(self, file: Path) -> int:
        """The size the model info claims: `sizes` by name, or by "*.safetensors" for every weight file."""
        claimed = self.sizes.get(file.name) or (self.sizes.get("*.safetensors") if file.suffix == ".safetensors" else None)
        return claimed or file.stat().st_size

    def __enter__(self) -> "FakeHub":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _refuse(self, status: int, code: str) -> None:
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("Content-Type", "application/json")
                body = json.dumps({"error": code}).encode()
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _repo(self, repo: str) -> Path | None:
                if repo in hub.gated:
                    self._refuse(401, "GatedRepo")
                    return None
                if repo not in hub.repos:
                    self._refuse(404, "RepoNotFound")
                    return None
                return hub.repos[repo]

            def do_HEAD(self):
                self.do_GET()

            def do_GET(self):
                path = self.path.split("?", 1)[0]
                info = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/[^/]+)?", path)
                resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
                if info:
                    folder = self._repo(info.group(1))
                    if folder is None:
                        return
                    siblings = [{"rfilename": p.name, "size": hub.size(p)} for p in sorted(folder.iterdir())
                                if p.is_file()]
                    body = json.dumps({"id": info.group(1), "modelId": info.group(1), "sha": SHA,
                                       "siblings": siblings, "private": False}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                elif resolve:
                    folder = self._repo(resolve.group(1))
                    if folder is None:
                        return
                    file = folder / resolve.group(3)
                    if not file.is_file():
                        self._refuse(404, "EntryNotFound")
                        return
                    body = file.read_bytes()
                    if self.command == "GET":
                        hub.fetched.append(file.name)
                    self.send_response(200)
                    self.send_header("X-Repo-Commit", SHA)
                    self.send_header("ETag", f'"{hashlib.sha256(body).hexdigest()}"')
                    self.send_header("Content-Type", "application/octet-stream")
                else:
                    self._refuse(404, "RepoNotFound")
                    return
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

        return Handler

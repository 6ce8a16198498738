"""A public deployment attacked as an outsider would: every endpoint that takes a file is found by
enumerating the running app's API and handed paths it never received; every route is called
without the login; /v1 gets oversized, malformed and misdirected requests."""

import json
import os
import shutil
import time
import uuid
from pathlib import Path

import httpx
import pytest
from gradio_client import Client, handle_file

from minimind.serving.guards import parse_json
from minimind.serving.protocol import ApiError
from webapp.app import build_app
from webapp.gate import Access, _public
from webapp.uploads import REFUSAL
from helpers import ROOT
from webapp_helpers import LiveServer, free_port, gradio_call, make_shipped, rss_mb, studio_process as run_studio

SECRET = f"TOP-SECRET-{uuid.uuid4().hex}"  # in files outside the upload area; must never come back
# (unique per run: Gradio's upload folder is shared with every other Gradio process on the machine)
LOGIN = ("ada", "lovelace")
KEY = "k3y-for-programs"


def _file_param(param: dict) -> str | None:
    """'chat' / 'files' / 'file' when a parameter can carry a FileData, else None."""
    schema = json.dumps(param["type"])
    if "FileData" not in schema and "gradio.FileData" not in schema:
        return None
    if param.get("component") == "Chatbot":
        return "chat"
    return "files" if param["type"].get("type") == "array" else "file"


def _file_data(path) -> dict:
    return {"path": str(path), "meta": {"_type": "gradio.FileData"}}


def _arguments(info: dict, path) -> list:
    """Arguments for one endpoint: the hostile path wherever a file can go, defaults elsewhere."""
    args = []
    for param in info["parameters"]:
        kind = _file_param(param)
        if kind == "file":
            args.append(_file_data(path))
        elif kind == "files":
            args.append([_file_data(path)])
        elif kind == "chat":
            args.append([{"role": "user", "content": [{"type": "file", "file": _file_data(path)}]},
                         {"role": "assistant", "content": [{"type": "file", "file": _file_data(path)}]},
                         {"role": "user", "content": [{"type": "text", "text": "hi"}]}])
        elif param["parameter_has_default"]:
            args.append(param["parameter_default"])
        else:
            args.append(param["example_input"])
    return args


def _files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _holding_secret(folder: Path) -> set[Path]:
    found = set()
    for p in folder.rglob("*"):
        try:
            if p.is_file() and SECRET.encode() in p.read_bytes():
                found.add(p)
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    root = tmp_path_factory.mktemp("security")
    shipped = make_shipped(root / "checkpoints")
    app = build_app(root / "ws", shipped_dir=shipped, background_jobs=False, access=Access())
    with LiveServer(app, free_port()) as server:
        yield server, app, root


def test_every_endpoint_that_takes_a_file_refuses_paths_it_did_not_receive(studio):
    server, app, root = studio
    ws = root / "ws"
    client = Client(server.url, verbose=False)
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    targets = {name: info for name, info in endpoints.items()
               if any(_file_param(p) for p in info["parameters"])}
    assert {"/inspect_corpus", "/export", "/chat", "/regenerate"} <= set(targets), sorted(targets)

    # a saved corpus gives the workspace files of other kinds (corpus.json, a stored upload)
    client.predict([], "Tang poems (2,016 poems, JSONL)", "auto", "", "paragraph", False, api_name="/inspect_corpus")
    client.predict("saved", "auto", "", "paragraph", False, False, 6400, api_name="/save_corpus")
    upload_dir = Path(app.state.context.uploads._folder)
    outside = root / "outside" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text(SECRET + "\n", encoding="utf-8")
    plant = upload_dir / f"planted-{uuid.uuid4().hex}"  # Gradio's upload folder is shared: a folder of our own
    planted = plant / "never-uploaded" / "notes.txt"  # in the folder, but not received
    planted.parent.mkdir(parents=True)
    planted.write_text(SECRET + "\n", encoding="utf-8")
    link = plant / "link" / "passwd.txt"
    link.parent.mkdir(parents=True)
    link.symlink_to("/etc/passwd")
    hostile = {
        "absolute": outside,
        "dot-dot": upload_dir / os.path.relpath(outside, upload_dir),
        "symlink into /etc": link,
        "inside the upload folder, never uploaded": planted,
        "workspace corpus.json": ws / "corpora" / "saved" / "corpus.json",
        "workspace stored upload": next((ws / "corpora" / "saved").glob("*.jsonl")),
        "missing": root / "outside" / "no-such-file.txt",
    }
    workspace_before = _files_under(ws)
    secrets_before = _holding_secret(upload_dir)
    for name, info in targets.items():
        for label, path in hostile.items():
            event, payload = gradio_call(server.url, name, _arguments(info, path))
            text = json.dumps(payload)
            where = f"{name} with {label}"
            assert SECRET not in text and "root:x:0" not in text, where
            assert str(path) not in text and str(upload_dir) not in text, where  # no path comes back
            assert '"type": "file"' not in text and "gradio_api/file=" not in text, where  # nothing to download
            assert event in ("refused", "error") and payload["error"] == REFUSAL, (where, event, payload)
    downloads = {**hostile, "workspace lock": ws / "jobs.lock"}
    downloads.pop("inside the upload folder, never uploaded")  # Gradio serves its own folder, by design
    for label, path in downloads.items():  # nor downloaded by path
        for route in ("/gradio_api/file=", "/gradio_api/file/"):
            answer = httpx.get(server.url + route + str(path))
            assert answer.status_code in (403, 404) and SECRET not in answer.text, (route, label)
    assert _files_under(ws) == workspace_before  # nothing was copied into the workspace
    assert _holding_secret(upload_dir) == secrets_before  # nor into Gradio's cache for download
    shutil.rmtree(plant)


def test_every_event_of_the_page_refuses_files_it_did_not_receive(studio):
    """Unnamed events too (the page calls them by number through queue/join): a file reference in
    any input is refused before Gradio reads, copies or downloads it."""
    server, app, root = studio
    upload_dir = Path(app.state.context.uploads._folder)
    outside = root / "outside-events" / "secret.txt"
    outside.parent.mkdir(exist_ok=True)
    outside.write_text(SECRET + "\n", encoding="utf-8")
    config = httpx.get(server.url + "/config").json()
    before = _holding_secret(upload_dir)
    tried = 0
    for index, dependency in enumerate(config["dependencies"]):
        if not dependency["inputs"]:
            continue
        for reference in (_file_data(outside), _file_data("/dev/zero"), _file_data("https://example.com/x.txt"),
                          {"path": str(outside)}):
            data = [[{"role": "user", "content": [{"type": "file", "file": reference}]}]] + \
                [reference] * (len(dependency["inputs"]) - 1)
            answer = httpx.post(server.url + "/gradio_api/queue/join", timeout=30,
                                json={"data": data, "fn_index": dependency.get("id", index), "session_hash": "s3",
                                      "event_data": None, "trigger_id": None})
            assert answer.status_code == 400 and answer.json()["error"] == REFUSAL, (index, answer.text[:200])
            tried += 1
    assert tried >= 40
    assert _holding_secret(upload_dir) == before
    assert httpx.get(server.url + "/gradio_api/deep_link", params={"session_hash": "s3"}).status_code == 404


def test_a_real_upload_is_accepted_and_a_missing_path_tells_nothing(studio, tmp_path):
    server, app, _ = studio
    poems = tmp_path / "poems.jsonl"
    poems.write_text('{"text": "床前明月光，疑是地上霜。"}\n{"text": "春眠不覺曉。"}\n', encoding="utf-8")
    client = Client(server.url, verbose=False)
    summary, *_ = client.predict([handle_file(str(poems))], None, "auto", "", "paragraph", False,
                                 api_name="/inspect_corpus")
    assert "**Documents:** 2" in summary
    # what the upload route returned can be sent again by a script: it was received here
    uploaded = httpx.post(f"{server.url}/gradio_api/upload", files=[("files", ("p.jsonl", poems.read_bytes()))])
    event, payload = gradio_call(server.url, "/inspect_corpus", [[_file_data(uploaded.json()[0])], None, "auto", "",
                                                           "paragraph", False, ""])  # + the label field
    assert event == "complete" and "**Documents:** 2" in payload[0]


def test_no_text_parameter_reads_a_folder_outside_the_workspace(studio):
    """Names of runs, corpora and models come as text: a path in any of them reads nothing."""
    server, app, root = studio
    ws = root / "ws"
    bait = root / "bait"
    (bait / "checkpoints" / "step-1").mkdir(parents=True, exist_ok=True)
    for name in ("train.log", "status.json", "metrics.jsonl", "config.yaml", "corpus.json", "config.json"):
        (bait / name).write_text(SECRET + "\n", encoding="utf-8")
    values = [str(bait), os.path.relpath(bait, ws / "runs"), os.path.relpath(bait, ws / "corpora"),
              f"run:{os.path.relpath(bait, ws / 'runs')}", f"shipped:{os.path.relpath(bait, root / 'checkpoints')}",
              f"new:{bait}"]
    endpoints = Client(server.url, verbose=False).view_api(return_format="dict", print_info=False)["named_endpoints"]
    tried = 0
    for name, info in endpoints.items():
        params = info["parameters"]
        for i, param in enumerate(params):
            parameter = param["parameter_name"]
            if param["type"].get("type") != "string" or parameter in ("message", "system_prompt"):
                continue  # free text for the model, not a name
            for value in values:
                args = _arguments(info, bait / "train.log")
                args[i] = value
                event, payload = gradio_call(server.url, name, args)
                tried += 1
                assert SECRET not in json.dumps(payload) and str(bait) not in json.dumps(payload).replace(
                    json.dumps(value)[1:-1], ""), (name, parameter, value)
    assert tried > 20


def test_the_page_chat_bounds_its_work_before_tokenizing(studio):
    server, _, _ = studio
    controls = ["shipped:minimind-tang", "shipped:minimind-tang", False]
    sampling = [0.0, 0.9, 0, 8, 1.0]
    started = time.perf_counter()
    event, payload = gradio_call(server.url, "/chat", ["hi", [], []] + controls + ["长" * 300_000] + sampling)
    assert event == "error" and "characters" in payload["error"], payload
    assert time.perf_counter() - started < 2.0
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": "春眠不覺曉"}]}
               for i in range(3_000)]  # about as long as a page call may be (MAX_JSON_ITEMS)
    # the model loads on the first chat: a short one first, so the bound times the long history's work alone
    assert gradio_call(server.url, "/chat", ["hi", [], []] + controls + [""] + sampling)[0] == "complete"
    started = time.perf_counter()
    event, payload = gradio_call(server.url, "/chat", ["續寫", history, []] + controls + [""] + sampling)
    assert event == "complete" and "oldest turns were left out" in json.dumps(payload, ensure_ascii=False)
    # a bound against unbounded work, not a speed claim: it took 5 s on a loaded AVX2-only CPU,
    # where a 5 s bound failed in CI
    assert time.perf_counter() - started < 15.0


def _routes(app, prefix: str = ""):
    """(path, methods) of every route of the app, of the apps mounted in it and of the routers
    they include (FastAPI keeps an included router whole, with its prefix, since 0.16x)."""
    for route in getattr(app, "routes", []):
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _routes(included, prefix + route.include_context.prefix)
            continue
        path = prefix + getattr(route, "path", "")
        inner = getattr(route, "app", None)
        if hasattr(inner, "routes") and not getattr(route, "methods", None):
            yield from _routes(inner, path)
        else:
            yield path, sorted(getattr(route, "methods", None) or {"GET"})


def _concrete(path: str) -> str:
    import re

    return re.sub(r"\{[^}]+\}", "x", path) or "/"


def test_with_a_login_every_route_needs_it(tmp_path):
    shipped = make_shipped(tmp_path / "checkpoints")
    app = build_app(tmp_path / "ws", shipped_dir=shipped, background_jobs=False,
                    access=Access(login=LOGIN, api_key=KEY))
    routes = sorted(set((_concrete(p), m) for p, methods in _routes(app) for m in methods))
    assert len(routes) > 80 and ("/gradio_api/upload", "POST") in routes and ("/v1/chat/completions", "POST") in routes
    with LiveServer(app, free_port()) as server:
        opened = []
        for path, method in routes:
            answer = httpx.request(method, server.url + path, timeout=30)
            if _public(path, method):
                opened.append(path)
                assert answer.status_code != 401 or path in ("/login", "/login/")  # the login form's own needs
            else:
                assert answer.status_code == 401, (method, path, answer.status_code, answer.text[:200])
        assert set(opened) <= {"/", "/login", "/login/", "/theme.css", "/favicon.ico", "/robots.txt",
                               "/manifest.json"} | {p for p in opened if p.startswith(("/assets/", "/static/"))}
        page = httpx.get(server.url + "/")
        assert "inspect_corpus" not in page.text and "minimind-tang" not in page.text  # the login form only
        assert httpx.post(server.url + "/gradio_api/upload", files=[("files", ("a.txt", b"x"))]).status_code == 401
        v1 = httpx.get(server.url + "/v1/models")
        assert v1.status_code == 401 and v1.json()["error"]["code"] == "invalid_api_key"

        # programs: the bearer key or the page's user and password; browsers: the session cookie
        assert httpx.get(server.url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert httpx.get(server.url + "/v1/models", auth=LOGIN).status_code == 200
        assert httpx.get(server.url + "/v1/models", auth=(LOGIN[0], "wrong")).status_code == 401
        assert httpx.get(server.url + "/v1/models", headers={"Authorization": "Bearer wrong"}).status_code == 401
        with httpx.Client(base_url=server.url) as browser:
            assert browser.post("/login", data={"username": "ada", "password": "wrong"}).status_code >= 400
            assert browser.get("/config").status_code == 401
            assert browser.post("/login", data={"username": "ada", "password": "lovelace"}).status_code == 200
            assert browser.get("/config").status_code == 200
            assert browser.get("/v1/models").status_code == 200
        client = Client(server.url, auth=LOGIN, verbose=False)
        assert "/chat" in client.view_api(return_format="dict", print_info=False)["named_endpoints"]


def test_access_rules():
    allow = lambda access, path, headers={}, user=None, method="GET": access.allows(  # noqa: E731
        path, method, headers, lambda: user)
    bearer = {"authorization": f"Bearer {KEY}"}
    open_local = Access()
    assert allow(open_local, "/v1/models") and allow(open_local, "/config")
    keyed = Access(api_key=KEY)
    assert not allow(keyed, "/v1/models") and allow(keyed, "/v1/models", bearer) and allow(keyed, "/config")
    space = Access.from_env({"SPACE_ID": "someone/studio"})
    assert space.open_to_all and not space.public_api and "no login" in space.warning()
    assert allow(space, "/config") and not allow(space, "/v1/models") and not allow(space, "/v1/models", bearer)
    assert "closed" in space.refusal("/v1/models")[0]["error"]["message"]
    opened = Access.from_env({"SPACE_ID": "someone/studio", "MINIMIND_PUBLIC_API": "1"})
    assert allow(opened, "/v1/models") and "open to anyone" in opened.warning()
    space_keyed = Access.from_env({"SPACE_ID": "someone/studio", "MINIMIND_API_KEY": KEY})
    assert allow(space_keyed, "/v1/models", bearer) and not allow(space_keyed, "/v1/models")
    private = Access.from_env({"SPACE_ID": "someone/studio", "MINIMIND_AUTH": "ada:lovelace",
                               "MINIMIND_PUBLIC_API": "1"})
    assert private.warning() is None
    assert not allow(private, "/v1/models") and not allow(private, "/config") and allow(private, "/config", user="ada")
    assert allow(private, "/") and allow(private, "/assets/index.js") and allow(private, "/login", method="POST")
    assert not allow(private, "/", method="POST") and not allow(private, "/gradio_api/upload", method="POST")
    with pytest.raises(SystemExit, match="user:password"):
        Access.from_env({"MINIMIND_AUTH": "no-colon"})


def test_a_public_space_warns_on_the_page_and_keeps_v1_closed(tmp_path, capsys):
    shipped = make_shipped(tmp_path / "checkpoints")
    app = build_app(tmp_path / "ws", shipped_dir=shipped, background_jobs=False,
                    access=Access.from_env({"SPACE_ID": "someone/studio"}))
    assert "WARNING: This Space has no login" in capsys.readouterr().out  # in the server's log
    with LiveServer(app, free_port()) as server:
        config = httpx.get(server.url + "/config")
        assert config.status_code == 200 and "This Space has no login" in config.text
        closed = httpx.post(server.url + "/v1/chat/completions", json={"model": "minimind-tang", "messages": []})
        assert closed.status_code == 401 and "MINIMIND_PUBLIC_API" in closed.json()["error"]["message"]


def test_json_that_is_not_plain_text_is_a_400():
    many = b'{"messages": [' + b",".join([b"[]"] * 346_000) + b"]}"  # 1 MB that would parse for a second
    for raw, fragment in [(b'{"a": "\\ud800"}', "not valid Unicode"), (b"[" * 100_000 + b"]" * 100_000, "values"),
                          (b"[" * 40 + b"]" * 40, "deeper"), (b'{"a": "\xff"}', "not valid JSON"),
                          (b'{"\\udfff": 1}', "not valid Unicode"), (many, "more than 20,000 values"),
                          (b"[" + b",".join([b"1"] * 30_000) + b"]", "values"), (b'{"seed": 1' + b"1" * 5000 + b"}",
                                                                                  "number too long")]:
        started = time.perf_counter()
        with pytest.raises(ApiError) as err:
            parse_json(raw)
        assert err.value.status == 400 and fragment in err.value.message
        assert time.perf_counter() - started < 0.1
    assert parse_json('{"messages": [{"content": "床前明月光 🙂"}]}'.encode()) == {"messages": [{"content": "床前明月光 🙂"}]}


def test_a_bug_is_a_500_in_openai_shape_without_its_text():
    from fastapi.testclient import TestClient

    from minimind.serving import ModelRegistry, create_app

    class Broken(ModelRegistry):
        def describe(self):
            raise RuntimeError("/srv/secret/place exploded")

    with TestClient(create_app(Broken()), raise_server_exceptions=False) as client:
        answer = client.get("/v1/models")
        assert answer.status_code == 500
        assert answer.json()["error"]["code"] == "internal_error" and "secret" not in answer.text
        assert client.get("/v1/nothing").status_code == 404
        too_big = client.post("/v1/completions", content=b"x" * (2 << 20))
        assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "request_too_large"


@pytest.fixture(scope="module")
def studio_process(tmp_path_factory):
    """The Studio as users run it (`python -m webapp`), in its own process so its memory can be read."""
    root = tmp_path_factory.mktemp("studio-process")
    with run_studio(root, {"MINIMIND_UPLOAD_LIMIT_MB": "5"}) as (url, proc):
        yield url, proc, root


def test_a_20_mb_body_is_refused_at_once_without_touching_memory(studio_process):
    url, proc, root = studio_process
    httpx.get(url + "/v1/models")
    before = rss_mb(proc.pid)
    body = b'{"model": "minimind-tang", "messages": [{"role": "user", "content": "' + b"a" * 20_000_000 + b'"}]}'

    def chunked():
        for i in range(0, len(body), 1 << 20):
            yield body[i:i + (1 << 20)]

    for path, content in [("/v1/chat/completions", body), ("/v1/completions", chunked()),
                          ("/gradio_api/queue/join", body)]:
        started = time.perf_counter()
        answer = httpx.post(url + path, content=content, headers={"Content-Type": "application/json"}, timeout=30)
        took = time.perf_counter() - started
        assert answer.status_code == 413, (path, answer.status_code, answer.text[:200])
        assert answer.json()["error"]["code"] == "request_too_large" and took < 1.0, (path, took)
    # uploads stream to disk under their own limit (5 MB here): a bigger one stops at the limit,
    # whether it says its size or not, and a form field (which Gradio would hold in memory) too
    boundary = "b0undary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\n").encode()
    form = head + b"x" * 20_000_000 + f"\r\n--{boundary}--\r\n".encode()
    small_field = head + b"x" * 3_000_000 + f"\r\n--{boundary}--\r\n".encode()  # under the 5 MB limit
    file_form = form.replace(b'name="note"', b'name="files"; filename="big.txt"', 1)
    chunks = lambda body: (body[i:i + (1 << 20)] for i in range(0, len(body), 1 << 20))  # noqa: E731
    for content, says in [(form, "MINIMIND_UPLOAD_LIMIT_MB"), (chunks(form), "form fields are limited"),
                          (chunks(small_field), "form fields are limited"),
                          (chunks(file_form), "maximum allowed size")]:  # a file part meets Gradio's own check
        started = time.perf_counter()
        answer = httpx.post(url + "/gradio_api/upload", content=content, timeout=30,
                            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        assert answer.status_code == 413 and time.perf_counter() - started < 2.0, answer.text[:200]
        assert says in answer.text, answer.text[:200]
    after = rss_mb(proc.pid)
    assert abs(after - before) < 50, (before, after)
    # and what it receives lands in its own workspace, not in a folder shared with other processes
    stored = httpx.post(url + "/gradio_api/upload", files=[("files", ("poem.txt", "床前明月光".encode()))]).json()
    assert Path(stored[0]).is_relative_to(root / "ws")


def test_malformed_and_misdirected_api_requests_get_openai_shaped_4xx(studio_process):
    url, _, root = studio_process
    cases = [
        ("POST", "/v1/chat/completions", '{"model": "minimind-tang", "messages": [{"role": "user", '
                                         '"content": "\\ud800"}]}', 400),
        ("POST", "/v1/chat/completions", "[" * 100_000 + "]" * 100_000, 400),
        ("POST", "/v1/completions", '{"model": "minimind-tang", "prompt": "\\udc80 tail"}', 400),
        ("GET", "/v1/no/such/route", None, 404),
        ("GET", "/v1", None, 404),
        ("GET", "/v1/chat/completions", None, 405),
        ("DELETE", "/v1/models", None, 405),
        ("POST", "/v1/models/minimind-tang", "{}", 405),
        ("POST", "/v1/chat/completions", '{"model": "minimind-tang", "messages": [{"role": "user", "content": "'
                                         + "长" * 300_000 + '"}]}', 400),
        ("POST", "/v1/chat/completions", json.dumps({"model": "minimind-tang",
                                                     "messages": [{"role": "user", "content": ""}] * 25_000}), 400),
        ("POST", "/v1/completions", '{"model": "minimind-tang", "prompt": "a", "seed": 1' + "1" * 5000 + "}", 400),
        ("POST", "/v1/chat/completions", '{"model": "minimind-tang", "messages": [{"role": "user", "content": "hi"}],'
                                         ' "max_tokens": 5, "repetition_penalty": 1e-320}', 400),
        ("POST", "/v1/chat/completions", '{"model": "minimind-tang", "messages": [' + ",".join(
            ['{"role": "user", "content": "x"}'] * 12_000) + "]}", 400),
    ]
    for method, path, body, status in cases:
        started = time.perf_counter()
        answer = httpx.request(method, url + path, content=body, headers={"Content-Type": "application/json"},
                               timeout=60)
        assert answer.status_code == status, (method, path, answer.status_code, answer.text[:300])
        error = answer.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"], (path, error)
        assert str(ROOT) not in error["message"] and "Traceback" not in answer.text
        assert time.perf_counter() - started < 5, (method, path)
    tiny = httpx.post(url + "/v1/completions", json={"model": "minimind-tang", "prompt": "床前", "max_tokens": 2,
                                                     "temperature": 1e-300}, timeout=60)
    assert tiny.status_code == 200, tiny.text  # as greedy: no overflow in the sampler
    assert "Traceback" not in (root / "server.log").read_text()


def test_messages_on_the_page_name_no_server_path():
    from webapp.context import without_paths

    message = ('FAILED: OSError: [Errno 28] No space left: "/srv/ws/runs/20261130-x/checkpoints/step-40" '
               "(see /home/me/studio/train.log); 1.09 chars/token; docs at http://localhost:7860/v1/models")
    cleaned = without_paths(message)
    assert "/srv" not in cleaned and "/home" not in cleaned
    assert '"step-40"' in cleaned and "(see train.log)" in cleaned
    assert "chars/token" in cleaned and "http://localhost:7860/v1/models" in cleaned

"""Issue 45: an export folder is published to the Hugging Face Hub as a model repo, private by default,
from the CLI (`export --push-to-hub REPO`, `publish FOLDER REPO`) and the Export tab.

The Hub cannot be reached from the tests: they run huggingface_hub's real objects up to the network
boundary (its repo id validator, its token resolution, HfApi refusing in offline mode, a connection
refused on a closed local port, the HfHubHTTPError its own hf_raise_for_status makes of a 401/403/409
answer) and check each becomes a HubError that says what to do, and that the token never shows up in
a message, a log, the workspace or the export folder."""

import io
import logging
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import gradio as gr
import httpx
import httpx2
import pytest
from huggingface_hub import constants
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import hf_raise_for_status, validate_repo_id

from helpers import ROOT, free_port
from minimind.cli import main
from minimind.errors import HubError
from minimind.hub.publish import NO_TOKEN, VISITOR_TOKEN, check_repo_id, explain, public_repo, publish
from webapp.context import AppContext, user_errors
from webapp.errors_zh import ERRORS, LEAD, error_zh
from webapp.gate import Access
from webapp.jobs import JobManager
from webapp.tabs import publish as publish_tab
from webapp_helpers import LiveServer, fake_model, gradio_call, make_shipped

TOKEN = "hf_TestTokenNeverShown1234567890"
EXPORT = "20261205-120000-tiny/hf"  # an export's format folder, as the page names it
ENGLISH_RUN = re.compile(r"[A-Za-z][a-z]+(?:[ ,;:'()-]+[A-Za-z][a-z]+){3,}")  # as tests/studio/test_errors_zh.py
NAMES = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`|Hugging Face")


def write_export(folder: Path) -> Path:
    """An export's folder as minimind.export leaves it (its card and a config; no weights needed
    where nothing is uploaded)."""
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("# MiniMind export: hf\n", encoding="utf-8")
    (folder / "config.json").write_text("{}", encoding="utf-8")
    return folder


def no_saved_token(monkeypatch, tmp_path):
    """No token anywhere huggingface_hub looks: HF_TOKEN unset, no saved login."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-saved-token"))


def files_holding(root: Path, text: str) -> list[Path]:
    return [p for p in Path(root).rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def cli_env(tmp_path: Path, **extra) -> dict:
    """The environment of a CLI run: no saved login (HF_HOME in tmp_path), HF_TOKEN only if given."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    return {**env, "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_OFFLINE": "1", **extra}


def run_cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minimind", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=300)


# ---- the library: what is refused before any network --------------------------------------------

@pytest.mark.parametrize("repo_id", ["my model", "a/b/c", "me/foo--bar", "me/x.git", "-me/x", "me/" + "x" * 97])
def test_a_bad_repo_id_is_refused_by_the_hubs_own_validator(tmp_path, repo_id):
    with pytest.raises(HFValidationError):
        validate_repo_id(repo_id)
    with pytest.raises(HubError, match=r"is not a Hugging Face repo id: use owner/name"):
        publish(write_export(tmp_path / "hf"), repo_id, token=TOKEN)
    assert check_repo_id("  me/minimind-tang ") == "me/minimind-tang"


def test_a_long_repo_id_or_export_name_is_quoted_cut():
    """A visitor's text in a refusal is cut: the message never carries 10,000 characters back."""
    with pytest.raises(HubError) as caught:
        check_repo_id("x" * 10_000)
    assert len(str(caught.value)) < 400 and "…" in str(caught.value)


def test_no_repo_id_and_a_folder_that_is_no_export_are_refused(tmp_path):
    with pytest.raises(HubError, match=r"^type the Hub repo to publish to \(owner/name"):
        publish(write_export(tmp_path / "hf"), "  ", token=TOKEN)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}")  # a model folder without its card: no export
    with pytest.raises(HubError, match=r"^run: not an export folder \(it needs a README.md card"):
        publish(tmp_path / "run", "me/x", token=TOKEN, label="run")
    with pytest.raises(HubError, match=r"^gone: no such export folder$"):
        publish(tmp_path / "gone", "me/x", token=TOKEN, label="gone")


def test_without_a_token_it_says_how_to_give_one_before_any_network(monkeypatch, tmp_path):
    """Offline mode is on: had a request been made, the message would be the offline one."""
    no_saved_token(monkeypatch, tmp_path)
    assert constants.HF_HUB_OFFLINE
    with pytest.raises(HubError) as caught:
        publish(write_export(tmp_path / "hf"), "me/x")
    assert str(caught.value) == NO_TOKEN
    assert "HF_TOKEN" in NO_TOKEN and "workspace" not in NO_TOKEN and "file" not in NO_TOKEN


def test_a_public_page_never_uses_the_servers_token(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with pytest.raises(HubError) as caught:
        publish(write_export(tmp_path / "hf"), "me/x", server_token=False)
    assert str(caught.value) == VISITOR_TOKEN


def test_offline_the_real_client_refuses_and_the_message_says_so(monkeypatch, tmp_path, caplog):
    no_saved_token(monkeypatch, tmp_path)
    caplog.set_level(logging.DEBUG)
    folder = write_export(tmp_path / "hf")
    with pytest.raises(HubError) as caught:
        publish(folder, "me/x", token=TOKEN)
    said = str(caught.value)
    assert said.startswith("me/x: cannot publish: offline mode is on (HF_HUB_OFFLINE=1)"), said
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # no chained request (its headers)
    assert TOKEN not in said and TOKEN not in caplog.text
    assert not files_holding(tmp_path, TOKEN)


def _refusal(status: int, headers: dict | None = None, body: str = "") -> Exception:
    """The error huggingface_hub's own hf_raise_for_status makes of the Hub's answer `status` to a
    create-repo request that carried the token."""
    request = httpx2.Request("POST", f"{constants.ENDPOINT}/api/repos/create",
                             headers={"authorization": f"Bearer {TOKEN}"})
    response = httpx2.Response(status, request=request, headers=headers or {}, text=body)
    try:
        hf_raise_for_status(response)
    except Exception as err:  # noqa: BLE001 -- whatever it raises is what publish meets
        return err
    raise AssertionError(f"hf_raise_for_status let {status} pass")


@pytest.mark.parametrize("status, headers, said", [
    (401, {}, "me/x: the Hub refused the token (401: invalid or expired); create a write token at "
              "huggingface.co/settings/tokens and publish again"),
    (403, {}, "me/x: the token may not write there (403); use a token with write access to me, or publish under "
              "your own name"),
    (409, {}, "me/x: the Hub reported a conflict (409): another upload to that repo is under way, or the name is "
              "taken by a dataset or Space; wait and publish again, or pick another name"),
    (404, {"X-Error-Code": "RepoNotFound"}, "me/x: the Hub shows this token no such repo (404); check the owner's "
                                            "name and that the token may write to it"),
])
def test_the_hubs_refusals_become_messages_that_say_what_to_do(status, headers, said):
    assert explain(_refusal(status, headers), "me/x", TOKEN).args[0] == said


def test_a_server_message_that_repeats_the_token_is_cut(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    err = _refusal(500, {"X-Error-Message": f"bad header Bearer {TOKEN}"})
    said = str(explain(err, "me/x", TOKEN))
    assert said.startswith("me/x: the Hub refused the upload (500: ") and TOKEN not in said and "***" in said
    assert TOKEN not in str(explain(RuntimeError(f"boom {TOKEN}\nmore"), "me/x", TOKEN))


def test_a_closed_port_is_a_connection_failure_said_plainly(tmp_path):
    """The real CLI with the Hub's address on a local port nobody listens on, offline mode off."""
    folder = write_export(tmp_path / "exports" / "hf")
    env = cli_env(tmp_path, HF_HUB_OFFLINE="0", HF_ENDPOINT=f"http://127.0.0.1:{free_port()}", HF_TOKEN=TOKEN)
    done = run_cli(["publish", str(folder), "me/minimind-x"], env)
    assert done.returncode == 2, done.stderr
    assert ("error: me/minimind-x: cannot publish: the connection to the Hugging Face Hub failed (ConnectError); "
            "check this machine's network (and HF_ENDPOINT if set), then publish again") in done.stderr
    assert "(private)" in done.stdout
    assert TOKEN not in done.stdout + done.stderr and not files_holding(tmp_path, TOKEN)


# ---- the CLI ------------------------------------------------------------------------------------

def test_export_push_to_hub_checks_what_it_can_before_exporting(monkeypatch, tmp_path, capsys):
    no_saved_token(monkeypatch, tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO())  # no terminal to ask at (also under pytest -s)
    model = make_shipped(tmp_path / "models") / "minimind-tang"
    out = tmp_path / "exports"
    base = ["export", "--model", str(model), "--out", str(out)]
    assert main([*base, "--format", "hf,llama", "--push-to-hub", "me/x"]) == 2
    assert "error: --push-to-hub publishes one export: pick one --format (got hf, llama)" in capsys.readouterr().err
    assert main([*base, "--format", "hf", "--push-to-hub", "me/x", "--no-verify"]) == 2
    assert "drop --no-verify" in capsys.readouterr().err
    assert main([*base, "--format", "hf", "--push-to-hub", "not a repo"]) == 2
    assert "'not a repo' is not a Hugging Face repo id" in capsys.readouterr().err
    assert main([*base, "--format", "hf", "--push-to-hub", "me/x"]) == 2  # no token, and stdin is no terminal
    assert capsys.readouterr().err.strip() == f"error: {NO_TOKEN}"
    assert main([*base, "--format", "hf", "--public"]) == 2
    assert "--public goes with --push-to-hub REPO" in capsys.readouterr().err
    assert not out.exists()  # nothing was exported


def test_export_push_to_hub_exports_verifies_then_publishes(tmp_path):
    """The real CLI: the export is written and verified, then published (offline here: the message,
    exit code 2); the token is in no output and no file."""
    model = make_shipped(tmp_path / "models") / "minimind-tang"
    out = tmp_path / "exports"
    done = run_cli(["export", "--model", str(model), "--format", "hf", "--out", str(out), "--push-to-hub",
                    "me/minimind-tiny"], cli_env(tmp_path, HF_TOKEN=TOKEN))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "  hf: ok" in done.stdout and f"publishing {out / 'hf'} to the Hugging Face Hub as me/minimind-tiny " \
                                       "(private)" in done.stdout
    assert "error: me/minimind-tiny: cannot publish: offline mode is on (HF_HUB_OFFLINE=1)" in done.stderr
    assert (out / "hf" / "README.md").is_file() and (out / "hf" / "model.safetensors").is_file()
    assert TOKEN not in done.stdout + done.stderr and not files_holding(tmp_path, TOKEN)


def test_publish_asks_at_a_terminal_and_keeps_the_typed_token_nowhere(tmp_path):
    """No HF_TOKEN, no saved login, a terminal: `minimind publish` asks (echo off) and uses what is typed."""
    folder = write_export(tmp_path / "exports" / "hf")
    master, terminal = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "minimind", "publish", str(folder), "me/x"], stdin=terminal,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(tmp_path), cwd=ROOT,
                            start_new_session=True)  # no controlling terminal: getpass reads the given one
    os.close(terminal)
    try:
        asked, deadline = b"", time.monotonic() + 240
        while b"not stored): " not in asked:
            assert proc.poll() is None and time.monotonic() < deadline, asked
            if select.select([proc.stderr], [], [], 1)[0]:
                asked += os.read(proc.stderr.fileno(), 4096)
        os.write(master, TOKEN.encode() + b"\n")
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    said = (asked + out + err).decode()
    assert proc.returncode == 2, said
    assert "error: me/x: cannot publish: offline mode is on (HF_HUB_OFFLINE=1)" in said  # it got past the token
    assert TOKEN not in said and not files_holding(tmp_path, TOKEN)


# ---- the page -----------------------------------------------------------------------------------

@pytest.fixture
def ctx(tmp_path):
    from webapp.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    write_export(ws.exports / EXPORT)
    write_export(ws.exports / "20261205-120000-tiny" / ".hf.partial")  # half written: not offered
    (ws.exports / "20261205-120000-tiny" / "tiny-hf.zip").write_bytes(b"PK")
    return AppContext(ws, JobManager(ws), shipped_dir=tmp_path / "checkpoints")


def test_the_section_offers_the_workspaces_exports_by_name_only(ctx, tmp_path):
    assert publish_tab.export_folders(ctx.workspace) == [EXPORT]
    assert publish_tab.export_folder(ctx.workspace, EXPORT) == (ctx.workspace.exports / EXPORT).resolve()
    (ctx.workspace.exports / "20261205-130000-link").mkdir()
    (ctx.workspace.exports / "20261205-130000-link" / "hf").symlink_to(write_export(tmp_path / "elsewhere"))
    for name in ("../runs/x", "/etc", "20261205-120000-tiny", "20261205-120000-tiny/hf/..", "a/b/c",
                 "20261205-120000-tiny/.hf.partial", "20261205-130000-link/hf"):
        with pytest.raises(gr.Error, match="no export named"):
            user_errors(publish_tab.run_publish)(ctx, name, "me/x", True, TOKEN)
    with pytest.raises(gr.Error, match="no export named") as caught:
        user_errors(publish_tab.run_publish)(ctx, "a" * 10_000, "me/x", True, TOKEN)
    assert len(caught.value.message) < 200
    with pytest.raises(gr.Error) as caught:
        user_errors(publish_tab.run_publish)(ctx, None, "me/x", True, TOKEN)
    assert caught.value.message == "choose an export to publish (export a model above first)"
    picked = publish_tab.just_written(ctx, "Exports written to `exports/20261205-120000-tiny`.")
    assert picked["value"] == EXPORT and picked["choices"] == [EXPORT]


def test_a_local_page_says_the_offline_message_and_keeps_no_token(monkeypatch, ctx, tmp_path, caplog, capfd):
    no_saved_token(monkeypatch, tmp_path)
    caplog.set_level(logging.DEBUG)
    handler = user_errors(publish_tab.run_publish)
    with pytest.raises(gr.Error) as caught:
        handler(ctx, EXPORT, "me/x", True, "")
    assert caught.value.message == NO_TOKEN
    with pytest.raises(gr.Error) as caught:
        handler(ctx, EXPORT, "me/x", True, f" {TOKEN} ")
    assert caught.value.message.startswith("me/x: cannot publish: offline mode is on")
    monkeypatch.setattr("webapp.context.language", lambda *a: "zh")
    with pytest.raises(gr.Error) as caught:
        handler(ctx, EXPORT, "me/x", True, TOKEN)
    assert caught.value.message.startswith("me/x：无法发布：离线模式已开启")
    out, err = capfd.readouterr()
    assert TOKEN not in out + err + caplog.text and not files_holding(tmp_path, TOKEN)


def test_the_served_public_page_asks_the_visitor_for_a_token(monkeypatch, tmp_path):
    """A public Space without a login: the server's HF_TOKEN is never used; the section's password
    field is the way, and its note says so. Called as the page calls it, through Gradio's API."""
    from webapp.app import build_app

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    shipped = tmp_path / "checkpoints"
    fake_model(shipped / "minimind-tang")
    write_export(tmp_path / "ws" / "exports" / EXPORT)
    app = build_app(tmp_path / "ws", shipped_dir=shipped, background_jobs=False, access=Access(public_space=True))
    with LiveServer(app, free_port()) as server:
        page = httpx.get(f"{server.url}/config", timeout=30).json()
        token_box = next(c for c in page["components"] if c.get("props", {}).get("elem_id") == "publish-token")
        assert token_box["props"]["type"] == "password" and not token_box["props"].get("value")
        assert '"key": "pub_token_info_public"' in token_box["props"]["info"]  # its note: only yours is used
        event, payload = gradio_call(server.url, "/publish", [EXPORT, "me/x", True, ""])
        assert event == "error" and VISITOR_TOKEN in str(payload), payload
        event, payload = gradio_call(server.url, "/publish", [EXPORT, "me/x", True, ""],
                                     headers={"Accept-Language": "zh-CN"})
        assert event == "error" and "这个公开页面从不用服务器的令牌发布" in str(payload), payload
        event, payload = gradio_call(server.url, "/publish", [EXPORT, "me/x", True, "hf_VisitorsOwnToken"])
        assert event == "error" and "offline mode is on" in str(payload), payload
    assert not files_holding(tmp_path / "ws", "hf_VisitorsOwnToken") and not files_holding(tmp_path / "ws", TOKEN)


# ---- the zh page --------------------------------------------------------------------------------

def publish_messages(tmp_path, monkeypatch) -> list[str]:
    """Each message publishing can show on the page, made by the code that raises it."""
    folder = write_export(tmp_path / "zh" / "hf")
    said = []
    for call in (lambda: publish(folder, "", token=TOKEN), lambda: publish(folder, "a b", token=TOKEN),
                 lambda: publish(tmp_path / "zh", "me/x", token=TOKEN, label="zh"),
                 lambda: publish(tmp_path / "none", "me/x", token=TOKEN, label="none"),
                 lambda: publish(folder, "me/x", token=TOKEN), lambda: publish(folder, "me/x", server_token=False),
                 lambda: publish_tab.export_folder(None, None), lambda: publish_tab.export_folder(None, "x")):
        try:
            call()
        except Exception as err:  # noqa: BLE001 -- HubError or WorkspaceError
            said.append(str(err))
    said.append(NO_TOKEN)
    said += [str(explain(_refusal(status, headers), "me/x", TOKEN)) for status, headers in
             ((401, {}), (403, {}), (409, {}), (404, {"X-Error-Code": "RepoNotFound"}))]
    said.append(str(explain(_refusal(403), "x", TOKEN)))
    said.append(str(explain(httpx2.ConnectError("refused"), "me/x", TOKEN)))
    said.append(str(public_repo("me/x")))
    return said


def test_every_publishing_message_is_said_in_chinese(tmp_path, monkeypatch):
    messages = publish_messages(tmp_path, monkeypatch)
    assert len(messages) == 16
    untold = [m for m in messages if ERRORS.say(m) is None]
    assert not untold, "\n".join(untold)
    for message in messages:
        said = error_zh(message)
        assert not said.startswith(LEAD) and re.search(r"[\u4e00-\u9fff]", said), (message, said)
        assert not ENGLISH_RUN.findall(NAMES.sub(" ", said)), (message, said)

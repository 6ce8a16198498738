"""The web app through gradio_client against a live server on 127.0.0.1: every tab's handlers,
a real LoRA run, chat with its result, an export download, and the bad-input paths."""

import json
import re
import os
import signal
from pathlib import Path

import httpx
import pytest
from gradio_client import Client, handle_file

from minimind.training import RunDir
from webapp.app import build_app
from webapp.jobs import JobManager
from webapp.workspace import Workspace, WorkspaceError, safe_name
from helpers import ROOT
from webapp_helpers import LiveServer, free_port, make_shipped, train_through_the_page, wait_for

SAMPLE_CHAT = "Tang poem requests (314 chats, JSONL)"


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    root = tmp_path_factory.mktemp("studio")
    shipped = make_shipped(root / "checkpoints")
    app = build_app(root / "workspace", upload_limit_mb=1, shipped_dir=shipped)
    with LiveServer(app, free_port()) as server:
        client = Client(server.url, verbose=False)
        yield server, client, root / "workspace", shipped / "minimind-tang"


def _watch(client, run_id):
    return client.predict(run_id, api_name="/watch_run")


def test_corpus_tab_inspects_a_sample_and_saves_it(studio):
    _, client, ws, _ = studio
    summary, hist, samples, problems = client.predict(
        [], SAMPLE_CHAT, "auto", "", "paragraph", False, api_name="/inspect_corpus")
    assert "**Kind:** chat" in summary and "**Documents:** 314" in summary
    assert "Chars/token" in summary  # counted with the shipped tokenizer
    assert problems == "No problems found."
    # the histogram comes as a plot update: its rows, and the bars' order (length order, not as text)
    assert hist["value"]["data"] and hist["sort"] == [row[0] for row in hist["value"]["data"]] and samples["data"]
    # the inspected files wait in this session; saving copies them into corpora/<name>/
    message, table = client.predict("tang-chat", "auto", "", "paragraph", False, False, 6400,
                                    api_name="/save_corpus")
    assert "Saved corpus **tang-chat**" in message
    meta = json.loads((ws / "corpora" / "tang-chat" / "corpus.json").read_text())
    assert meta["files"] == ["tang_chat_sample.jsonl"] and meta["summary"]["documents"] == 314
    assert list((ws / "uploads").glob("*/tang_chat_sample.jsonl"))


def test_corpus_errors_show_file_and_line_not_a_traceback(studio, tmp_path):
    _, client, _, _ = studio
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": broken\n', encoding="utf-8")
    summary, _, _, problems = client.predict([handle_file(str(bad))], None, "auto", "", "paragraph", True,
                                             api_name="/inspect_corpus")
    assert "cannot be used" in summary
    assert "bad.jsonl" in problems and "line 2" in problems and "Traceback" not in problems
    exe = tmp_path / "tool.exe"
    exe.write_bytes(b"MZ\x00\x00")
    with pytest.raises(Exception, match="Invalid file type|not accepted"):
        client.predict([handle_file(str(exe))], None, "auto", "", "paragraph", True, api_name="/inspect_corpus")
    big = tmp_path / "big.txt"
    big.write_text("x" * (2 * 1024 * 1024), encoding="utf-8")
    # over the 1 MB limit of this server: the client reads the limit from the server's config and
    # refuses before sending a byte (the server's own 413 for a client that ignores it: test_security)
    with pytest.raises(ValueError, match=r"big\.txt exceeds the maximum file size of 1048576 bytes"):
        client.predict([handle_file(str(big))], None, "auto", "", "paragraph", True, api_name="/inspect_corpus")


def test_lora_run_then_chat_with_it_then_export_and_download(studio):
    server, client, ws, shipped = studio
    if not (ws / "corpora" / "tang-chat").is_dir():
        test_corpus_tab_inspects_a_sample_and_saves_it(studio)
    inputs = ["shipped:minimind-tang", "lora", "tang-chat", 3, 4, 64, 1e-3, 1, "auto", 4, 8, 0]
    estimate = client.predict(*inputs, api_name="/estimate")
    assert "parameters" in estimate and "tokens per epoch" in estimate and "steps" in estimate
    run_id, status = train_through_the_page(client, inputs, ws / "runs", what="the LoRA run")
    progress, facts, curve, log, runs, queue, _ = _watch(client, run_id)
    assert "step 3/3" in progress and "finished" in facts
    assert curve["data"] and "train" in json.dumps(curve["data"])
    adapter = Path(status["final_checkpoint"])
    assert (adapter / "adapter_config.json").is_file()

    # chat with base + adapter (a finished run's model, named by its run id), streaming through the handler
    controls = [f"run:{run_id}", "shipped:minimind-tang", False, "你是詩人", 0.0, 0.9, 0, 12, 1.0]
    _, history, _ = client.predict("寫一首詩", [], [], *controls, api_name="/chat")
    assert history[-1]["role"] == "assistant" and history[-1]["content"]
    # side by side: the same message to base and fine-tuned model
    side = ["shipped:minimind-tang", f"run:{run_id}", True] + controls[3:]
    _, a, b = client.predict("續寫：床前明月光", [], [], *side, api_name="/chat")
    assert a[-1]["role"] == b[-1]["role"] == "assistant"
    # a model that is not offered is refused, and so is a folder named by its path
    for value in ("/etc", str(shipped), "run:../../etc"):
        with pytest.raises(Exception, match="not one of"):
            client.predict("hi", [], [], value, *controls[1:], api_name="/chat")

    # the API lists the finished run next to the shipped model
    names = [m["id"] for m in httpx.get(f"{server.url}/v1/models").json()["data"]]
    wait_for(lambda: f"run-{run_id}" in [m["id"] for m in httpx.get(f"{server.url}/v1/models").json()["data"]],
             timeout=90, what="the run in /v1/models")
    assert "minimind-tang" in names

    table, files, message = client.predict(f"run:{run_id}", ["merged", "gguf-f16"], None, api_name="/export")
    rows = {r[0]: r for r in table["data"]}
    assert set(rows) == {"merged", "gguf-f16"} and all(r[-1] == "verified" for r in rows.values())
    links = re.findall(r'href="([^"]+)"', files)  # served by /downloads, named by export folder and file
    assert {Path(link).suffix for link in links} == {".gguf", ".zip"} and str(ws) not in files
    for link in links:
        got = httpx.get(f"{server.url}{link}", timeout=60)
        assert got.status_code == 200 and got.content[:4] == (b"GGUF" if link.endswith(".gguf") else b"PK\x03\x04")
    for bad in ("/downloads/../runs", "/downloads/x/../../corpora", "/downloads/" + str(shipped).lstrip("/")):
        assert httpx.get(f"{server.url}{bad}").status_code == 404


def test_one_job_per_device_others_queue_and_a_crash_shows_failed(tmp_path):
    ws = Workspace(tmp_path / "ws")
    jobs = JobManager(ws)
    corpus = ROOT / "samples" / "shakespeare_sample.txt"
    from minimind.training import TrainConfig

    def config(steps):
        return TrainConfig.from_dict({"mode": "pretrain", "max_steps": steps, "batch_size": 2,
                                      "model": {"preset": "nano", "vocab_size": 300,
                                                "overrides": {"hidden_size": 64, "num_hidden_layers": 2,
                                                              "intermediate_size": 128}},
                                      "data": {"files": [str(corpus)], "seq_len": 32}, "precision": "fp32"})

    first = jobs.submit(config(100000))
    second = jobs.submit(config(2))
    assert RunDir(ws.runs / first).read_status()["state"] == "running"
    assert RunDir(ws.runs / second).read_status()["state"] == "queued" and jobs.queue() == [second]
    assert jobs.pump() is None  # still busy: a second click cannot start a second job
    pid = RunDir(ws.runs / first).read_status()["pid"]
    wait_for(lambda: (ws.runs / first / "checkpoints").is_dir() and RunDir(ws.runs / first).read_metrics(),
             timeout=300, what="the first run to train")
    os.kill(pid, signal.SIGKILL)  # a crash the child cannot report
    wait_for(lambda: (jobs.pump() or True) and RunDir(ws.runs / first).read_status()["state"] == "failed",
             timeout=60, what="the crash to be noticed")
    assert "ended unexpectedly" in RunDir(ws.runs / first).read_status()["error"]
    wait_for(lambda: (jobs.pump() or True) and RunDir(ws.runs / second).read_status()["state"] == "finished",
             timeout=300, what="the queued run to start and finish")


def test_names_and_paths_stay_inside_the_workspace(tmp_path):
    ws = Workspace(tmp_path / "ws")
    assert safe_name("../../etc/passwd") == "passwd"
    assert safe_name("..\\..\\boot.ini") == "boot.ini"
    with pytest.raises(WorkspaceError):
        safe_name("../..")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.inside("../elsewhere")
    evil = tmp_path / "x.jsonl"
    evil.write_text('{"text": "a"}\n')
    stored = ws.store_upload(evil, "../../../evil.jsonl")
    assert stored.name == "evil.jsonl" and ws.root in stored.resolve().parents
    long_name = ws.store_upload(evil, "诗" * 150 + "-" + "a" * 150 + ".jsonl")  # 300+ characters
    assert long_name.suffix == ".jsonl" and len(long_name.name) == 80
    assert safe_name("😀.txt") == "file.txt" and safe_name("唐诗 三百首.jsonl") == "唐诗_三百首.jsonl"  # the type is kept
    # many files at once: one folder, names that cannot collide, however fast they come
    stored = ws.store_uploads([(evil, f"poem{i % 7}.jsonl") for i in range(300)])
    assert len({p for p in stored}) == 300 and len({p.parent for p in stored}) == 1
    assert {p.name for p in stored} >= {"poem0.jsonl", "poem0-2.jsonl", "poem6-42.jsonl"}
    assert len({ws.store_upload(evil).parent for _ in range(50)}) == 50
    # downloads: a file an export wrote, named relative to exports/, and nothing else
    export = ws.new_export_dir("minimind-tang")
    assert ws.new_export_dir("minimind-tang") != export  # the same second, another folder
    (export / "model.zip").write_bytes(b"PK")
    (export / "gguf").mkdir()
    (export / "gguf" / "model.gguf").write_bytes(b"GGUF")
    assert ws.export_file(f"{export.name}/model.zip") == export / "model.zip"
    assert ws.export_file(f"{export.name}/gguf/model.gguf").read_bytes() == b"GGUF"
    (export / "link.zip").symlink_to(tmp_path / "x.jsonl")
    for bad in ("../runs/x", f"{export.name}/../../corpora", f"{export.name}/gguf", f"{export.name}/link.zip",
                f"{export.name}/missing.zip", "/etc/passwd", f"{export.name}//model.zip", "a/b/c/d"):
        with pytest.raises(WorkspaceError, match="^no such download$"):
            ws.export_file(bad)


def test_restarted_app_reattaches_to_a_running_job(tmp_path):
    from minimind.training import TrainConfig

    ws = Workspace(tmp_path / "ws")
    first_app_jobs = JobManager(ws)
    config = TrainConfig.from_dict({"mode": "pretrain", "max_steps": 100000, "batch_size": 2, "precision": "fp32",
                                    "model": {"preset": "nano", "vocab_size": 300,
                                              "overrides": {"hidden_size": 64, "num_hidden_layers": 2,
                                                            "intermediate_size": 128}},
                                    "data": {"files": [str(ROOT / "samples" / "shakespeare_sample.txt")],
                                             "seq_len": 32}})
    run_id = first_app_jobs.submit(config)
    run = RunDir(ws.runs / run_id)
    wait_for(lambda: run.read_metrics(), timeout=300, what="the run to train")
    # a new app process (new JobManager, no child handles) finds the job by its run folder
    restarted = JobManager(Workspace(tmp_path / "ws"))
    restarted.refresh()
    assert restarted.active() is not None and restarted.active().path.name == run_id
    assert restarted.pump() is None  # the device is taken: nothing else starts
    assert "saving a checkpoint and stopping" in restarted.stop(run_id)
    wait_for(lambda: run.read_status().get("state") == "stopped", timeout=120, what="the run to stop")
    assert list(run.checkpoints.glob("step-*"))
    assert "queued to resume" in restarted.resume(run_id)
    wait_for(lambda: run.read_status().get("state") == "running" and run.read_status().get("pid"), timeout=60,
             what="the resumed run")
    restarted.stop(run_id)  # even before the child has installed its handler, a stop ends as "stopped"
    wait_for(lambda: (restarted.refresh() or True) and run.read_status().get("state") == "stopped", timeout=120,
             what="the resumed run to stop")


def test_login_is_required_when_auth_is_set(tmp_path):
    shipped = make_shipped(tmp_path / "checkpoints")
    app = build_app(tmp_path / "ws", shipped_dir=shipped, auth=("ada", "lovelace"), background_jobs=False)
    with LiveServer(app, free_port()) as server:
        anonymous = httpx.get(f"{server.url}/config")
        assert anonymous.status_code in (401, 403) or "login" in anonymous.text.lower()
        with httpx.Client(base_url=server.url) as session:
            bad = session.post("/login", data={"username": "ada", "password": "wrong"})
            assert bad.status_code >= 400
            good = session.post("/login", data={"username": "ada", "password": "lovelace"})
            assert good.status_code == 200
            assert session.get("/config").status_code == 200


def test_the_page_queue_looks_for_work_every_10_ms_not_every_1_ms(tmp_path):
    """Gradio's queue polls an empty queue every 1 ms and pending progress every 10 ms, which kept
    an idle server at 0.067 of a core (benchmarks/NOTES.md, "page_cpu"). The served app's queue
    has the calmer intervals; were Gradio to rename the attributes, this fails rather than the
    setting silently doing nothing. An event still runs through the queue."""
    from webapp import app as webapp_app

    app = build_app(tmp_path / "ws", shipped_dir=make_shipped(tmp_path / "checkpoints"), background_jobs=False)
    queue = webapp_app._mounted_gradio(app).get_blocks()._queue
    assert queue.sleep_when_free == webapp_app.QUEUE_LOOK_S == 0.01
    assert queue.progress_update_sleep_when_free == webapp_app.QUEUE_PROGRESS_S == 0.05
    with LiveServer(app, free_port()) as server:
        runs = Client(server.url, verbose=False).predict(api_name="/watch_run")
        assert "Queue" in runs[5]

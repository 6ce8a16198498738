"""`python -m minimind chat` and `python -m minimind serve`: the terminal faces of generation."""

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import torch

from minimind import MiniMindForCausalLM
from minimind.cli import build_parser, main
from minimind.commands import chat as chat_command
from minimind.commands.serve import parse_adapters
from minimind.errors import ConfigError
from minimind.generation import chat
from minimind.sampling_params import SamplingParams
from minimind.tokenizer import save_tokenizer

from helpers import free_port, tiny_config

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer):
    folder = tmp_path_factory.mktemp("chat-model")
    torch.manual_seed(0)
    MiniMindForCausalLM(tiny_config()).save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    return folder


def _run_chat(model_dir, lines, *extra):
    args = build_parser().parse_args(["chat", "--model", str(model_dir), "--temperature", "1", "--seed", "3",
                                      "--max-new-tokens", "8", *extra])
    out = io.StringIO()
    code = chat_command.run(args, stdin=io.StringIO("".join(line + "\n" for line in lines)), stdout=out)
    return code, out.getvalue()


def test_chat_streams_keeps_history_and_handles_commands(model_dir, tokenizer):
    code, out = _run_chat(model_dir, ["床前明月光", "/params temperature=0.5 top_k=40", "/params top_k=many",
                                      "/params", "/system Answer in verse.", "/reset", "/bogus", "/quit",
                                      "never read"])
    assert code == 0
    model = chat_command.load(str(model_dir), None)[0]
    expected = chat(model, tokenizer, [{"role": "user", "content": "床前明月光"}],
                    SamplingParams(temperature=1.0, seed=3, max_new_tokens=8)).read()
    assert len(expected) > 2
    assert out.split("\n", 1)[1].startswith(expected + "\n")
    assert "temperature=0.5" in out and "top_k=40" in out
    assert "not changed: top_k must be a whole number" in out
    assert "(system message set; conversation cleared)" in out
    assert "(conversation cleared)" in out
    assert "unknown command /bogus" in out
    assert "never read" not in out


def test_chat_session_history_and_system_message(model_dir, tokenizer):
    model, tok = chat_command.load(str(model_dir), None)
    session = chat_command.ChatSession(model, tok, SamplingParams(temperature=0, max_new_tokens=6), "Be brief.")
    session.answer("first", io.StringIO())
    session.answer("second", io.StringIO())
    roles = [m["role"] for m in session.messages("third")]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert session.messages("third")[0]["content"] == "Be brief."
    session.command("/reset")
    assert session.messages("x") == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "x"}]


def test_chat_session_answers_by_beam_search_when_asked_in_the_chat(model_dir, tokenizer):
    """`/params temperature=0 num_beams=3` is the terminal's way to beam search (inference/beams.py)."""
    model, tok = chat_command.load(str(model_dir), None)
    session = chat_command.ChatSession(model, tok, SamplingParams(temperature=1.0, seed=3, max_new_tokens=8))
    assert "num_beams=3" in session.command("/params temperature=0 num_beams=3") and session.params.num_beams == 3
    out = io.StringIO()
    session.answer("床前明月光", out)
    messages = [{"role": "user", "content": "床前明月光"}]
    beams = chat(model, tokenizer, messages, SamplingParams(temperature=0, num_beams=3, max_new_tokens=8)).read()
    assert out.getvalue().startswith(beams + "\n") and session.history[-1]["content"] == beams
    assert "not changed: num_beams > 1 is beam search" in session.command("/params temperature=0.7")


def test_chat_tells_when_old_turns_are_dropped(model_dir):
    model, tok = chat_command.load(str(model_dir), None)
    session = chat_command.ChatSession(model, tok, SamplingParams(temperature=0, max_new_tokens=100))
    out = io.StringIO()
    for i in range(6):
        session.answer(f"turn {i} " + "床前明月光，疑是地上霜。" * 3, out)
    assert "oldest turn(s) dropped to fit the context" in out.getvalue()
    assert session.history[0]["role"] == "user" and not session.history[0]["content"].startswith("turn 0 ")


def test_chat_end_of_input_quits(model_dir):
    code, out = _run_chat(model_dir, [])
    assert code == 0 and out.startswith("chatting with")


@pytest.mark.parametrize("command", ["chat", "serve"])
def test_missing_model_folder_is_a_clear_error(tmp_path, capsys, command):
    assert main([command, "--model", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "no such model folder" in err and "--model" in err


def test_adapter_arguments():
    assert parse_adapters(["poems=runs/a", "b=/x/y"]) == {"poems": "runs/a", "b": "/x/y"}
    with pytest.raises(ConfigError, match="NAME=DIR"):
        parse_adapters(["runs/a"])


def test_serve_command_runs_an_api_with_a_key(model_dir):
    port = free_port()
    env = {**os.environ, "MINIMIND_API_KEY": "k3y", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "minimind", "serve", "--model", str(model_dir), "--name", "tiny",
                             "--port", str(port), "--threads", "1"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/v1"
        deadline = time.time() + 90
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                r = httpx.get(url + "/models", headers={"Authorization": "Bearer k3y"}, timeout=5)
                break
            except httpx.TransportError:
                assert time.time() < deadline, "serve did not come up"
                time.sleep(0.2)
        assert [m["id"] for m in r.json()["data"]] == ["tiny"]
        assert httpx.get(url + "/models", timeout=5).status_code == 401
        r = httpx.post(url + "/chat/completions", headers={"Authorization": "Bearer k3y"}, timeout=30,
                       json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 4
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_chat_with_an_adapter_merges_it(model_dir, tmp_path, tokenizer):
    from peft import LoraConfig, get_peft_model

    from minimind.inference import Engine

    base, _ = chat_command.load(str(model_dir), None)
    torch.manual_seed(2)
    get_peft_model(MiniMindForCausalLM(tiny_config()), LoraConfig(
        r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)).save_pretrained(tmp_path)
    tuned, _ = chat_command.load(str(model_dir), str(tmp_path))
    assert type(tuned) is MiniMindForCausalLM and Engine(tuned).weights is not None
    params = SamplingParams(temperature=0, max_new_tokens=10)
    q = [{"role": "user", "content": "To be"}]
    assert chat(tuned, tokenizer, q, params).read() != chat(base, tokenizer, q, params).read()

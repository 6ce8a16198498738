"""Stop, kill and resume: an interrupted run continues exactly where it was."""

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import ROOT
from safetensors.torch import load_file
from training_helpers import (
    assert_same_losses,
    interrupted_run,
    losses,
    make_config,
    write_text_corpus,
)

from minimind.training import RunDir, train


def test_stopped_and_resumed_run_matches_an_uninterrupted_one(tmp_path, tokenizer_dir):
    corpus = write_text_corpus(tmp_path)
    build = lambda where: make_config(where, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=12,
                                      optim__warmup_steps=3, optim__ema_from=4)

    def saved_at_5(stopped):
        assert stopped["state"] == "stopped" and stopped["step"] == 5
        assert (tmp_path / "b" / "run" / "checkpoints" / "step-5").is_dir()

    _, resumed = interrupted_run(build, tmp_path, stop_at=5, after_stop=saved_at_5)
    assert resumed["state"] == "finished" and resumed["step"] == 12
    assert_same_losses(tmp_path / "a" / "run", tmp_path / "b" / "run", range(1, 13))
    # the saved model, from step 4 the weight average a new model's run keeps (optim.ema), went on across the stop
    whole, split = (load_file(str(tmp_path / x / "run" / "checkpoints" / "step-12" / "model.safetensors"))
                    for x in "ab")
    assert whole.keys() == split.keys()
    assert max((whole[k] - split[k]).abs().max().item() for k in whole) < 1e-5


KILLABLE = """
import sys, time
sys.path.insert(0, {tests!r})
import minimind.training.checkpoint as ckpt
from minimind.training import TrainConfig, train

real_save_file = ckpt.save_file
def slow_save_file(*args, **kwargs):  # widen the window in which a save is half written
    time.sleep(3)
    return real_save_file(*args, **kwargs)
ckpt.save_file = slow_save_file
train(TrainConfig.load({config!r}))
"""


def test_kill_9_during_a_save_leaves_a_resumable_run(tmp_path, tokenizer_dir):
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=8, save_every=2,
                      keep_checkpoints=3)
    run = RunDir(tmp_path / "run")
    run.path.mkdir(parents=True)
    cfg.save(tmp_path / "cfg.yaml")
    script = KILLABLE.format(tests=str(ROOT / "tests"), config=str(tmp_path / "cfg.yaml"))
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.time() + 240
        # wait until step-2 is complete and the save of step-4 is half written
        while not ((run.checkpoints / "step-2").is_dir() and (run.checkpoints / ".tmp-step-4").is_dir()):
            assert proc.poll() is None, "training ended before it could be killed"
            assert time.time() < deadline, "no save in progress was seen"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (run.checkpoints / "step-4").exists()
    assert run.read_status()["state"] == "running"  # a killed process cannot say otherwise

    status = train(cfg, resume=True)
    assert status["state"] == "finished" and status["step"] == 8
    assert "resumed from step-2" in run.log_file.read_text()
    assert not any(p.name.startswith(".tmp") for p in run.checkpoints.iterdir())
    assert sorted(losses(run.path)) == list(range(1, 9))


def test_resume_without_a_run_folder_is_a_clear_error(tmp_path, tokenizer_dir):
    from minimind.errors import TrainingError

    cfg = make_config(tmp_path, [write_text_corpus(tmp_path)], model__tokenizer=str(tokenizer_dir))
    with pytest.raises(TrainingError, match="nothing to resume"):
        train(cfg, resume=True)

"""The run folder's promises under kill -9, a resume from nothing and a folder that cannot be written:
a step-N folder is always complete, metrics never repeat a step, and failures are one clear line."""

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from minimind.errors import TrainingError
from minimind.training import RunDir, train
from minimind.training.checkpoint import checkpoint_dirs, load_trainer_state, remove_partial, save_checkpoint
from helpers import ROOT
from training_helpers import make_config, write_text_corpus

EXTRA_FILES = 200  # per checkpoint: deleting a folder takes long enough for a kill to land inside it

def _rotate(root, step: int, saved) -> None:
    """Save checkpoints forever (keep=2), each step twice: the second save replaces the first,
    as when a run stops right after a periodic save. Runs in a forked child that gets killed."""
    from safetensors.torch import save_file

    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(8, 8))])

    def write_model(folder):
        save_file({"w": torch.full((64, 64), float(step))}, folder / "model.safetensors")
        extra = folder / "extra"
        extra.mkdir()
        for i in range(EXTRA_FILES):
            (extra / f"{i:04d}.json").write_text("{}")

    while True:
        for _ in range(2):
            save_checkpoint(root, step, write_model, optimizer.state_dict(), {"note": "rotation"}, keep=2)
            saved.set()
        step += 1


def _complete(folder) -> None:
    """Everything a step-N folder must hold, loaded."""
    state, _ = load_trainer_state(folder)
    step = int(folder.name.split("-")[1])
    assert state["step"] == step, folder
    assert load_file(str(folder / "model.safetensors"))["w"][0, 0].item() == step
    assert len(list((folder / "extra").iterdir())) == EXTRA_FILES, f"{folder.name} is half deleted"


def test_kill_9_during_checkpoint_rotation_never_leaves_a_broken_step_folder(tmp_path):
    root = tmp_path / "checkpoints"
    fork = multiprocessing.get_context("fork")  # a child with everything imported starts in milliseconds
    rng = random.Random(0)
    step = 1
    for _ in range(40):
        saved = fork.Event()
        child = fork.Process(target=_rotate, args=(root, step, saved), daemon=True)
        child.start()
        try:
            assert saved.wait(timeout=60), "the child saved nothing"
            time.sleep(rng.uniform(0.0, 0.4))  # anywhere in the next few saves and rotations
            os.kill(child.pid, signal.SIGKILL)
            child.join(timeout=30)
        finally:
            if child.is_alive():
                child.kill()
        for folder in checkpoint_dirs(root):
            _complete(folder)
        remove_partial(root)  # what a resume does first
        assert all(p.name.startswith("step-") for p in root.iterdir())
        for folder in checkpoint_dirs(root):
            _complete(folder)
        step = int(checkpoint_dirs(root)[-1].name.split("-")[1]) + 1


def test_a_replaced_checkpoint_whose_successor_never_arrived_is_put_back(tmp_path):
    """A kill between 'old copy renamed away' and 'new copy renamed in' loses no checkpoint."""
    root = tmp_path / "checkpoints"

    def write_model(folder):
        (folder / "model.txt").write_text("weights")

    save_checkpoint(root, 4, write_model, {"state": {}, "param_groups": []}, {}, keep=2)
    (root / "step-4").rename(root / ".replaced-step-4")
    (root / ".tmp-step-4").mkdir()  # the new copy, not yet renamed
    remove_partial(root)
    assert [p.name for p in root.iterdir()] == ["step-4"]
    assert load_trainer_state(root / "step-4")[0]["step"] == 4


def test_resume_with_no_checkpoint_starts_a_clean_metrics_file(tmp_path, tokenizer_dir):
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=4)
    run = RunDir(tmp_path / "run").create()
    cfg.save(run.config_file)
    for step in (1, 2, 3):  # an earlier attempt that logged steps, then died before its first save
        run.append_metrics({"step": step, "loss": 9.0})
    status = train(cfg, resume=True)
    assert status["state"] == "finished"
    steps = [r["step"] for r in run.read_metrics() if "loss" in r]
    assert steps == [1, 2, 3, 4] and all(r["loss"] != 9.0 for r in run.read_metrics() if "loss" in r)
    assert "no complete checkpoint yet" in run.log_file.read_text()


def test_an_unwritable_run_folder_is_a_one_line_error_and_a_failed_run(tmp_path, tokenizer_dir):
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=2)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "checkpoints").write_text("not a folder")  # cannot hold checkpoints (root ignores chmod)
    cfg.save(tmp_path / "cfg.yaml")
    done = subprocess.run([sys.executable, "-m", "minimind", "train", "--config", str(tmp_path / "cfg.yaml"),
                           "--run-dir", str(run_dir), "--no-progress"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot write into the run folder run")
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "failed" and "cannot write" in status["error"]


def test_a_checkpoint_that_cannot_be_written_is_a_training_error(tmp_path):
    blocker = tmp_path / "checkpoints"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(TrainingError, match=r"cannot write checkpoint step-3 into .*checkpoints .*resume"):
        save_checkpoint(blocker, 3, lambda folder: None, {"state": {}, "param_groups": []}, {}, keep=2)
    with pytest.raises(TrainingError) as err:
        save_checkpoint(blocker, 3, lambda folder: None, {"state": {}, "param_groups": []}, {}, keep=2)
    assert str(tmp_path) not in str(err.value)  # names the run's folders, not the server's path

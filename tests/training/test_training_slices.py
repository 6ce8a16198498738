"""Training in GPU slices (ZeroGPU): each slice is one call through a stand-in that runs it the way
ZeroGPU does (a forked worker, pickled arguments, killed when it overruns); a sliced run is the same
run as an uninterrupted one, an overrun slice costs only the steps since the last save, and a slice
too short for one step says so."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT
from safetensors.torch import load_file
from training_helpers import (
    assert_same_losses,
    losses,
    make_config,
    save_base_model,
    write_chat_corpus,
    write_text_corpus,
)
from zerogpu_standin import StandInGpu

from minimind.errors import MiniMindError, TrainingError
from minimind.training import RunDir, train
from minimind.training import loop as training_loop
from minimind.training.checkpoint import latest_checkpoint
from minimind.training.slices import spaces_gpu, train_in_slices

STEPS = 300
# the shortest stand-in slice: a slice's fork, load and save take a fixed ~0.4 s that a loaded
# machine can stretch, and at 2 s one slice in ~50 overran in CI (the others used 1.6 s of 2.0)
MIN_SLICE_S = 3.0


def timed_train(cfg) -> float:
    """Seconds an uninterrupted run takes here: the slices are sized from it (a slower machine, slower slices)."""
    started = time.perf_counter()
    train(cfg)
    return time.perf_counter() - started


def in_slices(cfg, slice_s: float, gpu, **kwargs) -> dict:
    run = RunDir(Path(cfg.run_dir)).create()
    cfg.save(run.config_file)
    return train_in_slices(run.path, slice_s, gpu=gpu, **kwargs)


def same_weights(run_a: Path, run_b: Path) -> None:
    a, b = latest_checkpoint(run_a / "checkpoints"), latest_checkpoint(run_b / "checkpoints")
    assert a.name == b.name
    files = sorted(p.name for p in a.glob("*.safetensors"))
    assert files and files == sorted(p.name for p in b.glob("*.safetensors"))
    for name in files:
        left, right = load_file(a / name), load_file(b / name)
        assert left.keys() == right.keys()
        for key in left:
            assert (left[key] == right[key]).all(), key


@pytest.fixture
def lora_build(tmp_path, tokenizer):
    base = save_base_model(tmp_path / "base", tokenizer)
    chat = write_chat_corpus(tmp_path)
    return lambda where: make_config(where, [chat], mode="lora", model__init_from=str(base), data__seq_len=96,
                                     max_steps=STEPS, lora__rank=4, save_every=1000,
                                     compile="off")


def test_a_lora_run_in_slices_is_the_uninterrupted_run(tmp_path, lora_build):
    slice_s = max(MIN_SLICE_S, timed_train(lora_build(tmp_path / "a")) / 2.5)
    gpu = StandInGpu()
    status = in_slices(lora_build(tmp_path / "b"), slice_s, gpu)
    assert status["state"] == "finished" and status["step"] == STEPS
    assert len(gpu.calls) >= 2 and all(c["outcome"] == "ok" and c["seconds"] < slice_s for c in gpu.calls)
    assert_same_losses(tmp_path / "a" / "run", tmp_path / "b" / "run", range(1, STEPS + 1))
    same_weights(tmp_path / "a" / "run", tmp_path / "b" / "run")
    log = (tmp_path / "b" / "run" / "train.log").read_text()
    assert "GPU slice spent at step" in log and "resumed from step-" in log
    assert f"finished: {STEPS} steps in " in log and "of wall time in all" in log  # not one slice's wall time
    in_calls = sum(c["seconds"] for c in gpu.calls)  # the run's wall time is its slices' (less each one's start)
    assert 0.5 * in_calls <= status["wall_s"] <= in_calls, (status["wall_s"], gpu.calls)


def test_a_pretraining_run_in_slices_is_the_uninterrupted_run(tmp_path, tokenizer_dir):
    corpus = write_text_corpus(tmp_path)
    build = lambda where: make_config(where, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=STEPS,
                                      optim__warmup_steps=3, compile="off")
    slice_s = max(MIN_SLICE_S, timed_train(build(tmp_path / "a")) / 2.5)
    gpu = StandInGpu()
    status = in_slices(build(tmp_path / "b"), slice_s, gpu)
    assert status["state"] == "finished" and len(gpu.calls) >= 2
    assert_same_losses(tmp_path / "a" / "run", tmp_path / "b" / "run", range(1, STEPS + 1))
    same_weights(tmp_path / "a" / "run", tmp_path / "b" / "run")


def test_an_overrunning_slice_is_aborted_and_the_next_resumes_from_the_last_save(tmp_path, lora_build, monkeypatch):
    """The first slice never stops by itself (as if its step times lied): the platform kills it at its
    duration; its steps after the last save are lost, the next slices redo them, and the run is the same."""
    marker = tmp_path / "first-slice-seen"
    real = training_loop.slice_spent

    def first_slice_overruns(*args):
        if not marker.exists():
            return False
        return real(*args)

    monkeypatch.setattr(training_loop, "slice_spent", first_slice_overruns)
    slice_s = max(MIN_SLICE_S, timed_train(lora_build(tmp_path / "a")) / 2.5)
    gpu = StandInGpu()
    slices = []

    def on_slice(index, status):
        if status is not None:
            slices.append(status["state"])
            marker.touch()

    cfg = lora_build(tmp_path / "b")
    cfg.save_every = 20  # something to resume from
    status = in_slices(cfg, slice_s, gpu, on_slice=on_slice)
    assert slices[0] == "aborted" and gpu.calls[0]["outcome"] == "aborted" and status["state"] == "finished", (
        slices, gpu.calls, slice_s)
    assert_same_losses(tmp_path / "a" / "run", tmp_path / "b" / "run", range(1, STEPS + 1))
    assert "GPU slice 1 was aborted (Error: GPU task aborted)" in (tmp_path / "b" / "run" / "train.log").read_text()
    assert sorted(losses(tmp_path / "b" / "run")) == list(range(1, STEPS + 1))  # the lost steps' lines are gone


def test_a_slice_plans_its_next_step_as_slow_as_the_slowest_recent_one(tmp_path, lora_build, monkeypatch):
    """On a shared machine one step can take many times the one before it: a slice that planned with the
    last step alone would start a step it cannot finish. One slow step counts for the next few decisions."""
    slow, planned = 5.0, []
    real_spent, real_update = training_loop.slice_spent, training_loop._update
    updates = iter(range(10**6))

    def spent(now, deadline, step_s, *rest):
        planned.append(step_s)
        return real_spent(now, deadline, step_s, *rest)

    def update(*args, **kwargs):
        if next(updates) == 2:  # the third step
            time.sleep(slow)
        return real_update(*args, **kwargs)

    monkeypatch.setattr(training_loop, "slice_spent", spent)
    monkeypatch.setattr(training_loop, "_update", update)
    cfg = lora_build(tmp_path)
    cfg.max_steps = 20
    train(cfg, slice_s=600.0)
    window = training_loop.SLICE_STEP_WINDOW
    assert all(s < slow for s in planned[:2]), planned
    assert all(s >= slow for s in planned[2:2 + window]), planned
    assert planned[2 + window] < slow, planned


def test_slices_too_short_for_a_step_and_a_save_stop_the_run_with_the_reason(tmp_path, lora_build):
    with pytest.raises(TrainingError, match="saved nothing: one step and a save of this run do not fit"):
        in_slices(lora_build(tmp_path), 0.3, StandInGpu())
    assert RunDir(tmp_path / "run").read_status()["state"] == "failed"


def test_the_tokenizer_and_data_are_prepared_before_the_first_slice(tmp_path):
    """Tokenizing is CPU work: done in a GPU slice it would spend the slice (a corpus slower to tokenize
    than a slice lasts would abort every slice), so the driver does it first and the slices find it cached."""
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__vocab_size=300, max_steps=4)  # a tokenizer trained on the corpus
    run = Path(cfg.run_dir)
    seen = []

    def prepared() -> int:  # complete prepared corpora in the cache (the documents' own cache aside)
        return sum("documents" not in p.parts for p in Path(cfg.data.cache_dir).rglob("meta.json"))

    def gpu(duration):
        decorate = StandInGpu()(duration)

        def wrap(fn):
            call = decorate(fn)

            def watched(*args, **kwargs):
                seen.append(((run / "tokenizer" / "tokenizer.json").is_file(), prepared()))
                return call(*args, **kwargs)
            return watched
        return wrap

    status = in_slices(cfg, 30.0, gpu)
    assert status["state"] == "finished" and seen and seen[0] == (True, 1), seen
    assert prepared() == 1  # the slice prepared nothing of its own
    assert (run / "train.log").read_text().count("tokenizer: ") == 1


@pytest.mark.parametrize("rows", ["\n", json.dumps({"prompt": "p", "chosen": "a", "rejected": "b"}) + "\n"],
                         ids=["empty", "pairs for lora"])
def test_data_that_cannot_be_used_fails_the_run_before_any_gpu_slice(tmp_path, tokenizer, rows):
    base = save_base_model(tmp_path / "base", tokenizer)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(rows)
    cfg = make_config(tmp_path, [corpus], mode="lora", model__init_from=str(base))
    gpu = StandInGpu()
    with pytest.raises(MiniMindError) as caught:
        in_slices(cfg, 5.0, gpu)
    written = RunDir(tmp_path / "run").read_status()
    assert gpu.calls == [] and written["state"] == "failed" and written["error"] == str(caught.value)
    assert f"FAILED: {caught.value}" in (tmp_path / "run" / "train.log").read_text()


def test_a_trainer_error_inside_a_slice_ends_the_run_with_its_own_message(tmp_path, lora_build):
    cfg = lora_build(tmp_path)
    (Path(cfg.model.init_from) / "model.safetensors").write_bytes(b"not weights")  # the slice loads the model
    gpu = StandInGpu()
    with pytest.raises(TrainingError) as caught:
        in_slices(cfg, 10.0, gpu)
    assert len(gpu.calls) == 1 and gpu.calls[0]["outcome"] == "error"
    assert "Error" != str(caught.value) and str(caught.value) == RunDir(tmp_path / "run").read_status()["error"]


# The app process has run a parallel op on two threads (loading a model is enough), then a slice is forked
# from it: GNU OpenMP's thread team does not survive the fork, and the slice's first parallel op (the
# matmul peak it measures) would wait for it until the platform kills the call. (PyTorch's CPU wheels use
# GNU OpenMP; with a fork-safe OpenMP this test would pass without the fix too.)
AFTER_THREADS_SCRIPT = """
import json, sys, torch
sys.path[:0] = [sys.argv[1]]
torch.set_num_threads(2)
torch.ones(4_000_000).add_(1)
from pathlib import Path
from helpers import SAMPLE_TEXTS
from training_helpers import make_config, save_base_model, write_chat_corpus
from zerogpu_standin import StandInGpu
from minimind.tokenizer import build_tokenizer
from minimind.training import RunDir
from minimind.training.slices import train_in_slices
tmp = Path(sys.argv[2])
base = save_base_model(tmp / "base", build_tokenizer(SAMPLE_TEXTS, vocab_size=512, min_frequency=1))
cfg = make_config(tmp, [write_chat_corpus(tmp)], mode="lora", model__init_from=str(base), data__seq_len=96, max_steps=40,
                  compile="off")
run = RunDir(Path(cfg.run_dir)).create()
cfg.save(run.config_file)
gpu = StandInGpu()
try:
    status = train_in_slices(run.path, 20.0, gpu=gpu)
except Exception as err:
    status = {"state": repr(err)}
print(json.dumps({"state": status["state"], "calls": gpu.calls, "threads": torch.get_num_threads()}))
"""


def test_a_slice_forked_after_the_app_process_used_its_threads_trains(tmp_path):
    out = subprocess.run([sys.executable, "-c", AFTER_THREADS_SCRIPT, str(ROOT / "tests"), str(tmp_path)],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["state"] == "finished" and all(c["outcome"] == "ok" for c in result["calls"]), result
    assert result["threads"] == 2  # the app process keeps its threads; only the forked worker has one
    assert "CPU (1 thread" in (tmp_path / "run" / "train.log").read_text()


def test_off_zero_gpu_the_spaces_decorator_runs_each_slice_in_this_process(tmp_path, lora_build, monkeypatch):
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    pytest.importorskip("spaces")
    slice_s = max(MIN_SLICE_S, timed_train(lora_build(tmp_path / "a")) / 2.5)
    status = in_slices(lora_build(tmp_path / "b"), slice_s, spaces_gpu)
    assert status["state"] == "finished"
    assert_same_losses(tmp_path / "a" / "run", tmp_path / "b" / "run", range(1, STEPS + 1))


def test_a_minutes_budget_is_kept_across_slices(tmp_path, lora_build):
    """The page's usual run: a time budget, no step count. The first slice plans the steps from its speed
    probe; later slices resume that plan and the training time already spent, and the run ends on time."""
    cfg = lora_build(tmp_path)
    cfg.max_steps, cfg.time_budget_s = 0, 8.0
    gpu = StandInGpu()
    status = in_slices(cfg, 4.0, gpu)
    assert status["state"] == "finished" and len(gpu.calls) >= 2, status
    assert 4.0 <= status["elapsed_s"] <= 8.0 * 1.25
    assert sorted(losses(tmp_path / "run")) == list(range(1, status["step"] + 1))

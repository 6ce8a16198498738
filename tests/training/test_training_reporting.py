"""report_to: TensorBoard event files and a local trackio project hold the figures metrics.jsonl
holds (the ones the page plots), step by step; an unknown tracker or a missing package is a
ConfigError before any work; a run that asks for more processes than it was started with is refused."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from minimind.errors import ConfigError, TrainingError
from minimind.training import RunDir, TrainConfig, train
from minimind.training.reporting import scalars
from helpers import ROOT
from training_helpers import make_config, write_text_corpus


def _series(records) -> dict[str, dict[int, float]]:
    """{figure: {step: value}} of metrics.jsonl-like records."""
    out: dict[str, dict[int, float]] = {}
    for record in records:
        for key, value in scalars(record).items():
            out.setdefault(key, {})[int(record["step"])] = value
    return out


def _assert_same(got: dict, expected: dict) -> None:
    assert {"loss", "lr", "tokens_per_s", "val_loss", "val_bpc"} <= set(expected)
    assert set(got) == set(expected)
    for key, by_step in expected.items():
        assert set(got[key]) == set(by_step), key
        for step, value in by_step.items():
            assert got[key][step] == pytest.approx(value, rel=1e-5, abs=1e-9), (key, step)


def test_tensorboard_event_files_hold_the_metrics(tmp_path, tokenizer_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = make_config(tmp_path, [write_text_corpus(tmp_path)], model__tokenizer=str(tokenizer_dir),
                         max_steps=4, eval_every=2, report_to=["tensorboard"])
    train(config)
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    got = {tag: {e.step: e.value for e in events.Scalars(tag)} for tag in events.Tags()["scalars"]}
    _assert_same(got, _series(RunDir(tmp_path / "run").read_metrics()))


def test_trackio_stores_the_metrics_in_the_run_folder(tmp_path, tokenizer_dir):
    """In a child process, as the page starts runs (trackio reads TRACKIO_DIR once, at import)."""
    config = make_config(tmp_path, [write_text_corpus(tmp_path)], model__tokenizer=str(tokenizer_dir),
                         max_steps=4, eval_every=2, report_to="trackio")
    config.save(tmp_path / "run.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKIO_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "minimind", "train", "--config", str(tmp_path / "run.yaml"),
                           "--run-dir", str(run_dir), "--no-progress"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (run_dir / "trackio").is_dir() and "report_to trackio" in (run_dir / "train.log").read_text()
    read = ("import json, sys; from trackio.sqlite_storage import SQLiteStorage; "
            "print(json.dumps(SQLiteStorage.get_logs(sys.argv[1], sys.argv[2]), default=str))")
    out = subprocess.run([sys.executable, "-c", read, "minimind", run_dir.name], cwd=ROOT, timeout=120,
                         env={**env, "TRACKIO_DIR": str(run_dir / "trackio")}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    logs = json.loads(out.stdout.strip().splitlines()[-1])
    expected = _series(RunDir(run_dir).read_metrics())
    got = _series([{k: v for k, v in row.items() if k in expected or k == "step"} for row in logs])
    _assert_same(got, expected)


def test_report_to_is_checked_with_the_config(tmp_path, monkeypatch):
    raw = make_config(tmp_path, ["corpus.txt"]).to_dict()
    assert raw["report_to"] == [] and raw["processes"] == 1  # off, one process: the defaults
    build = lambda value: TrainConfig.from_dict({**raw, "report_to": value})  # noqa: E731
    assert build("tensorboard, trackio").report_to == ["tensorboard", "trackio"]
    assert build("none").report_to == [] and build(None).report_to == []
    assert make_config(tmp_path, ["c"]).with_overrides(["report_to=tensorboard"]).report_to == ["tensorboard"]
    build(["tensorboard", "trackio"]).validate()
    with pytest.raises(ConfigError, match=r"report_to takes tensorboard, trackio \(unknown: wandb\)"):
        build("wandb").validate()
    with pytest.raises(ConfigError, match="report_to must be a list"):
        build(3).validate()
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "trackio" else real(name, *a))
    with pytest.raises(ConfigError, match="trackio, which is not installed here: pip install trackio"):
        build(["trackio"]).validate()
    for bad in (0, -1, 1025):
        with pytest.raises(ConfigError, match="processes must be a whole number 1..1024"):
            TrainConfig.from_dict({**raw, "processes": bad}).validate()


def test_a_run_of_several_processes_is_refused_without_them(tmp_path, tokenizer_dir):
    config = make_config(tmp_path, [write_text_corpus(tmp_path)], model__tokenizer=str(tokenizer_dir), processes=2)
    with pytest.raises(TrainingError, match="set to 2 processes but was started as 1: start it with torchrun"):
        train(config)
    assert RunDir(tmp_path / "run").read_status()["state"] == "failed"

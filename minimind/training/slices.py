"""Training in GPU slices, for a ZeroGPU Space.

On ZeroGPU a GPU exists only inside a function decorated with `@spaces.GPU(duration=...)`, called
from the app process, for at most its duration: the platform runs the call in a forked worker
(arguments and result pickled across, nothing it changes in memory comes back) and aborts it when
it overruns. A child process of our own never gets the GPU. So a run becomes a sequence of slices:
each is one decorated call of `train_slice`, which resumes the run from its newest checkpoint on
disk, trains until another step, an evaluation and a save would not fit in 85 % of the slice
(`loop.slice_spent`, from the measured step, evaluation and save times; the rest covers what the
call spends before training starts), saves, and returns the run's status (a small dict). The
tokenizer and the prepared data are made once before the first slice, off the GPU. The model is
not compiled: each slice is a fresh worker, which would compile it again. The driver
calls the next slice until the run is finished, stopped or failed. Exact resume (the optimizer,
data order and random state travel in every checkpoint) makes the sliced run the same run.

A slice that overruns is aborted by the platform: whatever it trained after its last save is lost
and the next slice resumes from that save. A run that cannot finish one step and a save in a
slice would never move: after `MAX_FRUITLESS` slices without a new checkpoint the driver stops with
a message saying so. Between slices other calls (chat) get the GPU.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import TrainingError, failure_message
from ..hardware import on_one_thread_when_forked
from .checkpoint import latest_checkpoint
from .config import TrainConfig
from .distributed import DistInfo
from .loop import train
from .precision import pick_device, resolved_for
from .run_dir import RunDir
from .setup import prepare_inputs

MAX_FRUITLESS = 2      # slices in a row that saved nothing before the driver gives up
DEFAULT_SLICE_S = 60   # ZeroGPU's default duration for a call


def train_slice(run_dir: str, resume: bool, slice_s: float) -> dict:
    """One GPU call: start (or resume) the run saved in `run_dir`, train for at most `slice_s` seconds,
    save, and return its status. Takes and returns only small picklable values."""
    run = RunDir(Path(run_dir))
    cfg = TrainConfig.load(run.config_file)
    cfg.run_dir = str(run.path)
    return train(cfg, resume=resume, slice_s=slice_s)


def prepare_before_slices(run: RunDir, cfg: TrainConfig) -> None:
    """The run's tokenizer and prepared data (`setup.prepare_inputs`), made here (CPU work, no GPU
    needed) and cached where every slice finds them. In a slice they would take GPU time, and a corpus
    that takes longer to tokenize than a slice lasts would abort every slice and never start. Data
    that cannot be used fails the run here, before it takes any GPU time. The config is resolved
    as the slice resolves it (`resolved_for`; the device decided without touching CUDA), so the
    slice reads the same cache."""
    run.write_status(phase="preparing_data")
    try:
        resolved = resolved_for(cfg, pick_device(cfg.device))
        resolved.run_dir = str(run.path)
        prepare_inputs(resolved, run, DistInfo())
    except Exception as err:
        message = failure_message(err)
        run.log(f"FAILED: {message}")
        run.write_status(state="failed", error=message)
        raise TrainingError(message) from err
    run.write_status(phase="starting")  # (waiting for the first GPU call)


def spaces_gpu(duration: float):
    """The `spaces` package's decorator (which does nothing off ZeroGPU)."""
    import spaces

    return spaces.GPU(duration=int(duration))


def train_in_slices(run_dir: str | Path, slice_s: float = DEFAULT_SLICE_S, gpu=spaces_gpu, resume: bool = False,
                    on_slice=None, stop_requested=lambda: False) -> dict:
    """Train the run in `run_dir` (its config.yaml written) in GPU slices of `slice_s` seconds.

    `gpu(duration)` is the decorator that gives a call the GPU (`spaces.GPU` on ZeroGPU). `on_slice(k,
    status)` hears each slice's start (status None) and end; `stop_requested()` is asked between
    slices. Returns the final status; status.json carries `slice` (the one running or last run) and
    `slice_s`. An aborted slice (the platform's exception) is logged and the next one resumes from the
    last save; a slice whose trainer failed (status.json says so: the platform passes on only an
    exception's class name) ends the run with that error."""
    run = RunDir(Path(run_dir))
    cfg = TrainConfig.load(run.config_file)
    if cfg.compile != "off":  # every slice is a fresh worker: it would compile again each time
        cfg.compile = "off"
        cfg.save(run.config_file)
        run.log("compile: off (each GPU slice is a fresh process, which would compile the model again)")
    prepare_before_slices(run, cfg)
    call = gpu(slice_s)(on_one_thread_when_forked(train_slice))
    fruitless, index, status = 0, 0, {}
    while not stop_requested():
        index += 1
        before = latest_checkpoint(run.checkpoints)
        run.write_status(slice=index, slice_s=slice_s)
        if on_slice:
            on_slice(index, None)
        try:
            status = call(str(run.path), resume, float(slice_s))
        except Exception as err:  # the trainer failed, or the platform aborted the call (an overrun)
            written = run.read_status()
            if written.get("state") == "failed":
                raise TrainingError(written.get("error") or f"{type(err).__name__}: {err}") from err
            said = getattr(err, "message", None) or str(err)  # gradio.Error keeps its text in .message
            run.log(f"GPU slice {index} was aborted ({type(err).__name__}: {said}); resuming from the last save")
            status = {"state": "aborted", "error": said}
        resume = True
        if on_slice:
            on_slice(index, status)
        if status.get("state") in ("finished", "stopped", "failed"):
            return status
        after = latest_checkpoint(run.checkpoints)
        fruitless = fruitless + 1 if after == before else 0
        if fruitless >= MAX_FRUITLESS:
            message = (f"{fruitless} GPU slices of {slice_s:.0f}s in a row saved nothing: one step and a save of "
                       "this run do not fit in a slice. Use a smaller model, batch or sequence length, or longer "
                       "slices")
            run.log("FAILED: " + message)
            run.write_status(state="failed", error=message)
            raise TrainingError(message)
    return run.write_status(state="stopped")

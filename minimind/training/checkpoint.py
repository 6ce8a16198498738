"""Checkpoints that survive `kill -9` and resume exactly.

checkpoints/step-N/
  config.json, model.safetensors, tokenizer files   (or a peft adapter folder)
  trainer/state.json            step, epoch position, counters, Python RNG, optimizer hyper-params
  trainer/optimizer.safetensors optimizer moments and the torch RNG states
  trainer/average.safetensors   with optim.ema: the trained weights and their average (the model
                                folder holds the average; training/ema.py)

A checkpoint is written into a hidden temporary folder and renamed into place,
so a folder named step-N is always complete. Nothing is deleted under its own
name either: an old checkpoint is first renamed to a hidden `.deleting-` name
(and a re-saved step's previous copy to `.replaced-`), then deleted, so a kill at
any moment leaves only complete step-N folders. `remove_partial` cleans the
leftovers (and puts back a `.replaced-` copy whose successor never arrived).
Everything is safetensors or JSON: no pickles.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..errors import TrainingError

STEP_DIR = re.compile(r"^step-(\d+)$")


def checkpoint_dirs(root: Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := STEP_DIR.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(root: Path) -> Path | None:
    dirs = checkpoint_dirs(root)
    return dirs[-1] if dirs else None


TMP, DELETING, REPLACED = ".tmp-", ".deleting-", ".replaced-"


def remove_partial(root: Path) -> None:
    """Clean what a killed save or rotation left: unfinished and half-deleted folders go; a
    replaced checkpoint whose new copy never got its name is put back (it is complete)."""
    if not root.is_dir():
        return
    for p in root.iterdir():
        if p.name.startswith(REPLACED) and not (root / p.name[len(REPLACED):]).exists():
            p.rename(root / p.name[len(REPLACED):])
        elif p.name.startswith((TMP, DELETING, REPLACED)):
            shutil.rmtree(p, ignore_errors=True)


def _delete(folder: Path) -> None:
    """Take `folder` out of the step-N names in one rename, then delete it."""
    hidden = folder.with_name(DELETING + folder.name)
    shutil.rmtree(hidden, ignore_errors=True)
    folder.rename(hidden)
    shutil.rmtree(hidden, ignore_errors=True)


def _flatten_optimizer(state: dict) -> tuple[dict, dict]:
    tensors, meta = {}, {"param_groups": state["param_groups"], "scalars": {}}
    for key, slots in state["state"].items():
        for name, value in slots.items():
            if torch.is_tensor(value):
                tensors[f"opt/{key}/{name}"] = value.detach().cpu().contiguous()
            else:
                meta["scalars"][f"{key}/{name}"] = value
    return tensors, meta


def _unflatten_optimizer(tensors: dict, meta: dict) -> dict:
    state: dict = {}

    def slot(key: str) -> dict:
        k = int(key) if key.isdigit() else key
        return state.setdefault(k, {})

    for flat, value in tensors.items():
        if flat.startswith("opt/"):
            _, key, name = flat.split("/", 2)
            slot(key)[name] = value
    for flat, value in meta["scalars"].items():
        key, name = flat.split("/", 1)
        slot(key)[name] = value
    return {"state": state, "param_groups": meta["param_groups"]}


def _python_rng_to_json(state) -> list:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def _python_rng_from_json(data) -> tuple:
    version, internal, gauss = data
    return (version, tuple(internal), gauss)


AVERAGE_FILE = "average.safetensors"  # in trainer/


def save_checkpoint(root: Path, step: int, write_model, optimizer_state: dict, trainer_state: dict,
                    keep: int, average: dict | None = None) -> Path:
    """Write checkpoint step-N atomically and keep the newest `keep` ones.

    `write_model(folder)` saves the model (or adapter) and tokenizer into `folder`; `average`, the
    tensors of a weight average (training/ema.py), goes beside the optimizer state.
    """
    try:
        return _save(root, step, write_model, optimizer_state, trainer_state, keep, average)
    except OSError as err:
        where = f"{root.parent.name}/{root.name}" if root.parent.name else root.name
        raise TrainingError(f"cannot write checkpoint step-{step} into {where} ({err.strerror or err}); "
                            "free some disk space or make the run folder writable, then resume") from None


def _save(root: Path, step: int, write_model, optimizer_state: dict, trainer_state: dict, keep: int,
          average: dict | None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step}"
    tmp = root / f"{TMP}step-{step}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    write_model(tmp)
    trainer = tmp / "trainer"
    trainer.mkdir()
    tensors, meta = _flatten_optimizer(optimizer_state)
    tensors["rng/torch"] = torch.get_rng_state()
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng/cuda/{i}"] = s
    save_file(tensors, trainer / "optimizer.safetensors")
    if average is not None:
        save_file(average, trainer / AVERAGE_FILE)
    state = {**trainer_state, "step": step, "optimizer": meta,
             "python_rng": _python_rng_to_json(random.getstate())}
    (trainer / "state.json").write_text(json.dumps(state), encoding="utf-8")
    replaced = root / f"{REPLACED}step-{step}"
    if final.exists():  # re-saving the same step (e.g. stop right after a periodic save)
        shutil.rmtree(replaced, ignore_errors=True)
        final.rename(replaced)
    tmp.rename(final)
    shutil.rmtree(replaced, ignore_errors=True)
    for old in checkpoint_dirs(root)[:-keep]:
        _delete(old)
    return final


def load_trainer_state(folder: Path) -> tuple[dict, dict]:
    """(trainer state incl. step, optimizer state dict) of a checkpoint; restores RNG states."""
    try:
        state = json.loads((folder / "trainer" / "state.json").read_text(encoding="utf-8"))
        tensors = load_file(str(folder / "trainer" / "optimizer.safetensors"))
    except (OSError, ValueError) as err:
        raise TrainingError(f"{folder}: cannot resume from this checkpoint ({err})") from err
    torch.set_rng_state(tensors["rng/torch"])
    cuda_states = [tensors[k] for k in sorted(tensors) if k.startswith("rng/cuda/")]
    if cuda_states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda_states)
    random.setstate(_python_rng_from_json(state["python_rng"]))
    return state, _unflatten_optimizer(tensors, state["optimizer"])


def load_average(folder: Path) -> dict | None:
    """A checkpoint's weight-average tensors (training/ema.py), or None where it was saved without."""
    path = folder / "trainer" / AVERAGE_FILE
    if not path.is_file():
        return None
    try:
        return load_file(str(path))
    except (OSError, ValueError) as err:
        raise TrainingError(f"{folder.name}: cannot resume from this checkpoint ({err})") from err

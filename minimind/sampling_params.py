"""How to pick tokens, checked where a request arrives: `SamplingParams` and the defaults a model
folder was saved with. A leaf: chat, the API, the page, the terminal and GRPO's rollouts all build
their sampler from it, and it imports nothing of the project but its errors."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import ClassVar

from .errors import SamplingError

MAX_STOP_STRINGS = 4
MAX_BEAMS = 16
MIN_PENALTY = 0.01                               # dividing logits by less overflows them
GREEDY_BELOW = 1e-4                              # a temperature under this samples as 0 (greedy) does


@dataclass(frozen=True)
class SamplingParams:
    """How to pick tokens. Every field is checked on construction (SamplingError)."""

    max_temperature: ClassVar[float] = 2.0  # a chat's bound; GRPO's rollouts allow hotter (see rollouts.py)

    temperature: float = 0.7          # 0 = greedy (always the most likely token); up to 2
    top_k: int = 0                    # sample among the k most likely tokens only (0 = off)
    top_p: float = 0.9                # nucleus: the smallest set holding this probability (1 = off)
    repetition_penalty: float = 1.0   # > 1 makes tokens already seen less likely (1 = off)
    max_new_tokens: int = 256         # most tokens the answer may have
    seed: int | None = None           # same seed + same prompt = same text (None = random)
    num_beams: int = 1                # > 1: beam search (deterministic, needs temperature 0; not streamed)
    stop: tuple[str, ...] = ()        # strings that end the answer (not included in it)

    def __post_init__(self):
        if isinstance(self.temperature, (int, float)) and 0 < self.temperature < GREEDY_BELOW:
            object.__setattr__(self, "temperature", 0.0)  # the same choice as greedy; dividing by it overflows
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        elif self.stop is None:
            object.__setattr__(self, "stop", ())
        elif isinstance(self.stop, (list, tuple)):
            object.__setattr__(self, "stop", tuple(self.stop))
        self._check()

    def _check(self) -> None:
        _number("temperature", self.temperature, low=0.0, high=self.max_temperature)
        _integer("top_k", self.top_k, low=0)
        _number("top_p", self.top_p, low=0.0, high=1.0, low_open=True)
        _number("repetition_penalty", self.repetition_penalty, low=MIN_PENALTY, high=10.0)
        _integer("max_new_tokens", self.max_new_tokens, low=1)
        if self.seed is not None:
            _integer("seed", self.seed, low=0, high=2**63 - 1)
        _integer("num_beams", self.num_beams, low=1, high=MAX_BEAMS)
        if self.num_beams > 1 and self.temperature > 0:
            raise sampling_error("num_beams", "num_beams > 1 is beam search, which is deterministic: set "
                                              "temperature to 0 for beam search, or num_beams to 1 to sample")
        if not isinstance(self.stop, tuple) or not all(isinstance(s, str) for s in self.stop):
            raise sampling_error("stop", "stop must be a string or a list of strings")
        if len(self.stop) > MAX_STOP_STRINGS:
            raise sampling_error("stop", f"stop takes at most {MAX_STOP_STRINGS} strings, got {len(self.stop)}")
        if any(not s for s in self.stop):
            raise sampling_error("stop", "stop strings must not be empty")

    @classmethod
    def from_model(cls, folder: str | Path | None, **overrides) -> SamplingParams:
        """The defaults a model was saved with (its generation_config.json, or its base's for a LoRA
        adapter), then `overrides`; the class defaults where the folder says nothing."""
        return cls(**{**_saved_defaults(folder), **overrides})

    def replace(self, **changes) -> SamplingParams:
        """A copy with some fields changed (checked again)."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise SamplingError(f"unknown sampling parameter(s): {', '.join(sorted(unknown))}; "
                                f"known: {', '.join(f.name for f in fields(self))}")
        return replace(self, **changes)

    def with_text_values(self, pairs: Mapping[str, str]) -> SamplingParams:
        """A copy with fields set from text (e.g. `temperature=0.7 top_k=40` typed in a chat);
        `seed=none` clears the seed, `stop=a|b` sets two stop strings."""
        changes: dict = {}
        for name, text in pairs.items():
            kind = {f.name: f.type for f in fields(self)}.get(name)
            if kind is None:
                return self.replace(**{name: text})  # raises the "unknown parameter" error
            changes[name] = _parse(name, str(kind), text)
        return self.replace(**changes)


def _saved_defaults(folder: str | Path | None) -> dict:
    """Sampling fields from a model folder's generation_config.json ({} when there is none, or
    when it holds values this library cannot use). A LoRA adapter without one uses its base's.
    A saved max_new_tokens is capped at half the model's context, leaving room for the prompt."""
    if folder is None:
        return {}
    folders = [Path(folder)]
    base = _read_json(folders[0] / "adapter_config.json").get("base_model_name_or_path")
    if isinstance(base, str) and base:
        folders.append(Path(base))
    context = next((c for c in (_read_json(f / "config.json").get("max_position_embeddings") for f in folders)
                    if isinstance(c, int) and not isinstance(c, bool) and c > 1), None)
    saved = next((g for g in (_read_json(f / "generation_config.json") for f in folders) if g), {})
    defaults = {name: saved[name] for name in ("temperature", "top_k", "top_p", "repetition_penalty",
                                                "max_new_tokens") if name in saved}
    if saved.get("do_sample") is False:
        defaults["temperature"] = 0.0
    try:
        SamplingParams(**defaults)
    except SamplingError:
        return {}  # a file this library cannot use: ignore it rather than fail every request
    if context and defaults.get("max_new_tokens", 0) > context // 2:
        defaults["max_new_tokens"] = context // 2
    return defaults


def _read_json(file: Path) -> dict:
    """A JSON object from `file`, or {} when it is missing, unreadable or not an object."""
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _parse(name: str, kind: str, text: str):
    if name == "stop":  # typed in a terminal: "\\n" means a newline
        text = text.replace("\\n", "\n").replace("\\t", "\t")
        return tuple(s for s in text.split("|") if s)
    text = text.strip()
    if name == "seed" and text.lower() in ("none", ""):
        return None
    try:
        return float(text) if kind.startswith("float") else int(text)
    except ValueError:
        raise sampling_error(name, f"{name} must be a {'number' if kind.startswith('float') else 'whole number'}, "
                                   f"got {text!r}") from None


def sampling_error(param: str, message: str) -> SamplingError:
    """A SamplingError that also names the field (`.param`), for faces that point at it."""
    err = SamplingError(message)
    err.param = param
    return err


def _number(name, value, low, high, low_open=False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise sampling_error(name, f"{name} must be a number, got {value!r}")
    if value < low or value > high or (low_open and value == low):
        bracket = "(" if low_open else "["
        raise sampling_error(name, f"{name} must be in {bracket}{low:g}, {high:g}], got {value:g}")


def _integer(name, value, low, high=None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise sampling_error(name, f"{name} must be a whole number, got {value!r}")
    if value < low or (high is not None and value > high):
        limit = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise sampling_error(name, f"{name} must be {limit}, got {value}")

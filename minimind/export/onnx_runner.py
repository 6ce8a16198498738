"""Running an ONNX export (onnx.py writes it) in ONNX Runtime on the CPU, with the call shape the
evaluator and the export checks use for PyTorch models; the decoder's greedy decode feeds each
step's `present` tensors back as `past_key_values` through the shared loop (runner.py). For the
checks, for tests, and as a reference for users of an exported folder."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from ..checkpoint import is_classifier
from ..errors import ExportError
from .runner import Step, greedy

INSTALL = "pip install onnx==1.23.2 onnxscript==0.7.2 onnxruntime==1.32.0"  # as requirements.txt pins them
# The Hugging Face Hub's ONNX layout, where transformers.js looks with default options: the graph in
# onnx/, named by its dtype's suffix (fp32: none, q8: "_quantized"); weights over protobuf's 2 GB go to
# "<graph>_data" beside it. Folders exported before this layout hold one root model.onnx.
GRAPH = "onnx/model.onnx"
QUANTIZED_GRAPH = "onnx/model_quantized.onnx"
LEGACY_GRAPH = "model.onnx"


def missing_packages() -> list[str]:
    """The optional ONNX packages not installed (found without importing them)."""
    import importlib.util

    def installed(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a module blocked in sys.modules (None) has no spec
            return False

    return [name for name in ("onnx", "onnxscript", "onnxruntime") if not installed(name)]


def require_onnx() -> None:
    """ExportError naming the install command when the optional ONNX packages are missing: the
    library runs without them, and only these two formats need them."""
    missing = missing_packages()
    if missing:
        raise ExportError(f"the ONNX export needs {', '.join(missing)} (not installed): {INSTALL}")


def graph_file(folder: str | Path, graph: str | None = None) -> Path:
    """The graph an export folder holds: `graph` (a path inside the folder) when given, else the
    float graph, else the quantized one, else an older export's root model.onnx."""
    folder = Path(folder)
    names = [graph] if graph else [GRAPH, QUANTIZED_GRAPH, LEGACY_GRAPH]
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise ExportError(f"{folder.name}/ holds no ONNX graph (looked for {', '.join(names)}); "
                      "export the model again with --format onnx or onnx-int8")


class _OnnxRunner:
    """An ONNX export in an ONNX Runtime session on the CPU, with the few model methods the evaluator
    and the checks call (an inference graph: eval()/train() change nothing; "parameters" say CPU)."""

    training = False

    def __init__(self, folder: str | Path, threads: int | None = None, graph: str | None = None):
        require_onnx()
        import onnxruntime as ort
        from transformers import AutoConfig

        folder = Path(folder)
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3
        self.graph = graph_file(folder, graph)
        self.session = ort.InferenceSession(str(self.graph), options, providers=["CPUExecutionProvider"])
        self.config = AutoConfig.from_pretrained(folder)

    def parameters(self):
        """For callers that read the device from the first parameter: ONNX Runtime runs on the CPU."""
        yield torch.zeros(0)

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self


class OnnxCausalLM(_OnnxRunner):
    """An ONNX export run by ONNX Runtime on the CPU, with the call shape the evaluator and the
    checks use for PyTorch models: `model(input_ids=..., attention_mask=...).logits`. Each call
    starts from an empty cache; `step` runs one call with an explicit cache."""

    def __init__(self, folder: str | Path, threads: int | None = None, graph: str | None = None):
        super().__init__(folder, threads, graph)
        self.layers = sum(1 for i in self.session.get_inputs() if i.name.endswith(".key"))
        past = next(i for i in self.session.get_inputs() if i.name.startswith("past_key_values"))
        self.kv_heads, self.head_dim = past.shape[1], past.shape[3]

    def empty_past(self, batch: int) -> list:
        return [np.zeros((batch, self.kv_heads, 0, self.head_dim), dtype=np.float32)
                for _ in range(2 * self.layers)]

    def step(self, input_ids, attention_mask, position_ids, past: list):
        """(logits, present) for one call: numpy arrays in, numpy arrays out."""
        feed = {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids}
        for i in range(self.layers):
            feed[f"past_key_values.{i}.key"], feed[f"past_key_values.{i}.value"] = past[2 * i], past[2 * i + 1]
        logits, *present = self.session.run(None, feed)
        return logits, present

    def __call__(self, input_ids, attention_mask=None, **_):
        ids = input_ids.cpu().numpy().astype(np.int64)
        b, t = ids.shape
        mask = np.ones((b, t), dtype=np.int64) if attention_mask is None else \
            attention_mask.cpu().numpy().astype(np.int64)
        positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None) if not mask.all() else \
            np.broadcast_to(np.arange(t, dtype=np.int64), (b, t)).copy()
        logits, _ = self.step(ids, mask, positions, self.empty_past(b))
        return SimpleNamespace(logits=torch.from_numpy(logits))

    def cached_step(self) -> Step:
        """A decode step through the graph's own KV cache: the prompt in one call with an empty past,
        then one token per call, each call's `present` fed back as the next one's `past_key_values`."""
        past, length = self.empty_past(1), 0

        def step(new: list[int]) -> torch.Tensor:
            nonlocal past, length
            t = len(new)
            positions = np.arange(length, length + t, dtype=np.int64)[None]
            mask = np.ones((1, length + t), dtype=np.int64)
            logits, past = self.step(np.array([new], dtype=np.int64), mask, positions, past)
            length += t
            return torch.from_numpy(logits[0, -1])

        return step

    def generate_greedy(self, prompt: list[int], n: int) -> list[int]:
        """`n` greedy tokens after `prompt`, decoded through the graph's KV cache (`cached_step`)."""
        return greedy(self.cached_step(), prompt, n)


class OnnxClassifier(_OnnxRunner):
    """A classifier's ONNX export run by ONNX Runtime on the CPU: `model(input_ids=...,
    attention_mask=...).logits` (batch, num_labels), like the PyTorch classifier; `config`
    carries id2label."""

    def __call__(self, input_ids, attention_mask=None, **_):
        ids = input_ids.cpu().numpy().astype(np.int64)
        mask = np.ones_like(ids) if attention_mask is None else attention_mask.cpu().numpy().astype(np.int64)
        (logits,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask})
        return SimpleNamespace(logits=torch.from_numpy(logits))


def load_onnx(folder: str | Path, graph: str | None = None):
    """The runner for an ONNX export folder (`graph`: which of its graphs, see `graph_file`):
    OnnxClassifier when its config names a classifier."""
    if is_classifier(folder):
        return OnnxClassifier(folder, graph=graph)
    return OnnxCausalLM(folder, graph=graph)

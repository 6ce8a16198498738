"""`onnx`, `onnx-int8`: a decoder-with-past ONNX graph that ONNX Runtime (Python, C#, Web) runs.

The folder has the Hugging Face Hub's ONNX layout, which transformers.js v3 loads with
default options (tests/js runs it in Node): `onnx/model.onnx` (`onnx`) or
`onnx/model_quantized.onnx` (`onnx-int8`, transformers.js's dtype "q8"), and at the
root `config.json`, `generation_config.json` and the tokenizer files. A graph
under protobuf's 2 GB limit is one file with its weights inside (a browser then
needs no external data); a larger one keeps its weights in `onnx/model.onnx_data`,
the name transformers.js fetches. config.json's "transformers.js_config" names
the folder's dtype (the browser's default, q8, would otherwise look for a
quantized graph in a float folder) and, for a split graph, its external data.
The graph has the input/output names of Optimum's and transformers.js's Llama decoder
exports ("decoder with past", one graph for the prompt and for every next token):

  inputs   input_ids                 int64  (batch, sequence)
           attention_mask            int64  (batch, past_sequence + sequence)
           position_ids              int64  (batch, sequence)
           past_key_values.{i}.key   float  (batch, num_key_value_heads, past_sequence, head_dim)
           past_key_values.{i}.value float  (same), for every layer i
  outputs  logits                    float  (batch, sequence, vocab)
           present.{i}.key / .value  float  (batch, num_key_value_heads, past_sequence + sequence, head_dim)

The first step passes empty past tensors (past_sequence 0); each next step feeds
the `present` tensors back as `past_key_values`. A dense rotary model's
config.json is written in Llama form (model_type llama), so Optimum's
`ORTModelForCausalLM` and transformers.js treat the folder as a Llama export;
other position encodings keep the MiniMind config (the graph itself needs no
MiniMind code either way).

The graph is traced with PyTorch's `torch.export`-based ONNX exporter
(`torch.onnx.export(..., dynamo=True)`; the TorchScript exporter is deprecated)
from a small wrapper that calls the model's own embedding, position, decoder
layer and head modules with plain tensors: a `_PastKeys` object stands in for
transformers' cache and only concatenates past and new keys/values, so nothing
but tensors crosses the graph boundary. Attention runs the model's `eager`
kernel (plain matmul + softmax) for the trace, which every ONNX runtime has.

`onnx-int8` is the same graph through ONNX Runtime's `quantize_dynamic`: the
weights of every MatMul (attention and MLP projections, and the LM head) become
int8 with a scale per output channel, and activations are quantized to uint8 on
the fly per tensor at run time (MatMulInteger / DynamicQuantizeLinear). The
embedding table (a Gather), norms and attention score products stay float32.

This module writes the folder; onnx_runner.py runs it (the export checks, tests, users).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path

import torch
from torch import nn

from ..classifier import is_classifier_model, pooled
from ..errors import ExportError
from ..hardware import VNNI_FLAGS, cpu_flags
from ..tokenizer import save_tokenizer
from .llama import llama_config, not_llama_shaped
# (the runner's three names stay importable from here too: cards exported before onnx_runner.py name them so)
from .onnx_runner import GRAPH, QUANTIZED_GRAPH, OnnxCausalLM, OnnxClassifier, load_onnx, require_onnx  # noqa: F401

LAYOUT = """\
inputs   input_ids                 int64  (batch, sequence)
         attention_mask            int64  (batch, past_sequence + sequence)
         position_ids              int64  (batch, sequence)
         past_key_values.{i}.key   float  (batch, num_key_value_heads, past_sequence, head_dim)
         past_key_values.{i}.value float  (same), for every layer i
outputs  logits                    float  (batch, sequence, vocab)
         present.{i}.key / .value  float  (batch, num_key_value_heads, past_sequence + sequence, head_dim)
First call: empty past tensors (past_sequence 0); then feed each present.{i} back as past_key_values.{i}."""
CLASSIFIER_LAYOUT = """\
inputs   input_ids       int64  (batch, sequence)
         attention_mask  int64  (batch, sequence), 1 on real tokens (padding on either side)
outputs  logits          float  (batch, num_labels); class names: id2label in config.json"""
OPSET = 18           # ONNX opset of the graph (ONNX Runtime >= 1.14 runs it)
SINGLE_FILE_LIMIT = 2_000_000_000  # bytes: a graph this big or bigger keeps its weights outside (protobuf's cap is 2 GiB)
EXTERNAL_DATA = "model.onnx_data"  # beside onnx/model.onnx: what transformers.js fetches as its external data


def onnx_refusal(config) -> str | None:
    """Why this model has no ONNX export (None when it has one). Routed experts pick their tokens
    with data-dependent shapes (`nonzero`), which a static graph cannot trace."""
    if getattr(config, "use_moe", False):
        return ("mixture-of-experts models cannot be exported to ONNX (their expert routing has "
                "data-dependent shapes); export as 'hf' or 'int8' instead")
    if getattr(config, "model_type", "minimind") != "minimind":
        return f"{config.model_type!r} models cannot be exported to ONNX; export as 'hf' instead"
    return None


class _PastKeys:
    """Stands in for transformers' Cache inside the traced forward: `update` appends the new keys
    and values of a layer to that layer's past tensors and keeps the result as its `present`."""

    def __init__(self, past: list[torch.Tensor]):
        self.past = past
        self.present: list[torch.Tensor] = [None] * len(past)  # type: ignore[list-item]

    def update(self, k: torch.Tensor, v: torch.Tensor, layer_idx: int):
        k = torch.cat([self.past[2 * layer_idx], k], dim=2)
        v = torch.cat([self.past[2 * layer_idx + 1], v], dim=2)
        self.present[2 * layer_idx], self.present[2 * layer_idx + 1] = k, v
        return k, v


class DecoderWithPast(nn.Module):
    """forward(input_ids, attention_mask, position_ids, past) -> (logits, *present), running the
    model's own modules; `past` is [layer0 key, layer0 value, layer1 key, ...]."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.lm = model

    def forward(self, input_ids, attention_mask, position_ids, past: list[torch.Tensor]):
        cache = _PastKeys(list(past))
        hidden = _decode(self.lm.model, input_ids, attention_mask, position_ids, cache)
        return (self.lm.lm_head(hidden), *cache.present)


def _decode(body, input_ids, attention_mask, position_ids, cache):
    """The decoder stack (MiniMindModel.forward without its data-dependent branches): embeddings,
    positions, every layer with the padding mask always applied, final norm."""
    x = body.embed_tokens(input_ids)
    if body.config.position_encoding == "learned":
        # the model's own check of the position range is data-dependent; the graph indexes directly
        x, positions = x + body.embed_positions(position_ids), None
    else:
        x, positions = body._positions(x, position_ids)
    key_valid = attention_mask.bool()
    for layer in body.layers:
        x, _ = layer(x, positions, key_valid, cache)
    return body.norm(x)


class ClassifierGraph(nn.Module):
    """forward(input_ids, attention_mask) -> class logits (batch, num_labels), as
    MiniMindForSequenceClassification computes them: positions count real tokens (padding on
    either side), and the `score` head reads what the config's `classifier_pooling` pools."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.classifier = model

    def forward(self, input_ids, attention_mask):
        positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        hidden = _decode(self.classifier.model, input_ids, attention_mask, positions, None)
        return self.classifier.score(pooled(hidden, attention_mask, self.classifier.config.classifier_pooling))


def io_names(config) -> tuple[list[str], list[str]]:
    """(input names, output names) of the graph, in order."""
    past, present = [], []
    for i in range(config.num_hidden_layers):
        past += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        present += [f"present.{i}.key", f"present.{i}.value"]
    return ["input_ids", "attention_mask", "position_ids", *past], ["logits", *present]


def empty_past(config, batch: int = 1, length: int = 0) -> list[torch.Tensor]:
    """Past keys/values of `length` positions (zeros), the shape every past_key_values input takes."""
    shape = (batch, config.num_key_value_heads, length, config.head_dim)
    return [torch.zeros(shape) for _ in range(2 * config.num_hidden_layers)]


@contextlib.contextmanager
def _eager_attention(model):
    """Trace with the readable matmul+softmax kernel (restored afterwards): the fused and tiled
    kernels branch on shapes in Python, the eager one is the same graph for every length."""
    config = model.config
    old = config.attention_impl
    config.attention_impl = "eager"
    try:
        yield
    finally:
        config.attention_impl = old


def _name_axes(path: Path) -> None:
    """Give the dynamic axes the names Optimum uses (the exporter calls them s0, s1, ...)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False)
    for value in graph.graph.input:
        dims = value.type.tensor_type.shape.dim
        if value.name in ("input_ids", "position_ids"):
            axes = {0: "batch_size", 1: "sequence_length"}
        elif value.name == "attention_mask":
            axes = {0: "batch_size", 1: "past_sequence_length + sequence_length"}
        else:
            axes = {0: "batch_size", 2: "past_sequence_length"}
        for axis, name in axes.items():
            dims[axis].dim_param = name
    for value in graph.graph.output:
        dims = value.type.tensor_type.shape.dim
        axes = {0: "batch_size", 1: "sequence_length"} if value.name == "logits" else \
            {0: "batch_size", 2: "past_sequence_length + sequence_length"}
        for axis, name in axes.items():
            if axis < len(dims) and not dims[axis].HasField("dim_value"):
                dims[axis].dim_param = name
    onnx.save(graph, str(path))


def export_classifier_graph(model: nn.Module, path: Path) -> Path:
    """Trace a MiniMindForSequenceClassification to `path`: inputs input_ids and attention_mask
    (batch, sequence), output logits (batch, num_labels), the layout of Optimum's
    sequence-classification exports. No KV cache: a classifier reads each text once."""
    require_onnx()
    reason = onnx_refusal(model.config)
    if reason:
        raise ExportError(reason)
    ids = torch.randint(0, model.config.vocab_size, (2, 5))
    mask = torch.ones(2, 5, dtype=torch.long)
    mask[1, 3:] = 0
    b, s = torch.export.Dim("batch"), torch.export.Dim("sequence")
    dynamic = {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s}}
    path.parent.mkdir(parents=True, exist_ok=True)
    with _eager_attention(model), torch.no_grad(), _quiet():
        try:
            program = torch.onnx.export(ClassifierGraph(model).eval(), (ids, mask), dynamo=True,
                                        input_names=["input_ids", "attention_mask"], output_names=["logits"],
                                        dynamic_shapes=dynamic, opset_version=OPSET, optimize=True,
                                        external_data=True)
        except Exception as err:  # the exporter raises many kinds; the user needs the one line
            raise ExportError(f"tracing the classifier to ONNX failed: {type(err).__name__}: "
                              f"{str(err).splitlines()[0] if str(err) else ''}") from err
        program.save(str(path), external_data=True)
    _name_classifier_axes(path)
    return path


def _name_classifier_axes(path: Path) -> None:
    import onnx

    graph = onnx.load(str(path), load_external_data=False)
    for value in [*graph.graph.input, *graph.graph.output]:
        dims = value.type.tensor_type.shape.dim
        dims[0].dim_param = "batch_size"
        if value.name != "logits":
            dims[1].dim_param = "sequence_length"
    onnx.save(graph, str(path))


def export_graph(model: nn.Module, path: Path) -> Path:
    """Trace `model` (a MiniMindForCausalLM in float32, eval mode) to a decoder-with-past graph at
    `path`, weights in `path`.data (the exporter's layout; `write_onnx` re-saves it in the Hub's).
    Example shapes avoid 0 and 1 so that no axis is fixed."""
    require_onnx()
    reason = onnx_refusal(model.config)
    if reason:
        raise ExportError(reason)
    config = model.config
    batch, seq, past_len = 2, 3, 4
    ids = torch.randint(0, config.vocab_size, (batch, seq))
    mask = torch.ones(batch, past_len + seq, dtype=torch.long)
    positions = torch.arange(past_len, past_len + seq)[None].expand(batch, seq).contiguous()
    past = empty_past(config, batch, past_len)
    b, s, p = torch.export.Dim("batch"), torch.export.Dim("sequence"), torch.export.Dim("past")
    dynamic = {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: torch.export.Dim.AUTO},
               "position_ids": {0: b, 1: s}, "past": [{0: b, 2: p} for _ in past]}
    inputs, outputs = io_names(config)
    wrapper = DecoderWithPast(model).eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _eager_attention(model), torch.no_grad(), _quiet():
        try:
            program = torch.onnx.export(wrapper, (ids, mask, positions, past), dynamo=True,
                                        input_names=inputs, output_names=outputs, dynamic_shapes=dynamic,
                                        opset_version=OPSET, optimize=True, external_data=True)
        except Exception as err:  # the exporter raises many kinds; the user needs the one line
            raise ExportError(f"tracing the model to ONNX failed: {type(err).__name__}: "
                              f"{str(err).splitlines()[0] if str(err) else ''}") from err
        program.save(str(path), external_data=True)
    _name_axes(path)
    return path


@contextlib.contextmanager
def _quiet():
    """The exporter prints progress lines ("[torch.onnx] Obtain model graph ...") to stdout and
    warns about its own internals; the export table is this command's output."""
    import io
    import logging

    import warnings

    level = logging.getLogger("torch.onnx").level
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecation notes from inside torch.export and onnxscript
            yield
    finally:
        logging.getLogger("torch.onnx").setLevel(level)


def _cpu_has_vnni() -> bool:
    """Without VNNI, ONNX Runtime's uint8 x int8 kernels can saturate their 16-bit sums; 7-bit
    weights (`reduce_range`) avoid it: on an AVX2-only CPU full-range int8 verified at +7 %
    held-out perplexity against the source, past the format's 2 %."""
    flags = cpu_flags()
    return bool(VNNI_FLAGS & flags) or "avx2" not in flags  # not x86: full range


def quantize_graph(src: Path, dst: Path) -> Path:
    """ONNX Runtime dynamic quantization of `src` into `dst`: int8 MatMul weights (per output
    channel), uint8 activations quantized per tensor at run time."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # it suggests shape-inference pre-processing, which a static-shape model needs
    try:
        quantize_dynamic(str(src), str(dst), op_types_to_quantize=["MatMul"], per_channel=True,
                         weight_type=QuantType.QInt8, use_external_data_format=False,
                         reduce_range=not _cpu_has_vnni())
    finally:
        root.setLevel(level)
    return dst


def _write_config(model: nn.Module, folder: Path, js: dict) -> None:
    """config.json in Llama form for a dense rotary causal model (what Optimum / transformers.js
    look for), else MiniMind's (a classifier's holds its id2label / label2id); plus
    generation_config.json. `use_cache` tells loaders whether the graph takes and returns
    the KV cache (a causal model's does, a classifier's does not); "transformers.js_config"
    is `js` (see `js_config`)."""
    if not_llama_shaped(model.config) is None and not is_classifier_model(model):
        llama_config(model.config, "float32").save_pretrained(folder)
    else:
        model.config.save_pretrained(folder)
    data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    data["use_cache"] = not is_classifier_model(model)  # a classifier's graph has no KV cache
    data["transformers.js_config"] = js
    (folder / "config.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(folder)


def save_graph(src: Path, dst: Path, limit: int = SINGLE_FILE_LIMIT) -> bool:
    """Re-save the traced graph `src` (weights in the exporter's `<src>.data`) as `dst` in the Hub's
    layout: one self-contained file under `limit` bytes, else the weights in EXTERNAL_DATA beside it.
    True when the weights went outside."""
    import onnx

    size = sum(p.stat().st_size for p in src.parent.glob(src.name + "*"))
    graph = onnx.load(str(src))  # with its external weights
    dst.parent.mkdir(parents=True, exist_ok=True)
    external = size >= limit
    if external:
        onnx.save_model(graph, str(dst), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=EXTERNAL_DATA)
        (dst.parent / EXTERNAL_DATA).chmod(0o644)  # onnx writes it owner-only; it is shipped like the graph
    else:
        onnx.save_model(graph, str(dst))
    return external


def js_config(quantize: bool, external: bool) -> dict:
    """config.json's "transformers.js_config": the dtype whose graph this folder holds (without it
    a browser asks for the q8 graph and Node for the fp32 one, and one of them is missing), and
    for a graph with its weights outside, that transformers.js must fetch them (Node's runtime
    finds them beside the graph; a browser's gets only the files it is given)."""
    config: dict = {"dtype": "q8" if quantize else "fp32"}
    if external:
        config["use_external_data_format"] = {"model.onnx": True}
    return config


def write_onnx(model: nn.Module, tokenizer, folder: Path, quantize: bool = False,
               single_file_limit: int = SINGLE_FILE_LIMIT) -> Path:
    """Write the ONNX folder (see the module docstring); returns the folder. The graph is traced
    into a temporary folder beside it and re-saved in the Hub's layout (`save_graph`)."""
    folder.mkdir(parents=True, exist_ok=True)
    trace = export_classifier_graph if is_classifier_model(model) else export_graph
    external = False
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".onnx-trace-") as tmp:
        traced = trace(model, Path(tmp) / "model.onnx")
        if quantize:
            (folder / QUANTIZED_GRAPH).parent.mkdir(parents=True, exist_ok=True)
            quantize_graph(traced, folder / QUANTIZED_GRAPH)
        else:
            external = save_graph(traced, folder / GRAPH, single_file_limit)
    _write_config(model, folder, js_config(quantize, external))
    save_tokenizer(tokenizer, folder)
    return folder

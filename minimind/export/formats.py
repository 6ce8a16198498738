"""The export formats: what each one is, how it is loaded back, and how far it may drift.

A tolerance is stated per format so that verification can tell a format's
expected rounding from a broken export. Greedy decoding is compared with the
source token by token (teacher-forced, so one divergence does not cascade): a
position may pick a different token only where the source itself ranked the
two within `logit_margin` of each other, which is a near-tie the format's
rounding can flip. Held-out perplexity may move by at most `ppl_rel`
(relative). The figures were calibrated on tiny and `small` models trained
briefly; they are loose enough for rounding and tight enough that a wrong
permutation, a dropped tensor or a mis-scaled weight fails.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    logit_margin: float   # a differing greedy token is accepted only if the source's lead was below this
    ppl_rel: float        # |perplexity / source perplexity - 1| must stay at or under this
    why: str              # one line for the model card
    logit_atol: float | None = None  # max |logit - source logit| on the checked positions, where stated


EXACT = Tolerance(1e-4, 1e-4, "float32 weights are stored unchanged: outputs must match the source exactly")
HALF = Tolerance(0.05, 0.01, "16-bit float rounding of the weights (about 3 significant digits)")
BFLOAT = Tolerance(0.3, 0.03, "bfloat16 rounding of the weights (about 2 significant digits)")
INT8 = Tolerance(0.3, 0.03, "8-bit integer weights with a scale per row or per 32-weight block")
NF4 = Tolerance(1.5, 0.25, "4-bit NormalFloat weights (16 levels per 64-weight block)")
ONNX = Tolerance(1e-3, 1e-4, "float32 weights unchanged, run by ONNX Runtime's kernels (float32 rounding "
                 "order only)", logit_atol=1e-3)
ONNX_INT8 = Tolerance(0.5, 0.02, "ONNX Runtime dynamic quantization: int8 MatMul weights per output channel, "
                      "activations quantized to uint8 per tensor at run time")


@dataclass(frozen=True)
class FormatSpec:
    name: str
    summary: str          # one line for tables and the model card
    tolerance: Tolerance
    load_hint: str        # how a user loads it (shown in the model card)
    dense_only: bool = False
    holds_lstm: bool = False  # carries an LSTM model (minimind/lstm.py): only the MiniMind folder forms do


_AUTO = "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
_ONNX = ("# transformers.js (Node or browser) loads the folder with default options: its dtype is in config.json\n"
         "#   const model = await AutoModelForCausalLM.from_pretrained(FOLDER);\n"
         "# ONNX Runtime: the graph's inputs/outputs are Optimum's Llama decoder-with-past layout (see below)\n"
         "import onnxruntime\n"
         "graph = FOLDER + '/onnx/model.onnx'  # onnx-int8: '/onnx/model_quantized.onnx'\n"
         "session = onnxruntime.InferenceSession(graph, providers=['CPUExecutionProvider'])\n"
         "# or, with the KV cache handled for you:\n"
         "from minimind.export.onnx_runner import OnnxCausalLM\n"
         "print(OnnxCausalLM(FOLDER).generate_greedy([0, 42], 32))")

FORMATS: dict[str, FormatSpec] = {spec.name: spec for spec in [
    FormatSpec("hf", "MiniMind Hugging Face folder (safetensors); it loads only after `import minimind` "
               "(MiniMind Studio's code on the Python path); `llama` is the portable one", EXACT,
               "import minimind  # registers the MiniMind classes: without it transformers cannot load this folder\n"
               + _AUTO + "model = AutoModelForCausalLM.from_pretrained(FOLDER)\n"
               "tokenizer = AutoTokenizer.from_pretrained(FOLDER)\n"
               "# no MiniMind at hand? export `llama` instead: a stock LlamaForCausalLM folder", holds_lstm=True),
    FormatSpec("llama", "stock LlamaForCausalLM folder (safetensors), no MiniMind code needed", EXACT,
               _AUTO + "model = AutoModelForCausalLM.from_pretrained(FOLDER)  # a LlamaForCausalLM\n"
               "tokenizer = AutoTokenizer.from_pretrained(FOLDER)", dense_only=True),
    FormatSpec("merged", "LoRA adapter merged into its base (peft merge_and_unload)", EXACT,
               _AUTO + "model = AutoModelForCausalLM.from_pretrained(FOLDER)\n"
               "tokenizer = AutoTokenizer.from_pretrained(FOLDER)", holds_lstm=True),
    FormatSpec("int8", "torchao int8 weight-only (per-row scales), safetensors", INT8,
               _AUTO + "# needs torchao; the quantization config is in config.json\n"
               "model = AutoModelForCausalLM.from_pretrained(FOLDER, device_map='cpu')\n"
               "tokenizer = AutoTokenizer.from_pretrained(FOLDER)"),
    FormatSpec("bnb-8bit", "bitsandbytes LLM.int8 weights, safetensors", INT8,
               _AUTO + "# needs bitsandbytes; the quantization config is in config.json\n"
               "model = AutoModelForCausalLM.from_pretrained(FOLDER, device_map='cpu')\n"
               "tokenizer = AutoTokenizer.from_pretrained(FOLDER)"),
    FormatSpec("bnb-nf4", "bitsandbytes 4-bit NormalFloat weights, safetensors", NF4,
               _AUTO + "# needs bitsandbytes; the quantization config is in config.json\n"
               "model = AutoModelForCausalLM.from_pretrained(FOLDER, device_map='cpu')\n"
               "tokenizer = AutoTokenizer.from_pretrained(FOLDER)"),
    FormatSpec("gguf-f16", "llama-architecture GGUF, float16 weights, tokenizer embedded", HALF,
               "llama-cli -m FILE -cnv          # llama.cpp (chat template is in the file)\n"
               "# or: Llama(model_path='FILE') with llama-cpp-python; or transformers:\n"
               + _AUTO + "model = AutoModelForCausalLM.from_pretrained(FOLDER, gguf_file='FILE')",
               dense_only=True),
    FormatSpec("gguf-q8_0", "llama-architecture GGUF, Q8_0 weights, tokenizer embedded", INT8,
               "llama-cli -m FILE -cnv          # llama.cpp (chat template is in the file)\n"
               "# or: Llama(model_path='FILE') with llama-cpp-python; or transformers:\n"
               + _AUTO + "model = AutoModelForCausalLM.from_pretrained(FOLDER, gguf_file='FILE')",
               dense_only=True),
    FormatSpec("onnx", "ONNX decoder-with-past graph (float32, KV cache in/out) + tokenizer, for ONNX Runtime",
               ONNX, _ONNX),
    FormatSpec("onnx-int8", "ONNX decoder-with-past graph, ONNX Runtime dynamic int8 quantization (MatMul)",
               ONNX_INT8, _ONNX),
]}

DTYPES = ("float32", "bfloat16", "float16")


def lstm_refusal(fmt: str, config) -> str | None:
    """Why `fmt` cannot hold this model when it is an LSTM (None otherwise): the Llama and GGUF
    formats have no recurrent layers, and the int8 / bitsandbytes writers quantize a
    transformer's linear layers, not nn.LSTM's gate matrices."""
    if getattr(config, "model_type", None) != "minimind-lstm" or FORMATS[fmt].holds_lstm:
        return None
    keeps = ", ".join(name for name, spec in FORMATS.items() if spec.holds_lstm)
    return (f"format {fmt!r} cannot hold an LSTM model (it is written for transformer layers); "
            f"export an LSTM as {keeps} instead")


def tolerance_for(fmt: str, dtype: str | None) -> Tolerance:
    """A 16-bit cast of an otherwise exact format is judged as that cast."""
    spec = FORMATS[fmt]
    if spec.tolerance is EXACT and dtype == "float16":
        return HALF
    if spec.tolerance is EXACT and dtype == "bfloat16":
        return BFLOAT
    return spec.tolerance

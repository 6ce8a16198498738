"""Export a MiniMind checkpoint to formats that run elsewhere, each one reloaded and verified.

    from minimind.export import export, export_many, FORMATS
    result = export("runs/x/checkpoints/step-1000", "gguf-q8_0", "exports/gguf-q8_0",
                    eval_text=open("heldout.txt").read())
    print(result.size_bytes, result.perplexity, result.delta)

Formats (see `formats.FORMATS`): hf, llama, merged, int8, bnb-8bit, bnb-nf4,
gguf-f16, gguf-q8_0, onnx, onnx-int8. One module per job: `hf`, `llama`, `merged`, `quantized`,
`gguf` and `onnx` write; `verify` reloads and compares; `card` writes the README;
`exporter` runs the sequence.
"""

from .exporter import ExportResult, applicable_formats, export, export_many, export_one
from .formats import DTYPES, FORMATS, FormatSpec, Tolerance
from .heldout import default_eval_text, model_name
from .source import Source, load_source

__all__ = ["DTYPES", "FORMATS", "ExportResult", "FormatSpec", "Source", "Tolerance", "applicable_formats",
           "default_eval_text",
           "export", "export_many", "export_one", "load_source", "model_name"]

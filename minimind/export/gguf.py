"""`gguf-f16`, `gguf-q8_0`: a GGUF file for llama.cpp (and Ollama, LM Studio, ...), in the
architecture llama.cpp runs the model's family as.

The model half (architecture, shape keys, weights under llama.cpp's names, families and their
rotary layouts) is `minimind.gguf_model`, which the engine's llama.cpp draft writes too; this
module embeds the tokenizer (see `gguf_vocab`: byte-level or sentencepiece style, with the name of
its pre-tokenizer), its special tokens and its chat template.

Refused, each with the reason: options the target architecture does not have (biases on a Llama,
q/k norms outside Qwen3), a sliding window shorter than the context (llama.cpp runs Mistral as
`llama`, with full attention), and a tokenizer llama.cpp could not run.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ExportError
from ..gguf_model import architecture_refusal, gguf_file_name, write_model_file, write_vocab
from .gguf_vocab import vocab_metadata, vocab_refusal
from .llama import require_dense

GGUF_TYPES = ("f16", "q8_0")


def plain_chat_template(template: str | None) -> str | None:
    """The chat template without transformers' {% generation %} markers, which other Jinja engines
    reject; they only tag assistant tokens for training and render nothing."""
    if not template:
        return template
    return re.sub(r"\{%-?\s*(end)?generation\s*-?%\}", "", template)


def gguf_refusal(config, tokenizer) -> str | None:
    """Why a GGUF cannot hold this model (None when it can): its family's options or its tokenizer."""
    return architecture_refusal(config) or vocab_refusal(tokenizer)


def _write_special_tokens(writer, tokenizer, vocab: dict) -> None:
    for setter, token_id in ((writer.add_bos_token_id, tokenizer.bos_token_id),
                             (writer.add_eos_token_id, tokenizer.eos_token_id),
                             (writer.add_pad_token_id, tokenizer.pad_token_id)):
        if token_id is not None:
            setter(token_id)
    if vocab["model"] == "llama" and tokenizer.unk_token_id is not None:
        writer.add_unk_token_id(tokenizer.unk_token_id)
    vocab_ids = tokenizer.get_vocab()
    turn_end = next((vocab_ids[t] for t in ("<|im_end|>", "<|eot_id|>") if t in vocab_ids), None)
    if turn_end is not None:
        writer.add_eot_token_id(turn_end)  # a chat turn ends here


def write_gguf(model, tokenizer, out_dir: Path, qtype: str, name: str = "MiniMind", stem: str = "model") -> Path:
    """Write `out_dir/<stem>-<qtype>.gguf` (qtype "f16" or "q8_0") for a dense model."""
    require_dense(model.config, f"gguf-{qtype}")
    reason = gguf_refusal(model.config, tokenizer)
    if reason:
        raise ExportError(f"{reason}; export hf or llama instead")
    vocab = vocab_metadata(tokenizer, model.config.vocab_size)

    def write_tokenizer(writer) -> None:
        write_vocab(writer, vocab)
        _write_special_tokens(writer, tokenizer, vocab)
        template = plain_chat_template(getattr(tokenizer, "chat_template", None))
        if template:
            writer.add_chat_template(template)

    return write_model_file(model, out_dir / gguf_file_name(qtype, stem), qtype, name, write_tokenizer)



"""Tiny models of the Hub families an import takes, built here with transformers' own classes and
tokenizers trained on the spot (nothing is downloaded): byte-level BPE as Llama 3, Qwen and SmolLM2
ship it, and sentencepiece-style byte-fallback BPE as Llama 2, TinyLlama and Mistral do."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from helpers import SAMPLE_TEXTS

QWEN_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' "
    "+ m['content'] + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] + ' [/INST]' }}"
    "{% elif m['role'] == 'assistant' %}{{ m['content'] + eos_token }}{% endif %}{% endfor %}")

SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=256, initializer_range=0.1, rms_norm_eps=1e-6)

# name -> (config class, model class, config overrides, tokenizer style, license as its README states it)
FAMILY_MODELS = {
    "llama": (LlamaConfig, LlamaForCausalLM, dict(
        tie_word_embeddings=False, rope_parameters={
            "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 64}), "llama3", "llama3.2"),
    # SmolLM2's shape: tied, ChatML tokens, GPT-2's splitting with every digit apart
    # (a context of 1,024: the page's chat asks for answers of up to 256 tokens)
    "llama-smollm": (LlamaConfig, LlamaForCausalLM, dict(tie_word_embeddings=True, max_position_embeddings=1024),
                     "smollm", "apache-2.0"),
    "llama-sentencepiece": (LlamaConfig, LlamaForCausalLM, dict(tie_word_embeddings=False), "sentencepiece",
                            "apache-2.0"),
    "mistral": (MistralConfig, MistralForCausalLM, dict(tie_word_embeddings=False, sliding_window=24),
                "sentencepiece", "apache-2.0"),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM, dict(tie_word_embeddings=True), "qwen", "apache-2.0"),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM, dict(tie_word_embeddings=True, head_dim=32), "qwen", "apache-2.0"),
}


# the pre-tokenizer regexes as Qwen2.5's and Llama 3's tokenizer.json files state them
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
              r"|\s+(?!\S)|\s+")
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


# text whose pieces differ between the ways of splitting (punctuation glued to a word, runs of digits,
# upper-case contractions), repeated so that the vocabulary learns tokens across those boundaries
SPLIT_TEXTS = ["(the cat) (the dog) \"the end\" .The 2024 12345 678901 DON'T WE'LL (the 2024 12345)"] * 40


def byte_level_tokenizer(kind: str, vocab_size: int = 420) -> PreTrainedTokenizerFast:
    """Byte-level BPE as each family ships it: ChatML tokens with Qwen's splitting and NFC ("qwen"),
    with GPT-2's splitting and digits apart ("smollm", SmolLM2) or GPT-2's alone ("gpt2"); or Llama 3's
    header tokens, splitting, BOS and whole-word lookup ("llama3")."""
    chatml = kind != "llama3"
    special = (["<|endoftext|>", "<|im_start|>", "<|im_end|>"] if chatml else
               ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"])
    core = Tokenizer(models.BPE(ignore_merges=kind == "llama3"))
    split = {"qwen": QWEN_SPLIT, "llama3": LLAMA3_SPLIT}.get(kind)
    if split is not None:
        core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), behavior="isolated"),
                                                      pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                               use_regex=False)])
    else:
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        core.pre_tokenizer = byte_level if kind == "gpt2" else pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True), byte_level])
    if kind == "qwen":
        core.normalizer = normalizers.NFC()
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(SAMPLE_TEXTS + SPLIT_TEXTS, trainer=trainer)
    if chatml:
        return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                       chat_template=QWEN_TEMPLATE, clean_up_tokenization_spaces=False)
    bos = core.token_to_id("<|begin_of_text|>")
    core.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                        special_tokens=[("<|begin_of_text|>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                   chat_template=LLAMA3_TEMPLATE, clean_up_tokenization_spaces=False)


def sentencepiece_tokenizer(vocab_size: int = 420) -> PreTrainedTokenizerFast:
    """Llama 2's layout: ▁ for a space, whole pieces, <0x00>..<0xFF> for the bytes of anything else,
    <unk> <s> </s> first and a BOS added to every text."""
    core = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    core.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    # the 60 commonest characters, ties broken by the character: the trainer's own `limit_alphabet` breaks
    # ties in a hash map's order, so each process trained another tokenizer (and a GGUF export of one in
    # three met a float16 near-tie in its greedy check)
    counts = Counter("".join(SAMPLE_TEXTS).replace(" ", "▁"))
    alphabet = sorted(counts, key=lambda c: (-counts[c], c))[:60]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=alphabet, limit_alphabet=len(alphabet), show_progress=False)
    core.train_from_iterator(SAMPLE_TEXTS, trainer=trainer)
    data = json.loads(core.to_str())
    specials = ["<unk>", "<s>", "</s>"]
    rest = [t for t, _ in sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1]) if t not in specials]
    order = specials + [f"<0x{i:02X}>" for i in range(256)] + rest
    data["model"]["vocab"] = {token: index for index, token in enumerate(order)}
    for added in data["added_tokens"]:
        added["id"] = data["model"]["vocab"][added["content"]]
    core = Tokenizer.from_str(json.dumps(data))
    core.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                      decoders.Strip(" ", 1, 0)])
    core.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   chat_template=MISTRAL_TEMPLATE, clean_up_tokenization_spaces=False)


def tokenizer_for(style: str) -> PreTrainedTokenizerFast:
    return sentencepiece_tokenizer() if style == "sentencepiece" else byte_level_tokenizer(style)


def build_family_model(name: str, folder: Path, seed: int = 0, shard: bool = False, **config):
    """A random model of family `name` with its tokenizer, generation config, README and LICENSE, saved in
    `folder` as the Hub would hold it; `config` overrides its config's fields. Returns (model in fp32 eval
    mode, tokenizer)."""
    config_class, model_class, overrides, style, license_id = FAMILY_MODELS[name]
    overrides = {**overrides, **config}
    tokenizer = tokenizer_for(style)
    vocab = len(tokenizer) + 12                               # rows past the tokenizer, as Qwen pads its matrix
    ids = {k: getattr(tokenizer, f"{k}_token_id") for k in ("bos", "eos", "pad")}
    config = config_class(vocab_size=vocab, bos_token_id=ids["bos"], eos_token_id=ids["eos"],
                          pad_token_id=ids["pad"], **{**SHAPE, **overrides})
    torch.manual_seed(seed)
    model = model_class(config).eval()
    with torch.no_grad():  # norms, biases and q/k norms away from their initial 1s and 0s: their placement counts
        for param_name, param in model.named_parameters():
            if "norm" in param_name:
                param.uniform_(0.5, 1.5)
            elif param_name.endswith("bias"):
                param.normal_(0.0, 0.5)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, max_shard_size="60KB" if shard else "5GB")
    tokenizer.save_pretrained(folder)
    end = [ids["eos"]] + ([tokenizer.convert_tokens_to_ids("<|end_of_text|>")] if style == "llama3" else [])
    GenerationConfig(bos_token_id=ids["bos"], eos_token_id=end if len(end) > 1 else end[0],
                     do_sample=True, temperature=0.6, top_p=0.9).save_pretrained(folder)
    (folder / "README.md").write_text(f"---\nlicense: {license_id}\nlibrary_name: transformers\n---\n\n# tiny {name}\n")
    (folder / "LICENSE").write_text(f"{license_id} license text (test copy)\n")
    return model, tokenizer


def imported_family(name: str, root: Path) -> Path:
    """A tiny model of family `name` built in root/source and imported into root/model (returned)."""
    from minimind.hub import import_folder

    build_family_model(name, root / "source")
    import_folder(root / "source", root / "model")
    return root / "model"

"""Prove an export: reload it the way a user would, then compare it with the source.

Three checks, each reported and any of them failing the export:
1. the tokenizer that ships with the export encodes the held-out text to the
   same ids as the source tokenizer (it is embedded anew in a GGUF);
2. greedy decoding from a fixed prompt picks the source's tokens, except at
   near-ties the format's rounding can flip (see `formats.Tolerance`);
3. held-out perplexity stays within the format's stated relative delta.

Formats that state `logit_atol` (ONNX) also have their logits compared with
the source's, on a window of the held-out text and on the greedy positions.
An export reloaded as a runner with its own KV cache (`generate_greedy`, the
ONNX runner) also decodes the prompt free-running, one token per call through
its cache inputs/outputs, and must agree with the source up to the first
near-tie (the same rule as above).

Greedy tokens are compared teacher-forced: the export scores the source's own
greedy continuation, so the length of the agreeing prefix equals how many
tokens a free-running greedy decode of the export shares with the source.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..checkpoint import check_model_folder
from ..classifier import class_logits
from ..data.tokens import classify_ids
from ..errors import ExportError
from ..evaluate import EvalResult, evaluate_documents
from .formats import Tolerance
from .gguf_vocab import PRE_TOKENIZERS, splitter
from .onnx_runner import GRAPH, QUANTIZED_GRAPH, load_onnx
from .runner import forced_logits, greedy, model_logits, uncached

PROMPT_TOKENS = 8    # prompt = end-of-text + the first tokens of the held-out text
GREEDY_TOKENS = 32   # greedy tokens compared after the prompt
EVAL_CONTEXT = 512   # window of the perplexity evaluation (same for source and export)
WINDOW_TOKENS = 64   # held-out tokens whose logits are compared where a format states logit_atol

# Used when no held-out text is given: public-domain lines in both of our corpora's languages.
DEFAULT_EVAL_TEXT = [
    "床前明月光，疑是地上霜。舉頭望明月，低頭思故鄉。",
    "白日依山盡，黃河入海流。欲窮千里目，更上一層樓。",
    "國破山河在，城春草木深。感時花濺淚，恨別鳥驚心。烽火連三月，家書抵萬金。白頭搔更短，渾欲不勝簪。",
    "千山鳥飛絕，萬徑人蹤滅。孤舟蓑笠翁，獨釣寒江雪。",
    "Shall I compare thee to a summer's day? Thou art more lovely and more temperate: "
    "Rough winds do shake the darling buds of May, And summer's lease hath all too short a date.",
    "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer "
    "The slings and arrows of outrageous fortune, Or to take arms against a sea of troubles.",
]


@dataclass
class Reference:
    """What the source model does on the held-out text and the fixed prompt."""

    documents: list[str]
    document_ids: list[list[int]]  # the documents as the source tokenizer splits them
    prompt: list[int]
    greedy: list[int]            # the source's greedy continuation of `prompt`
    logits: torch.Tensor         # (GREEDY_TOKENS, vocab): source logits that chose `greedy`
    eval: EvalResult
    context: int
    window: list[int] = field(default_factory=list)  # end-of-text + the first held-out tokens
    window_logits: torch.Tensor | None = None         # (len(window), vocab) source logits on `window`


@dataclass
class Verification:
    perplexity: float
    source_perplexity: float
    delta: float                 # perplexity / source perplexity - 1
    greedy_match: int            # leading greedy tokens identical to the source's
    greedy_agree: int            # positions (of `greedy_total`) where the export picks the source's token
    greedy_total: int
    tokenizer_ok: bool
    problems: list[str] = field(default_factory=list)
    cached_greedy_match: int | None = None   # free-running greedy through the export's own KV cache
    logit_max_diff: float | None = None      # max |logit - source logit| (formats stating logit_atol)
    labels_agree: int | None = None          # a classifier: held-out texts given the source's label
    labels_total: int | None = None
    accuracy: float | None = None            # a classifier with labelled held-out texts: the export's
    source_accuracy: float | None = None     # accuracy on them, and the source's

    @property
    def passed(self) -> bool:
        return not self.problems


def as_documents(text: str | list[str] | None) -> list[str]:
    docs = DEFAULT_EVAL_TEXT if text is None else [text] if isinstance(text, str) else list(text)
    docs = [d for d in docs if d.strip()]
    if not docs:
        raise ExportError("the held-out text for verification is empty")
    return docs


def make_reference(model, tokenizer, text: str | list[str] | None = None) -> Reference:
    """Score the source once: held-out perplexity, and its greedy answer to the fixed prompt."""
    documents = as_documents(text)
    context = min(getattr(model.config, "max_position_embeddings", EVAL_CONTEXT), EVAL_CONTEXT)
    document_ids = tokenizer(documents, add_special_tokens=False)["input_ids"]
    prompt = [tokenizer.eos_token_id] + document_ids[0][:PROMPT_TOKENS]
    logits_of = model_logits(model)
    picks = greedy(uncached(logits_of), prompt, GREEDY_TOKENS)
    logits = forced_logits(logits_of, prompt, picks)
    result = evaluate_documents(model, tokenizer, documents, context=context)
    window = ([tokenizer.eos_token_id] + document_ids[0])[:min(WINDOW_TOKENS, context)]
    window_logits = logits_of(window).float().cpu()
    return Reference(documents, document_ids, prompt, picks, logits, result, context, window, window_logits)


def compare_greedy(reference: Reference, logits: torch.Tensor, tolerance: Tolerance) -> tuple[int, int, list[str]]:
    """(matching prefix, positions agreeing, problems) of an export's forced logits vs the source's."""
    picks = logits.argmax(-1).tolist()
    prefix = next((i for i, (a, b) in enumerate(zip(picks, reference.greedy)) if a != b), len(picks))
    agree = sum(a == b for a, b in zip(picks, reference.greedy))
    problems = []
    for pos, (got, want) in enumerate(zip(picks, reference.greedy)):
        if got == want:
            continue
        lead = float(reference.logits[pos, want] - reference.logits[pos, got])
        if lead > tolerance.logit_margin:
            problems.append(f"greedy token {pos + 1} is {got} where the source picks {want}, which it "
                            f"preferred by {lead:.3g} logits (the format allows near-ties under "
                            f"{tolerance.logit_margin:g})")
            break
    return prefix, agree, problems


@dataclass
class ClassifierReference:
    """What a source classifier does on the held-out texts: each text encoded as the classifier
    reads it (`minimind.data.tokens.classify_ids`) and the class logits it gives."""

    documents: list[str]
    document_ids: list[list[int]]
    rows: list[list[int]]
    logits: torch.Tensor        # (len(rows), num_labels)
    pad_id: int
    labels: list[int] | None = None   # the true class id of each text (-1: a class the model lacks), if known

    def accuracy(self, logits: torch.Tensor) -> float | None:
        """Share of the held-out texts whose top class is their true label (None without labels)."""
        if not self.labels:
            return None
        return sum(int(p) == y for p, y in zip(logits.argmax(-1).tolist(), self.labels)) / len(self.labels)


def make_classifier_reference(model, tokenizer, text: str | list[str] | None = None,
                              labels: list[str] | None = None) -> ClassifierReference:
    """Score the source classifier once on the held-out texts (`labels`: their true classes, by name,
    one per text, for the accuracy of the source and of each export)."""
    if labels is not None:
        if text is None or isinstance(text, str) or len(labels) != len(text) or any(not t.strip() for t in text):
            raise ExportError("labelled held-out texts need one label per non-empty text")
        label2id = {str(k): int(v) for k, v in (model.config.label2id or {}).items()}
        labels = [label2id.get(str(label), -1) for label in labels]
    documents = as_documents(text)
    rows = classify_ids(tokenizer, documents, model.config.max_position_embeddings)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    document_ids = tokenizer(documents, add_special_tokens=False)["input_ids"]
    return ClassifierReference(documents, document_ids, rows, class_logits(model, rows, pad_id, batch_size=16), pad_id,
                               labels)


def check_classifier(model, tokenizer, reference: ClassifierReference, tolerance: Tolerance) -> Verification:
    """A classifier export gives the source's label to every held-out text, except where the
    source's lead of that label over the export's pick is a near-tie under `logit_margin`; formats
    stating `logit_atol` also keep every class logit within it."""
    problems = []
    tokenizer_ok = tokenizer(reference.documents, add_special_tokens=False)["input_ids"] == reference.document_ids
    if not tokenizer_ok:
        problems.append("the exported tokenizer splits the held-out text differently from the source")
    logits = class_logits(model, reference.rows, reference.pad_id, batch_size=16)
    picks, wanted = logits.argmax(-1).tolist(), reference.logits.argmax(-1).tolist()
    agree = sum(a == b for a, b in zip(picks, wanted))
    for i, (got, want) in enumerate(zip(picks, wanted)):
        lead = float(reference.logits[i, want] - reference.logits[i, got])
        if got != want and lead > tolerance.logit_margin:
            problems.append(f"held-out text {i + 1} gets class {got} where the source gives {want}, which it "
                            f"preferred by {lead:.3g} logits (the format allows near-ties under "
                            f"{tolerance.logit_margin:g})")
            break
    max_diff = None
    if tolerance.logit_atol is not None:
        max_diff = float((logits - reference.logits).abs().max())
        if not max_diff <= tolerance.logit_atol:
            problems.append(f"class logits differ from the source's by up to {max_diff:.3g} "
                            f"(the format allows {tolerance.logit_atol:g})")
    return Verification(None, None, None, 0, 0, 0, tokenizer_ok, problems, None, max_diff, agree, len(picks),
                        reference.accuracy(logits), reference.accuracy(reference.logits))


def check(model, tokenizer, reference, tolerance: Tolerance) -> Verification:
    """Compare a reloaded export with the source; `problems` lists every failed check."""
    if isinstance(reference, ClassifierReference):
        return check_classifier(model, tokenizer, reference, tolerance)
    problems = []
    tokenizer_ok = tokenizer(reference.documents, add_special_tokens=False)["input_ids"] == reference.document_ids
    if not tokenizer_ok:
        problems.append("the exported tokenizer splits the held-out text differently from the source")
    with warnings.catch_warnings():  # bitsandbytes warns on every matmul that it casts to float16
        warnings.simplefilter("ignore", UserWarning)
        logits = forced_logits(model_logits(model), reference.prompt, reference.greedy)
        result = evaluate_documents(model, tokenizer, reference.documents, context=reference.context)
    prefix, agree, greedy_problems = compare_greedy(reference, logits, tolerance)
    problems += greedy_problems
    delta = result.perplexity / reference.eval.perplexity - 1
    if not abs(delta) <= tolerance.ppl_rel:  # also catches NaN
        problems.append(f"held-out perplexity {result.perplexity:.4g} vs {reference.eval.perplexity:.4g} "
                        f"for the source ({delta:+.2%}; the format allows ±{tolerance.ppl_rel:.2%})")
    max_diff = None
    if tolerance.logit_atol is not None:
        max_diff, logit_problems = compare_logits(model, reference, logits, tolerance.logit_atol)
        problems += logit_problems
    cached = None
    if hasattr(model, "generate_greedy"):
        cached, cached_problems = compare_cached_greedy(model, reference, tolerance)
        problems += cached_problems
    return Verification(result.perplexity, reference.eval.perplexity, delta, prefix, agree,
                        len(reference.greedy), tokenizer_ok, problems, cached, max_diff)


def compare_logits(model, reference: Reference, forced: torch.Tensor, atol: float) -> tuple[float, list[str]]:
    """(max |logit difference|, problems) on the held-out window and the greedy positions."""
    diffs = [float((forced - reference.logits).abs().max())]
    if reference.window_logits is not None and reference.window:
        window_logits = model_logits(model)(reference.window).float().cpu()
        diffs.append(float((window_logits - reference.window_logits).abs().max()))
    worst = max(diffs)
    if not worst <= atol:  # also catches NaN
        return worst, [f"logits differ from the source's by up to {worst:.3g} (the format allows {atol:g})"]
    return worst, []


def compare_cached_greedy(model, reference: Reference, tolerance: Tolerance) -> tuple[int, list[str]]:
    """(leading tokens identical, problems) of the export's own free-running greedy decode, which
    feeds its KV cache outputs back step by step; the first divergence must be a near-tie."""
    picks = model.generate_greedy(reference.prompt, len(reference.greedy))
    prefix = next((i for i, (a, b) in enumerate(zip(picks, reference.greedy)) if a != b), len(picks))
    if prefix == len(reference.greedy):
        return prefix, []
    got, want = picks[prefix], reference.greedy[prefix]
    lead = float(reference.logits[prefix, want] - reference.logits[prefix, got])
    if lead > tolerance.logit_margin:
        return prefix, [f"decoding through the KV cache, greedy token {prefix + 1} is {got} where the source "
                        f"picks {want}, which it preferred by {lead:.3g} logits (the format allows near-ties "
                        f"under {tolerance.logit_margin:g})"]
    return prefix, []


def load_export(fmt: str, path: Path):
    """(model, tokenizer) reloaded with each format's natural loader, safetensors/GGUF only."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if fmt.startswith("onnx"):  # the graph transformers.js loads for the folder's dtype
        return load_onnx(path, QUANTIZED_GRAPH if fmt == "onnx-int8" else GRAPH), AutoTokenizer.from_pretrained(path)
    if fmt.startswith("gguf"):
        return _load_gguf(path)
    check_model_folder(path)
    kwargs = {"device_map": "cpu"} if fmt in ("int8", "bnb-8bit", "bnb-nf4") else {}
    model = AutoModelForCausalLM.from_pretrained(path, use_safetensors=True, trust_remote_code=False, **kwargs)
    return model.eval(), AutoTokenizer.from_pretrained(path)


def _load_gguf(path: Path):
    """A GGUF read by transformers' own GGUF loader, told the few things it does not read that
    llama.cpp does: the head size (`attention.key_length`), linear rotary scaling, Llama 3's
    rotary factors (`rope_freqs`), and the splitting of a pre-tokenizer name it has no regex for."""
    import gguf
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS

    reader = gguf.GGUFReader(path)
    field = lambda key: None if reader.get_field(key) is None else reader.get_field(key).contents()  # noqa: E731
    arch = field("general.architecture")
    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    if field(f"{arch}.attention.key_length") is not None:
        config.head_dim = int(field(f"{arch}.attention.key_length"))
    if field(f"{arch}.rope.scaling.type") == "linear":
        config.rope_parameters = {"rope_type": "linear", "rope_theta": config.rope_parameters["rope_theta"],
                                  "factor": float(field(f"{arch}.rope.scaling.factor"))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the rope_freqs tensor, which transformers has no parameter for
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, config=config,
                                                     dtype=torch.float32)
    factors = next((t for t in reader.tensors if t.name == "rope_freqs.weight"), None)
    if factors is not None:
        rotary = model.model.rotary_emb
        rotary.inv_freq = rotary.inv_freq / torch.from_numpy(np.array(factors.data, dtype=np.float32))
        rotary.original_inv_freq = rotary.inv_freq
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    pre = field("tokenizer.ggml.pre")
    if pre in PRE_TOKENIZERS and pre not in GGUF_PRE_TOKENIZER_SPLITS and pre != "gpt-2":
        tokenizer.backend_tokenizer.pre_tokenizer = splitter(pre)
    return model.eval(), tokenizer

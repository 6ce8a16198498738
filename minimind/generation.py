"""Chat and completion as streams of text, with sampling parameters checked at the door.

`chat(model, tokenizer, messages, params)` applies the tokenizer's chat template
(ChatML, with the assistant prompt opened), drops the oldest turns when the
conversation no longer fits the context, and returns a `Generation`: an
iterator of text pieces as the model writes them. It stops at end of turn
(<|im_end|>), end of text, a stop string, or `max_new_tokens`. A piece never
ends in half a UTF-8 character (byte-level tokens can split one) and never
holds the start of a stop string that might still complete. After (or during)
iteration the `Generation` tells the token counts, why it finished, and how
many turns were dropped -- what an API `usage` field or a chat UI needs.

`complete(model, tokenizer, prompt, params)` does the same for plain text.
Both decode through the model's inference engine (minimind.inference) unless beam
search is asked for; its sampler never lets the text become invalid UTF-8.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import torch

from .chat_format import encode_chat
from .errors import SamplingError
from .inference import Engine, Sampler, engine_for, guard_for

ROLES = ("system", "user", "assistant")
END_TOKENS = ("<|im_end|>", "<|endoftext|>")      # end of an answer / of a document
MAX_STOP_STRINGS = 4
MAX_BEAMS = 16
MIN_PENALTY = 0.01                               # dividing logits by less overflows them
GREEDY_BELOW = 1e-4                              # a temperature under this samples as 0 (greedy) does
REPLACEMENT = "\ufffd"                           # what a decoder prints for incomplete UTF-8


@dataclass(frozen=True)
class SamplingParams:
    """How to pick tokens. Every field is checked on construction (SamplingError)."""

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
        _number("temperature", self.temperature, low=0.0, high=2.0)
        _integer("top_k", self.top_k, low=0)
        _number("top_p", self.top_p, low=0.0, high=1.0, low_open=True)
        _number("repetition_penalty", self.repetition_penalty, low=MIN_PENALTY, high=10.0)
        _integer("max_new_tokens", self.max_new_tokens, low=1)
        if self.seed is not None:
            _integer("seed", self.seed, low=0, high=2**63 - 1)
        _integer("num_beams", self.num_beams, low=1, high=MAX_BEAMS)
        if self.num_beams > 1 and self.temperature > 0:
            raise _bad("num_beams", "num_beams > 1 is beam search, which is deterministic: set temperature "
                                "to 0 for beam search, or num_beams to 1 to sample")
        if not isinstance(self.stop, tuple) or not all(isinstance(s, str) for s in self.stop):
            raise _bad("stop", "stop must be a string or a list of strings")
        if len(self.stop) > MAX_STOP_STRINGS:
            raise _bad("stop", f"stop takes at most {MAX_STOP_STRINGS} strings, got {len(self.stop)}")
        if any(not s for s in self.stop):
            raise _bad("stop", "stop strings must not be empty")

    @classmethod
    def from_model(cls, folder: str | Path | None, **overrides) -> "SamplingParams":
        """The defaults a model was saved with (its generation_config.json, or its base's for a LoRA
        adapter), then `overrides`; the class defaults where the folder says nothing."""
        return cls(**{**_saved_defaults(folder), **overrides})

    def replace(self, **changes) -> "SamplingParams":
        """A copy with some fields changed (checked again)."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise SamplingError(f"unknown sampling parameter(s): {', '.join(sorted(unknown))}; "
                                f"known: {', '.join(f.name for f in fields(self))}")
        return replace(self, **changes)

    def with_text_values(self, pairs: Mapping[str, str]) -> "SamplingParams":
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
        raise _bad(name, f"{name} must be a {'number' if kind.startswith('float') else 'whole number'}, "
                            f"got {text!r}") from None


def _bad(param: str, message: str) -> SamplingError:
    """A SamplingError that also names the field (`.param`), for faces that point at it."""
    err = SamplingError(message)
    err.param = param
    return err


def _number(name, value, low, high, low_open=False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad(name, f"{name} must be a number, got {value!r}")
    if value < low or value > high or (low_open and value == low):
        bracket = "(" if low_open else "["
        raise _bad(name, f"{name} must be in {bracket}{low:g}, {high:g}], got {value:g}")


def _integer(name, value, low, high=None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(name, f"{name} must be a whole number, got {value!r}")
    if value < low or (high is not None and value > high):
        limit = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise _bad(name, f"{name} must be {limit}, got {value}")


# ---------------------------------------------------------------- text assembly

class TextStream:
    """Turns token ids into text pieces that are safe to show.

    Decoding the tokens since the last clean boundary and holding the text back
    while it ends in U+FFFD keeps multi-byte characters whole (byte-level BPE
    decodes a suffix of tokens to the suffix of the text once the cut is at a
    character boundary). Text that could be the start of a stop string is held
    until it either completes the stop string (generation ends, the stop string is
    not shown) or stops matching.
    """

    def __init__(self, tokenizer, stop: Sequence[str] = ()):
        self.tokenizer = tokenizer
        self.stop = tuple(stop)
        self.pending: list[int] = []   # ids not yet decoded to a clean boundary
        self.text = ""                 # clean text so far (shown or held back)
        self.shown = 0                 # characters of `text` already handed out
        self.stopped = False           # a stop string was found

    def push(self, token: int) -> str:
        """Add one token; returns the text now safe to show (maybe "")."""
        self.pending.append(token)
        decoded = self.tokenizer.decode(self.pending, skip_special_tokens=True)
        if decoded.endswith(REPLACEMENT):
            return ""
        self.text += decoded
        self.pending = []
        return self._release(final=False)

    def finish(self) -> str:
        """End of generation: whatever is left (an incomplete character stays as U+FFFD)."""
        if self.pending and not self.stopped:
            self.text += self.tokenizer.decode(self.pending, skip_special_tokens=True)
            self.pending = []
        return self._release(final=True)

    def _release(self, final: bool) -> str:
        if self.stopped:
            return ""
        tail = self.text[self.shown:]
        cut = _first_stop(tail, self.stop)
        if cut is not None:
            self.stopped = True
            self.text = self.text[:self.shown + cut]
            tail = tail[:cut]
        elif not final:
            tail = tail[:len(tail) - _held_suffix(tail, self.stop)]
        self.shown += len(tail)
        return tail


def _first_stop(text: str, stop: Sequence[str]) -> int | None:
    hits = [i for i in (text.find(s) for s in stop) if i >= 0]
    return min(hits) if hits else None


def _held_suffix(text: str, stop: Sequence[str]) -> int:
    """Length of the longest end of `text` that is the beginning of a stop string."""
    best = 0
    for s in stop:
        for n in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:n]):
                best = n
                break
    return best


# ---------------------------------------------------------------- a generation

@dataclass
class Generation:
    """One answer being written. Iterate it for text pieces; its fields fill in as it runs.

    `dropped_turns` is known before the first piece, so a UI can say
    "3 oldest turns were dropped to fit the context" right away.
    """

    prompt_tokens: int                        # tokens the model read (chat template included)
    dropped_turns: int = 0                    # oldest user/assistant turns left out to fit the context
    completion_tokens: int = 0                # tokens the model wrote so far (an end token included)
    finish_reason: str | None = None          # "stop" (end token / stop string) or "length"; None while running
    text: str = ""                            # the answer so far, as handed out
    _pieces: Iterator[str] | None = field(default=None, repr=False)

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        if self._pieces is None:
            raise StopIteration
        piece = next(self._pieces)
        self.text += piece
        return piece

    def close(self) -> None:
        """Stop early (a client went away); the KV cache is freed."""
        if self._pieces is not None:
            self._pieces.close()
        if self.finish_reason is None:
            self.finish_reason = "cancelled"

    def read(self) -> str:
        """Run to the end and return the whole answer."""
        for _ in self:
            pass
        return self.text

    @property
    def usage(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens}


def stop_token_ids(model, tokenizer, chat_mode: bool) -> list[int]:
    """Tokens that end an answer: the end tokens, the model's EOS, and in a chat a new turn."""
    names = list(END_TOKENS) + (["<|im_start|>"] if chat_mode else [])  # a new turn also ends an answer
    ids = {tokenizer.convert_tokens_to_ids(n) for n in names}
    eos = getattr(model.config, "eos_token_id", None)
    ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    unk = tokenizer.unk_token_id
    return sorted(i for i in ids if isinstance(i, int) and i >= 0 and i != unk)


def context_size(model) -> int:
    """How many tokens (prompt + answer) the model can attend over."""
    return int(getattr(model.config, "max_position_embeddings", 2048))


def _check_room(params: SamplingParams, context: int) -> None:
    """max_new_tokens leaves the prompt at least one token of the context (checked before any
    arithmetic with it: 10**18 must read as too many, not as a negative room for the prompt)."""
    if params.max_new_tokens >= context:
        raise _bad("max_new_tokens", f"max_new_tokens is {params.max_new_tokens:,}, but the model's context holds "
                                     f"{context:,} tokens, prompt included; ask for at most {context - 1:,}")


def _check_fits(prompt_tokens: int, params: SamplingParams, context: int, what: str, param: str) -> None:
    if prompt_tokens + params.max_new_tokens > context:
        raise _bad(param, f"the {what} is {prompt_tokens} tokens and max_new_tokens is {params.max_new_tokens}: "
                          f"together {prompt_tokens + params.max_new_tokens}, more than the model's context of "
                          f"{context} tokens; shorten the {what} or lower max_new_tokens")


def _run(model, tokenizer, prompt_ids: list[int], params: SamplingParams, chat_mode: bool,
         generation: Generation, engine: Engine | None = None) -> Iterator[str]:
    """The pieces of one answer; updates `generation`'s counts and finish reason."""
    stop_ids = stop_token_ids(model, tokenizer, chat_mode)
    text = TextStream(tokenizer, params.stop)
    tokens = _token_source(model, tokenizer, prompt_ids, params, stop_ids, engine)
    try:
        for token in tokens:
            generation.completion_tokens += 1
            if token in stop_ids:
                generation.finish_reason = "stop"
                break
            piece = text.push(token)
            if text.stopped:
                generation.finish_reason = "stop"
            if piece:
                yield piece
            if text.stopped:
                return
        else:
            generation.finish_reason = "length"
    finally:
        close = getattr(tokens, "close", None)
        if close is not None:  # stop decoding now (a stop string, or the consumer left)
            close()
    piece = text.finish()
    if text.stopped:
        generation.finish_reason = "stop"
    if piece:
        yield piece


def _token_source(model, tokenizer, prompt_ids: list[int], params: SamplingParams, stop_ids: list[int],
                  engine: Engine | None = None) -> Iterator[int]:
    if params.num_beams > 1:
        return iter(_beam_search(model, tokenizer, prompt_ids, params, stop_ids))
    engine = engine if engine is not None else engine_for(model)
    sampler = Sampler.from_params(params, engine.vocab_size, guard_for(tokenizer, engine.vocab_size))
    return engine.submit(prompt_ids, sampler, params.max_new_tokens, stop_ids)


def _beam_search(model, tokenizer, prompt_ids: list[int], params: SamplingParams, stop_ids: list[int]) -> list[int]:
    """Beam search through transformers' generate (not streamed: the best beam is known at the end),
    with the engine's UTF-8 guard on every beam."""
    from transformers import LogitsProcessorList

    device = next(model.parameters()).device
    ids = torch.tensor([prompt_ids], device=device)
    guard = guard_for(tokenizer, model.get_output_embeddings().weight.shape[0])
    guarded = LogitsProcessorList([_GuardEachBeam(guard, len(prompt_ids), params.max_new_tokens)] if guard else [])
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), num_beams=params.num_beams,
                             do_sample=False, max_new_tokens=params.max_new_tokens,
                             repetition_penalty=params.repetition_penalty, eos_token_id=stop_ids,
                             pad_token_id=stop_ids[0] if stop_ids else 0, logits_processor=guarded)
    new = out[0, len(prompt_ids):].tolist()
    for i, token in enumerate(new):
        if token in stop_ids:
            return new[:i + 1]
    return new


class _GuardEachBeam:
    """A transformers logits processor: the UTF-8 guard's mask for each beam, from its tokens so far."""

    def __init__(self, guard, prompt_length: int, max_new_tokens: int):
        self.guard, self.prompt_length, self.max_new_tokens = guard, prompt_length, max_new_tokens
        self.states = {(): guard.start}  # tokens written -> state; each beam extends a prefix seen last step

    def _state(self, tokens: tuple):
        known = len(tokens)
        while tokens[:known] not in self.states:  # the longest prefix already seen (one step back, usually)
            known -= 1
        state = self.states[tokens[:known]]
        for end in range(known + 1, len(tokens) + 1):
            state = self.states[tokens[:end]] = self.guard.advance(state, tokens[end - 1])
        return state

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        written = input_ids.shape[1] - self.prompt_length
        for row, tokens in enumerate(input_ids[:, self.prompt_length:].tolist()):
            state = self._state(tuple(tokens))
            allowed = self.guard.allowed(state, self.max_new_tokens - written)
            if allowed is not None:
                scores[row] = scores[row].masked_fill(~allowed[:scores.shape[1]].to(scores.device), float("-inf"))
        return scores


# ---------------------------------------------------------------- chat

def check_messages(messages: Sequence[Mapping]) -> list[dict]:
    """Messages as [{"role", "content"}]; SamplingError naming the first bad one."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise _bad("messages", "messages must be a non-empty list of {role, content}")
    clean = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise _bad("messages", f"messages[{i}] must be an object with role and content")
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            raise _bad("messages", f"messages[{i}].role must be one of {', '.join(ROLES)}, got {role!r}")
        if not isinstance(content, str):
            raise _bad("messages", f"messages[{i}].content must be a string")
        clean.append({"role": role, "content": content})
    if not any(m["role"] == "user" for m in clean):
        raise _bad("messages", "messages need at least one user message")
    return clean


def _turns(messages: list[dict]) -> tuple[list[dict], list[list[dict]]]:
    """(leading system messages, turns): a turn starts at a user message."""
    head = 0
    while head < len(messages) and messages[head]["role"] == "system":
        head += 1
    turns: list[list[dict]] = []
    for m in messages[head:]:
        if m["role"] == "user" or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return messages[:head], turns


def longest_token(tokenizer) -> int:
    """Characters of the longest vocabulary entry (bytes, for a byte-level vocabulary): no
    token covers more text, so text longer than budget x this cannot fit in `budget` tokens."""
    return max(map(len, tokenizer.get_vocab()), default=1)


def check_length(messages: list[dict], budget: int, longest: int, what: str, param: str = "messages") -> None:
    """Refuse, without tokenizing, messages that cannot fit `budget` tokens: more characters than
    budget x the longest token, or more messages than tokens (each costs at least its markers)."""
    chars = sum(len(m["content"]) for m in messages)
    if chars > budget * longest or len(messages) > budget:
        size = f"{chars:,} characters" if chars > budget * longest else f"{len(messages):,} messages"
        raise _bad(param, f"the {what} has {size}, more than the {budget:,} tokens left for it in the "
                          "model's context can hold; shorten it or lower max_new_tokens")


def fit_messages(tokenizer, messages: list[dict], budget: int) -> tuple[list[int], int]:
    """(prompt ids, turns dropped): drop whole turns, oldest first, keeping the system
    message(s) and the last turn, until the prompt is at most `budget` tokens.

    Turns that cannot fit by their length alone go without being tokenized; then a binary
    search over how many to drop (fewer turns, fewer tokens) tokenizes a few times, not once
    per turn: a long history costs little."""
    system, turns = _turns(messages)
    longest = longest_token(tokenizer)
    check_length(system + turns[-1], budget, longest, "system message and last turn")
    keep, chars = 0, sum(len(m["content"]) for m in system)
    for turn in reversed(turns):
        chars += sum(len(m["content"]) for m in turn)
        if keep and (chars > budget * longest or keep + len(turn) > budget):
            break
        keep += 1
    low, high = len(turns) - keep, len(turns) - 1  # the answer lies in [low, high]
    while low < high:
        middle = (low + high) // 2
        if len(encode_chat(tokenizer, system + [m for t in turns[middle:] for m in t])) <= budget:
            high = middle
        else:
            low = middle + 1
    return encode_chat(tokenizer, system + [m for t in turns[low:] for m in t]), low


def chat(model, tokenizer, messages: Sequence[Mapping], params: SamplingParams | None = None,
         truncate: bool = True, engine: Engine | None = None) -> Generation:
    """Stream the assistant's answer to `messages`.

    With `truncate` the oldest turns are dropped until prompt + max_new_tokens fits the
    context (see `Generation.dropped_turns`); without it, or when even the system message
    plus the last turn is too long, SamplingError says by how much.

    `engine`: the model's engine (default: `engine_for(model)`, the one every caller shares).
    """
    params = params or SamplingParams()
    messages = check_messages(messages)
    context = context_size(model)
    _check_room(params, context)
    if truncate:
        ids, dropped = fit_messages(tokenizer, messages, context - params.max_new_tokens)
    else:
        check_length(messages, context - params.max_new_tokens, longest_token(tokenizer), "conversation")
        ids, dropped = encode_chat(tokenizer, messages), 0
    what = "system message and last turn" if truncate and len(messages) > 1 else "conversation"
    _check_fits(len(ids), params, context, what, "messages")
    generation = Generation(prompt_tokens=len(ids), dropped_turns=dropped)
    generation._pieces = _run(model, tokenizer, ids, params, True, generation, engine)
    return generation


def complete(model, tokenizer, prompt: str, params: SamplingParams | None = None,
             engine: Engine | None = None) -> Generation:
    """Stream the continuation of plain text `prompt` (no chat template).

    The prompt is read after an end-of-text token, as documents follow one another in
    pretraining, so an empty prompt starts a fresh document. `engine`: as for `chat`.
    """
    params = params or SamplingParams()
    if not isinstance(prompt, str):
        raise _bad("prompt", "prompt must be a string")
    _check_room(params, context_size(model))
    check_length([{"content": prompt}], context_size(model) - params.max_new_tokens, longest_token(tokenizer),
                 "prompt", "prompt")
    eos = tokenizer.convert_tokens_to_ids(END_TOKENS[1])
    ids = ([eos] if isinstance(eos, int) and eos >= 0 else []) + \
        tokenizer(prompt, add_special_tokens=False)["input_ids"]
    if not ids:
        raise _bad("prompt", "prompt is empty and the tokenizer has no end-of-text token to start from")
    _check_fits(len(ids), params, context_size(model), "prompt", "prompt")
    generation = Generation(prompt_tokens=len(ids))
    generation._pieces = _run(model, tokenizer, ids, params, False, generation, engine)
    return generation


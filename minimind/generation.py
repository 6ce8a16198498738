"""Chat and completion as streams of text.

`chat(model, tokenizer, messages, params)` reads the conversation as minimind.chat_format
builds it (the chat template with the assistant's turn opened, the oldest turns dropped when it
no longer fits the context) and returns a `Generation`: an iterator of text pieces as the
model writes them. It stops at end of turn (<|im_end|>), end of text, a stop string, or
`max_new_tokens`. A piece never ends in half a UTF-8 character (byte-level tokens can split
one) and never holds the start of a stop string that might still complete. After (or during)
iteration the `Generation` tells the token counts, why it finished, and how many turns were
dropped -- what an API `usage` field or a chat UI needs.

`complete(model, tokenizer, prompt, params)` does the same for plain text. Tokens come from
the model's inference engine (minimind.inference), whose sampler never lets the text become
invalid UTF-8, or from its beam search (minimind.inference.beams) when `num_beams` > 1; this
module only turns them into text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from .chat_format import answer_room, chat_prompt, completion_prompt, context_size, stop_token_ids
from .errors import SamplingError
from .inference import Engine, Sampler, engine_for, guard_for
from .inference.beams import beam_search
from .sampling_params import SamplingParams

REPLACEMENT = "\ufffd"                           # what a decoder prints for incomplete UTF-8


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
        return iter(beam_search(model, tokenizer, prompt_ids, params, stop_ids))
    engine = engine if engine is not None else engine_for(model)
    sampler = Sampler.from_params(params, engine.vocab_size, guard_for(tokenizer, engine.vocab_size))
    return engine.submit(prompt_ids, sampler, params.max_new_tokens, stop_ids)


# ---------------------------------------------------------------- chat and plain text

def fitted(model, tokenizer, conversation: Sequence[Mapping] | str, truncate: bool,
           params: SamplingParams | None = None) -> SamplingParams:
    """`params` (default SamplingParams()) with an answer length that fits the model where it was left
    at the default (as the API fits a request that names none): what the context leaves after the
    prompt, at most the default's 256 tokens, which is a shipped model's whole context. Where old
    turns may be dropped (`truncate`), the answer keeps at least a quarter of the context (or the
    256) and the oldest turns make way for it. A length set to anything else is kept, and checked."""
    params = params or SamplingParams()
    wanted = params.max_new_tokens
    if wanted != SamplingParams.max_new_tokens:
        return params
    floor = max(1, min(wanted, context_size(model) // 4))
    try:
        room = answer_room(model, tokenizer, conversation, wanted)
    except SamplingError:
        if not truncate:  # the prompt alone is too long: said with its numbers
            raise
        room = floor
    return params.replace(max_new_tokens=max(room, floor) if truncate else room)


def chat(model, tokenizer, messages: Sequence[Mapping], params: SamplingParams | None = None,
         truncate: bool = True, engine: Engine | None = None) -> Generation:
    """Stream the assistant's answer to `messages`.

    With `truncate` the oldest turns are dropped until prompt + max_new_tokens fits the
    context (see `Generation.dropped_turns`); without it, or when even the system message
    plus the last turn is too long, SamplingError says by how much.

    `engine`: the model's engine (default: `engine_for(model)`, the one every caller shares).
    """
    params = fitted(model, tokenizer, messages, truncate, params)
    ids, dropped = chat_prompt(tokenizer, messages, context_size(model), params.max_new_tokens, truncate)
    generation = Generation(prompt_tokens=len(ids), dropped_turns=dropped)
    generation._pieces = _run(model, tokenizer, ids, params, True, generation, engine)
    return generation


def complete(model, tokenizer, prompt: str, params: SamplingParams | None = None,
             engine: Engine | None = None) -> Generation:
    """Stream the continuation of plain text `prompt` (no chat template).

    The prompt is read after an end-of-text token, as documents follow one another in
    pretraining, so an empty prompt starts a fresh document. `engine`: as for `chat`.
    """
    params = fitted(model, tokenizer, prompt, False, params)
    ids = completion_prompt(tokenizer, prompt, context_size(model), params.max_new_tokens)
    generation = Generation(prompt_tokens=len(ids))
    generation._pieces = _run(model, tokenizer, ids, params, False, generation, engine)
    return generation

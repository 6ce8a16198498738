"""How a conversation or a plain text becomes the prompt a model answers, within its context: the
tokenizer's chat template with the assistant's turn opened, the tokens that end an answer, and the
oldest turns dropped when a conversation outgrows the context. A leaf: chat, the API, GRPO's prompts
(minimind.data.tokens) and rollouts all read prompts through it, and it imports nothing of the project
but its errors and `sampling_error`; a model or tokenizer here is only read (its config, its vocabulary)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .sampling_params import sampling_error

ROLES = ("system", "user", "assistant")
END_TOKENS = ("<|im_end|>", "<|endoftext|>")      # end of an answer / of a document


def encode_chat(tokenizer, messages: list[dict]) -> list[int]:
    """Token ids of the conversation with the assistant's turn opened."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def token_id(tokenizer, token: str) -> int | None:
    """The id of `token` when the vocabulary has it (None, not the unknown token's id, when it does not)."""
    found = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(found, int) or found < 0:
        return None
    return None if found == tokenizer.unk_token_id and token != tokenizer.unk_token else found


def encode_prompt(tokenizer, prompt: str) -> list[int]:
    """Token ids of plain text as `complete` reads it: after an end-of-text token, as documents follow
    one another in pretraining (so an empty prompt starts a fresh document); for a tokenizer without
    one (an imported Llama), after its begin-of-text token, as that model's documents start."""
    start = token_id(tokenizer, END_TOKENS[1])
    if start is None:
        start = tokenizer.bos_token_id
    return ([start] if start is not None else []) + tokenizer(prompt, add_special_tokens=False)["input_ids"]


def end_token_ids(tokenizer, model_config=None) -> list[int]:
    """Tokens that end an answer or a document: ours (<|im_end|>, <|endoftext|>) where the vocabulary
    has them, and the model's own end tokens (an imported chat model's generation config lists them)."""
    ids = {token_id(tokenizer, name) for name in END_TOKENS}
    eos = getattr(model_config, "eos_token_id", None)
    ids.update(eos if isinstance(eos, list) else [eos])
    if not any(i is not None for i in ids):
        ids.add(tokenizer.eos_token_id)
    return sorted(i for i in ids if isinstance(i, int) and i >= 0)


def stop_token_ids(model, tokenizer, chat_mode: bool) -> list[int]:
    """Tokens that end an answer: the end tokens, the model's EOS, and in a chat a new turn."""
    ids = set(end_token_ids(tokenizer, model.config))
    if chat_mode:
        ids.add(token_id(tokenizer, "<|im_start|>"))  # a new turn also ends an answer
    unk = tokenizer.unk_token_id
    return sorted(i for i in ids if isinstance(i, int) and i >= 0 and i != unk)


def context_size(model) -> int:
    """How many tokens (prompt + answer) the model can attend over."""
    return int(getattr(model.config, "max_position_embeddings", 2048))


def check_room(max_new_tokens: int, context: int) -> None:
    """max_new_tokens leaves the prompt at least one token of the context (checked before any
    arithmetic with it: 10**18 must read as too many, not as a negative room for the prompt)."""
    if max_new_tokens >= context:
        raise sampling_error("max_new_tokens", f"max_new_tokens is {max_new_tokens:,}, but the model's context "
                                               f"holds {context:,} tokens, prompt included; ask for at most "
                                               f"{context - 1:,}")


def check_fits(prompt_tokens: int, max_new_tokens: int, context: int, what: str, param: str) -> None:
    if prompt_tokens + max_new_tokens > context:
        raise sampling_error(param, f"the {what} is {prompt_tokens} tokens and max_new_tokens is {max_new_tokens}: "
                                    f"together {prompt_tokens + max_new_tokens}, more than the model's context of "
                                    f"{context} tokens; shorten the {what} or lower max_new_tokens")


def check_messages(messages: Sequence[Mapping]) -> list[dict]:
    """Messages as [{"role", "content"}]; SamplingError naming the first bad one."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise sampling_error("messages", "messages must be a non-empty list of {role, content}")
    clean = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise sampling_error("messages", f"messages[{i}] must be an object with role and content")
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            raise sampling_error("messages", f"messages[{i}].role must be one of {', '.join(ROLES)}, "
                                             f"got {role!r}")
        if not isinstance(content, str):
            raise sampling_error("messages", f"messages[{i}].content must be a string")
        clean.append({"role": role, "content": content})
    if not any(m["role"] == "user" for m in clean):
        raise sampling_error("messages", "messages need at least one user message")
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
        raise sampling_error(param, f"the {what} has {size}, more than the {budget:,} tokens left for it in the "
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


def chat_prompt(tokenizer, messages: Sequence[Mapping], context: int, max_new_tokens: int,
                truncate: bool = True) -> tuple[list[int], int]:
    """(prompt ids, turns dropped) of a conversation that leaves `max_new_tokens` of `context` for the
    answer: with `truncate` the oldest turns go (see `fit_messages`); without it, or when even the
    system message plus the last turn is too long, SamplingError says by how much."""
    messages = check_messages(messages)
    check_room(max_new_tokens, context)
    if truncate:
        ids, dropped = fit_messages(tokenizer, messages, context - max_new_tokens)
    else:
        check_length(messages, context - max_new_tokens, longest_token(tokenizer), "conversation")
        ids, dropped = encode_chat(tokenizer, messages), 0
    what = "system message and last turn" if truncate and len(messages) > 1 else "conversation"
    check_fits(len(ids), max_new_tokens, context, what, "messages")
    return ids, dropped


def completion_prompt(tokenizer, prompt: str, context: int, max_new_tokens: int) -> list[int]:
    """Prompt ids of plain text (see `encode_prompt`) that leave `max_new_tokens` of `context` for the
    continuation; SamplingError when they do not."""
    if not isinstance(prompt, str):
        raise sampling_error("prompt", "prompt must be a string")
    check_room(max_new_tokens, context)
    check_length([{"content": prompt}], context - max_new_tokens, longest_token(tokenizer), "prompt", "prompt")
    ids = encode_prompt(tokenizer, prompt)
    if not ids:
        raise sampling_error("prompt", "prompt is empty and the tokenizer has no end-of-text token to start from")
    check_fits(len(ids), max_new_tokens, context, "prompt", "prompt")
    return ids


def answer_room(model, tokenizer, conversation: Sequence[Mapping] | str, most: int) -> int:
    """How many tokens an answer may have: what the model's context leaves after the prompt (chat
    `messages`, or a plain `prompt` as `complete` reads it, end-of-text token included), at most
    `most`, at least 1 (a prompt that leaves no room is then refused by chat/complete with the
    numbers). Text too long to fit at all is refused before it is tokenized."""
    context = context_size(model)
    if isinstance(conversation, str):
        check_length([{"content": conversation}], context, longest_token(tokenizer), "prompt", "prompt")
        used = len(encode_prompt(tokenizer, conversation))
    else:
        messages = check_messages(conversation)
        check_length(messages, context, longest_token(tokenizer), "conversation")
        used = len(encode_chat(tokenizer, messages))
    return max(1, min(most, context - used))

"""What a record is (plain text, chat, instruction, preference pair or prompt) and its one normal form.

Every record becomes {"text": str}, {"messages": [{"role", "content"}]} (an
instruction is a user turn and an assistant turn), for a preference pair
{"prompt": [{"role", "content"}], "chosen": str, "rejected": str}, or, for a
prompt the model answers itself (GRPO), {"prompt": [{"role", "content"}],
"params": {...}}, or, for labelled text (classification), {"text": str, "label": str}
(labels.py), so everything after reading handles five shapes, not eight.
A file holds one kind; the user may force the kind instead of letting the first
record decide.
"""

from __future__ import annotations

import json

from .labels import LabelError, is_labelled, label_field_of, labelled_document, text_field_of
from .validate import describe, snippet

TEXT_FIELDS = ("text", "content")           # tried in order when no text field is named
CHAT_FIELDS = ("messages", "conversations")
INSTRUCTION_FIELDS = ("instruction", "output")  # "input" and "system" are optional
PREFERENCE_FIELDS = ("prompt", "chosen", "rejected")  # a record with chosen + rejected is a preference pair
PARAM_FIELDS = ("form", "must_contain", "must_avoid")  # what a prompt may tell the rewards (see _prompts)
ROLES = ("system", "user", "assistant")
KIND_NAMES = {"text": "plain text", "chat": "chat", "instruction": "instruction", "preference": "preference",
              "prompts": "prompt-only", "labelled": "labelled"}
PROMPT_ORDER = ("an optional system message, then user and assistant messages taking turns, starting and "
                "ending with a user message")


class BadRecord(ValueError):
    """One record cannot be used; the reason says what was found and what was expected."""


def expected_fields(text_field: str | None) -> str:
    text = repr(text_field) if text_field else "'text' or 'content'"
    return (f"a text field ({text}; name another with text_field / --text-field), 'messages' or "
            "'conversations' (chat), 'instruction' + 'output' (instruction), 'prompt' + 'chosen' + "
            "'rejected' (preference), 'prompt' alone (prompts, for GRPO), or text + 'label' (labelled)")


def detect(fields, text_field: str | None, label_field: str | None = None) -> str | None:
    """The kind a record (or a table with these column names) holds, or None.

    A prompt with one answer side only is a preference pair missing the other (reported
    as such), not a prompt-only record that silently drops its answer. Text beside a
    label field (label, class, ...; or the `label_field` named) is labelled.
    """
    names = set(fields)
    if is_labelled(names, text_field, label_field):
        return "labelled"
    if text_field and text_field in names:
        return "text"
    if {"chosen", "rejected"} <= names or ("prompt" in names and names & {"chosen", "rejected"}):
        return "preference"
    if "prompt" in names:
        return "prompts"
    if names & set(CHAT_FIELDS):
        return "chat"
    if set(INSTRUCTION_FIELDS) <= names:
        return "instruction"
    if not text_field and names & set(TEXT_FIELDS):
        return "text"
    return None


def needed_columns(names: list[str], kind: str, text_field: str | None,
                   label_field: str | None = None) -> list[str] | None:
    """Columns of a table that a `kind` ("auto" allowed) reads, or None when it has none of them."""
    found = detect(names, text_field, label_field) if kind == "auto" else kind
    if found == "labelled":
        text, label = text_field_of(names, text_field), label_field_of(names, label_field, True)
        return [text, label] if text and label else None
    if found == "text":
        field = text_field or next((f for f in TEXT_FIELDS if f in names), None)
        return [field] if field in names else None
    if found == "chat":
        cols = [f for f in CHAT_FIELDS if f in names]
        return cols or None
    if found == "instruction":
        return [f for f in ("system", "instruction", "input", "output") if f in names] \
            if set(INSTRUCTION_FIELDS) <= set(names) else None
    if found == "preference":  # a missing 'prompt' column is reported on the first row, naming it
        return [f for f in PREFERENCE_FIELDS if f in names] if {"chosen", "rejected"} <= set(names) else None
    if found == "prompts":  # forced on a table without 'prompt': its text column holds the prompts
        field = "prompt" if "prompt" in names else text_field or next((f for f in TEXT_FIELDS if f in names), None)
        return [field] + [f for f in PARAM_FIELDS if f in names] if field in names else None
    return None


class Normalizer:
    """Turns one file's records into normal form, holding the file to a single kind."""

    def __init__(self, kind: str = "auto", text_field: str | None = None, label_field: str | None = None):
        self.forced = kind != "auto"
        self.kind = None if kind == "auto" else kind  # set by the first record when auto
        self.text_field = text_field
        self.label_field = label_field

    def __call__(self, record: object) -> dict | None:
        """The record in normal form; None for an empty document; BadRecord when unusable."""
        if not isinstance(record, dict):
            raise BadRecord(f"found {describe(record)}; expected a JSON object (one record)")
        # a labelled file reads every record as labelled, so one without its label is reported as that
        kind = self.kind if self.forced or self.kind == "labelled" else \
            detect(record, self.text_field, self.label_field) or self.kind
        if kind is None:
            raise BadRecord(f"found {describe(record)}; expected {expected_fields(self.text_field)}")
        if self.kind is None:
            self.kind = kind
        elif kind != self.kind:
            raise BadRecord(f"mixed kinds: found a {KIND_NAMES[kind]} record ({describe(record)}), but this file's "
                            f"first record is {KIND_NAMES[self.kind]}; expected one kind per file")
        return {"text": self._text, "chat": self._chat, "instruction": self._instruction,
                "preference": _preference, "prompts": self._prompts, "labelled": self._labelled}[kind](record)

    def _labelled(self, record: dict) -> dict:
        try:
            return labelled_document(record, self.text_field, self.label_field)
        except LabelError as err:
            raise BadRecord(str(err)) from None

    def _text(self, record: dict) -> dict | None:
        field = self.text_field or next((f for f in TEXT_FIELDS if f in record), TEXT_FIELDS[0])
        if field not in record:
            raise BadRecord(f"missing field {field!r}: found {describe(record)}; expected a {field!r} field "
                            "holding the text")
        value = record[field]
        if not isinstance(value, str):
            raise BadRecord(f"field {field!r} is {describe(value)}; expected a string")
        return {"text": value} if value.strip() else None

    def _chat(self, record: dict) -> dict:
        field = next(f for f in CHAT_FIELDS if f in record) if any(f in record for f in CHAT_FIELDS) else None
        if field is None:
            raise BadRecord(f"missing field 'messages': found {describe(record)}; expected 'messages' or "
                            "'conversations' holding a list of {role, content}")
        messages = record[field]
        if isinstance(messages, str):  # CSV and some parquet exports hold the list as JSON text
            try:
                messages = json.loads(messages)
            except (json.JSONDecodeError, RecursionError):
                raise BadRecord(f"field {field!r} is {describe(messages)}; expected a list of "
                                "{role, content}") from None
        return {"messages": check_messages(messages, field)}

    def _prompts(self, record: dict) -> dict:
        """A prompt for the model to answer (GRPO): 'prompt' (text or messages ending with a user
        message), or, when the kind is forced, the text field; optional reward fields 'form' (text),
        'must_contain' and 'must_avoid' (text or a list of texts) go to "params" (null or blank:
        absent); any other field is ignored."""
        field = "prompt"
        if field not in record and self.forced:
            field = self.text_field or next((f for f in TEXT_FIELDS if f in record), "prompt")
        if field not in record:
            raise BadRecord(f"missing field 'prompt': found {describe(record)}; expected 'prompt' holding the "
                            "request text, or a list of {role, content} ending with a user message")
        value = record[field]
        if field != "prompt" and (not isinstance(value, str) or not value.strip()):
            found = f"field {field!r} is {describe(value)}" if not isinstance(value, str) else f"empty {field!r}"
            raise BadRecord(f"{found}; expected the prompt text (kind prompts reads it as the prompt)")
        return prompt_document(value, params(record))

    def _instruction(self, record: dict) -> dict:
        for name in INSTRUCTION_FIELDS:
            if name not in record:
                raise BadRecord(f"missing field {name!r}: found {describe(record)}; expected 'instruction', "
                                "'output' and optionally 'input'")
        parts = {}
        for name in ("system", "instruction", "input", "output"):
            value = record.get(name)
            if value is not None and not isinstance(value, str):
                raise BadRecord(f"field {name!r} is {describe(value)}; expected a string")
            parts[name] = value or ""
        if not parts["instruction"].strip() or not parts["output"].strip():
            raise BadRecord("empty 'instruction' or 'output'; expected both to hold text")
        prompt = parts["instruction"] + ("\n\n" + parts["input"] if parts["input"].strip() else "")
        messages = [{"role": "system", "content": parts["system"]}] if parts["system"].strip() else []
        return {"messages": messages + [{"role": "user", "content": prompt},
                                        {"role": "assistant", "content": parts["output"]}]}


def _preference(record: dict) -> dict:
    """A preference pair: the prompt as messages, the preferred and the rejected answer as text."""
    for name in PREFERENCE_FIELDS:
        if name not in record:
            raise BadRecord(f"missing field {name!r}: found {describe(record)}; expected 'prompt', 'chosen' and "
                            "'rejected' (a request, the preferred answer and the rejected one)")
    prompt = _prompt(record["prompt"])
    chosen, rejected = _answer(record["chosen"], "chosen"), _answer(record["rejected"], "rejected")
    if chosen.strip() == rejected.strip():
        raise BadRecord(f"'chosen' and 'rejected' are identical ({snippet(chosen.strip(), 40)}); expected two "
                        "different answers, the preferred one in 'chosen'")
    return {"prompt": prompt, "chosen": chosen, "rejected": rejected}


def prompt_document(value: object, found: dict | None = None) -> dict:
    """A prompt-only document: the prompt (text or messages, checked as a pair's prompt) and its params."""
    return {"prompt": _prompt(value), "params": found or {}}


def params(record: dict) -> dict:
    """The reward fields of a prompt record, checked: 'form' as text, 'must_contain' / 'must_avoid' as
    a list of texts (one text becomes a list of one; a CSV cell may hold a JSON list)."""
    found = {}
    for name in PARAM_FIELDS:
        value = record.get(name)
        if value is None or isinstance(value, str) and not value.strip():
            continue  # absent, JSON null, an empty CSV cell or parquet null
        if name == "form":
            if not isinstance(value, str):
                raise BadRecord(f"field 'form' is {describe(value)}; expected text naming the requested form "
                                "(e.g. '五言绝句')")
            found[name] = value.strip()
            continue
        value = _maybe_json_strings(value)
        texts = [value] if isinstance(value, str) else value
        if not isinstance(texts, list):
            raise BadRecord(f"field {name!r} is {describe(value)}; expected a text or a list of texts")
        for i, text in enumerate(texts, 1):
            if not isinstance(text, str) or not text.strip():
                raise BadRecord(f"item {i} of field {name!r} is {describe(text)}; expected non-empty text")
        if not texts:
            continue  # an empty list asks for nothing
        found[name] = texts
    return found


def _maybe_json_strings(value: object) -> object:
    """A list of texts stored as JSON text (a CSV cell) decoded; anything else as is."""
    if isinstance(value, str) and value.lstrip().startswith("[") and value.rstrip().endswith("]"):
        try:
            decoded = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return value
        if isinstance(decoded, list) and all(isinstance(t, str) for t in decoded):
            return decoded
    return value


def _maybe_json_list(value: object) -> object:
    """A list of messages stored as JSON text (a CSV cell, a string column) decoded; anything else as is."""
    if isinstance(value, str) and value.lstrip().startswith("[") and value.rstrip().endswith("]"):
        try:
            decoded = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return value
        if isinstance(decoded, list) and decoded and all(isinstance(m, dict) for m in decoded):
            return decoded
    return value


def _prompt(value: object) -> list[dict]:
    """The prompt as messages: text becomes one user message; a list must end on a user turn."""
    value = _maybe_json_list(value)
    if isinstance(value, str):
        if not value.strip():
            raise BadRecord("empty 'prompt'; expected the request text, or a list of {role, content} "
                            "ending with a user message")
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise BadRecord(f"field 'prompt' is {describe(value)}; expected text, or a list of {{role, content}} "
                        "ending with a user message")
    messages = [_message(i, m, "prompt") for i, m in enumerate(value, 1)]
    if not any(m["content"].strip() for m in messages):
        raise BadRecord(f"empty 'prompt' ({len(messages)} messages, no text); expected the request text, or a "
                        "list of {role, content} ending with a user message")
    roles = [m["role"] for m in messages]
    turns = roles[1:] if roles[0] == "system" else roles
    if not turns or any(role != ("user" if i % 2 == 0 else "assistant") for i, role in enumerate(turns)) \
            or turns[-1] != "user":
        raise BadRecord(f"roles out of order in 'prompt': found {' → '.join(roles)}; expected {PROMPT_ORDER}")
    return messages


def _answer(value: object, name: str) -> str:
    """One side of a pair as text: a string, or a list holding exactly one assistant message."""
    value = _maybe_json_list(value)
    if isinstance(value, list):
        if len(value) != 1:
            raise BadRecord(f"field {name!r} is {describe(value)}; expected text, or a list holding exactly one "
                            "assistant message")
        message = _message(1, value[0], name)
        if message["role"] != "assistant":
            raise BadRecord(f"field {name!r} holds a {message['role']} message; expected text, or a list "
                            "holding exactly one assistant message")
        value = message["content"]
    if not isinstance(value, str):
        raise BadRecord(f"field {name!r} is {describe(value)}; expected text, or a list holding exactly one "
                        "assistant message")
    if not value.strip():
        raise BadRecord(f"empty {name!r}; expected the text of the {'preferred' if name == 'chosen' else 'rejected'} "
                        "answer")
    return value


def _message(i: int, message: object, field: str | None = None) -> dict:
    """One {role, content} message checked; BadRecord naming it (and the field holding it) otherwise."""
    where = f"message {i}" + (f" of {field!r}" if field else "")
    if not isinstance(message, dict):
        raise BadRecord(f"{where} is {describe(message)}; expected an object with 'role' and 'content'")
    role, content = message.get("role"), message.get("content")
    if role not in ROLES:
        shown = snippet(role, 30) if isinstance(role, str) else describe(role)
        raise BadRecord(f"{where} has role {shown}; expected one of {', '.join(ROLES)}")
    if not isinstance(content, str):
        raise BadRecord(f"{where} ({role}) has content {describe(content)}; expected a string")
    return {"role": role, "content": content}


def check_messages(messages: object, field: str = "messages") -> list[dict]:
    """The conversation as [{role, content}], or BadRecord naming the first bad message."""
    if not isinstance(messages, list):
        raise BadRecord(f"field {field!r} is {describe(messages)}; expected a list of {{role, content}}")
    if not messages:
        raise BadRecord(f"empty conversation: found 0 messages in {field!r}; expected at least a user "
                        "and an assistant message")
    clean = [_message(i, m) for i, m in enumerate(messages, 1)]
    if not any(m["role"] == "assistant" for m in clean):
        raise BadRecord(f"no assistant message among {len(clean)}; expected at least one to learn from")
    return clean


def shape(doc: dict) -> str:
    """Which normal form `doc` has: "text", "messages", "preference", "prompts" or "labelled"."""
    if "label" in doc:
        return "labelled"
    if "prompt" in doc:
        return "prompts" if "params" in doc else "preference"
    return "text" if "text" in doc else "messages"


def characters(doc: dict) -> int:
    """Characters of a normal-form document (all message contents for chat; prompt + both answers for a
    pair; the prompt's messages for a prompt)."""
    if "text" in doc:
        return len(doc["text"])
    if "params" in doc:
        return sum(len(m["content"]) for m in doc["prompt"])
    if "prompt" in doc:
        return sum(part_characters(doc).values())
    return sum(len(m["content"]) for m in doc["messages"])


def part_characters(doc: dict) -> dict[str, int]:
    """Characters of each part of a preference pair: prompt (all its messages), chosen, rejected."""
    return {"prompt": sum(len(m["content"]) for m in doc["prompt"]), "chosen": len(doc["chosen"]),
            "rejected": len(doc["rejected"])}


def doc_texts(doc: dict) -> list[str]:
    """The pieces of text a document contributes to tokenizer training."""
    if "text" in doc:
        return [doc["text"]]
    if "prompt" in doc:
        answers = [doc["chosen"], doc["rejected"]] if "chosen" in doc else []
        return [m["content"] for m in doc["prompt"] if m["content"].strip()] + answers
    return [m["content"] for m in doc["messages"] if m["content"].strip()]

"""OpenAI request bodies in, our generation arguments out; OpenAI response shapes back.

Parsing is done by hand rather than by pydantic models so that every refusal is
an OpenAI-style error naming the parameter (`{"error": {message, type, param,
code}}`) with a sentence a person can act on.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import SamplingError
from ..sampling_params import SamplingParams

DEFAULT_CHAT_MAX_TOKENS = 512        # when a chat request names no max_tokens (capped by the context)
DEFAULT_COMPLETION_MAX_TOKENS = 16   # OpenAI's default for /v1/completions
API_NAMES = {"max_new_tokens": "max_tokens"}  # library field -> API parameter


class ApiError(Exception):
    """An error the API answers with: HTTP status + OpenAI-style body."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None, code: str | None = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


@dataclass
class GenerationRequest:
    """What a chat or completion request asks for, checked."""

    model: str                       # registry name
    sampling: dict                   # the SamplingParams fields the client set (the model's defaults fill the rest)
    max_tokens_given: bool           # False: max_new_tokens is a default to fit to the context
    stream: bool                     # answer as server-sent events
    include_usage: bool              # stream_options.include_usage: a last chunk with token counts
    messages: list[dict] | None = None   # chat
    prompt: str | None = None            # completion
    echo: bool = False                   # completion: put the prompt in front of the text


def _get(body: Mapping, name: str, kinds: tuple, default=None):
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) and bool not in kinds:
        raise bad_request(f"{name} must be {_kind_names(kinds)}, got {value!r}", name, "invalid_type")
    if not isinstance(value, kinds):
        raise bad_request(f"{name} must be {_kind_names(kinds)}, got {type(value).__name__}", name, "invalid_type")
    return value


def _kind_names(kinds: tuple) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "a boolean", list: "a list",
             dict: "an object"}
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


def _require_one(body: Mapping, name: str) -> None:
    n = _get(body, name, (int,), 1)
    if n != 1:
        raise bad_request(f"{name} must be 1 (one answer per request)", name, "unsupported_value")


def _sampling(body: Mapping, default_max_tokens: int) -> tuple[dict, bool]:
    """(the sampling fields the request sets, whether it set max_tokens); checked here."""
    max_tokens = _get(body, "max_completion_tokens", (int,))
    max_tokens = _get(body, "max_tokens", (int,)) if max_tokens is None else max_tokens
    stop = _get(body, "stop", (str, list), ())
    if isinstance(stop, list) and not all(isinstance(s, str) for s in stop):
        raise bad_request("stop must be a string or a list of strings", "stop", "invalid_type")
    for unsupported in ("logprobs", "top_logprobs", "tools", "functions", "logit_bias"):
        if body.get(unsupported):
            raise bad_request(f"{unsupported} is not supported by this server", unsupported, "unsupported_parameter")
    for penalty in ("presence_penalty", "frequency_penalty"):
        if _get(body, penalty, (int, float), 0) != 0:
            raise bad_request(f"{penalty} is not supported; use repetition_penalty (> 1 discourages "
                              "repeats)", penalty, "unsupported_parameter")
    given = {name: value for name, value in (
        ("temperature", _get(body, "temperature", (int, float))),
        ("top_p", _get(body, "top_p", (int, float))),
        ("top_k", _get(body, "top_k", (int,))),
        ("repetition_penalty", _get(body, "repetition_penalty", (int, float)))) if value is not None}
    given = {k: (float(v) if k != "top_k" else v) for k, v in given.items()}
    given.update(max_new_tokens=max_tokens if max_tokens is not None else default_max_tokens,
                 seed=_get(body, "seed", (int,)), stop=tuple([stop] if isinstance(stop, str) else stop))
    try:
        SamplingParams(**given)  # checked now; the model's own defaults fill the rest (see `sampling`)
    except SamplingError as err:
        raise from_sampling_error(err) from err
    return given, max_tokens is not None


def from_sampling_error(err: SamplingError) -> ApiError:
    """SamplingError -> 400, with library field names turned into API parameter names."""
    message = str(err)
    param = getattr(err, "param", None)
    for field, api in API_NAMES.items():
        message = message.replace(field, api)
    code = "context_length_exceeded" if "context" in message else "invalid_value"
    return bad_request(message, API_NAMES.get(param, param), code)


def _common(body) -> dict:
    if not isinstance(body, Mapping):
        raise bad_request("the request body must be a JSON object", None, "invalid_json")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("model is required (GET /v1/models lists the names)", "model", "missing_required_parameter")
    _require_one(body, "n")
    stream = _get(body, "stream", (bool,), False)
    options = _get(body, "stream_options", (dict,), {})
    return dict(model=model, stream=stream, include_usage=bool(options.get("include_usage")))


def parse_chat(body) -> GenerationRequest:
    common = _common(body)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad_request("messages must be a non-empty list of {role, content}", "messages",
                          "missing_required_parameter" if raw is None else "invalid_type")
    messages = [_message(m, i) for i, m in enumerate(raw)]
    sampling, given = _sampling(body, DEFAULT_CHAT_MAX_TOKENS)
    return GenerationRequest(sampling=sampling, max_tokens_given=given, messages=messages, **common)


def _message(m, i: int) -> dict:
    where = f"messages[{i}]"
    if not isinstance(m, Mapping):
        raise bad_request(f"{where} must be an object with role and content", "messages", "invalid_type")
    role = m.get("role")
    if role == "developer":  # newer OpenAI clients' name for the system role
        role = "system"
    if role not in ("system", "user", "assistant"):
        raise bad_request(f"{where}.role must be system, user or assistant, got {role!r}", "messages")
    content = m.get("content")
    if isinstance(content, list):  # content parts: only text is understood
        texts = []
        for part in content:
            if not (isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise bad_request(f"{where}.content: only text parts are supported", "messages",
                                  "unsupported_value")
            texts.append(part["text"])
        content = "".join(texts)
    if content is None and role == "assistant":
        content = ""
    if not isinstance(content, str):
        raise bad_request(f"{where}.content must be a string", "messages", "invalid_type")
    return {"role": role, "content": content}


def parse_completion(body) -> GenerationRequest:
    common = _common(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise bad_request("prompt must be a string (one prompt per request)", "prompt",
                          "missing_required_parameter" if prompt is None else "invalid_type")
    if _get(body, "best_of", (int,), 1) != 1:
        raise bad_request("best_of must be 1", "best_of", "unsupported_value")
    if body.get("suffix"):
        raise bad_request("suffix is not supported", "suffix", "unsupported_parameter")
    sampling, given = _sampling(body, DEFAULT_COMPLETION_MAX_TOKENS)
    return GenerationRequest(sampling=sampling, max_tokens_given=given, prompt=prompt,
                             echo=_get(body, "echo", (bool,), False), **common)


# ---------------------------------------------------------------- responses

def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())


def chat_response(rid: str, model: str, text: str, finish: str, usage: dict) -> dict:
    return {"id": rid, "object": "chat.completion", "created": now(), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": finish, "logprobs": None}],
            "usage": usage, "system_fingerprint": None}


def chat_chunk(rid: str, model: str, delta: dict, finish: str | None = None) -> dict:
    return {"id": rid, "object": "chat.completion.chunk", "created": now(), "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
            "system_fingerprint": None}


def completion_response(rid: str, model: str, text: str, finish: str, usage: dict) -> dict:
    return {"id": rid, "object": "text_completion", "created": now(), "model": model,
            "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}],
            "usage": usage, "system_fingerprint": None}


def completion_chunk(rid: str, model: str, text: str, finish: str | None = None) -> dict:
    return {"id": rid, "object": "text_completion", "created": now(), "model": model,
            "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}],
            "system_fingerprint": None}


def usage_chunk(rid: str, model: str, obj: str, usage: dict) -> dict:
    return {"id": rid, "object": obj, "created": now(), "model": model, "choices": [], "usage": usage}

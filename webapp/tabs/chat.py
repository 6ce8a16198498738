"""Chat tab: stream answers from the shipped model, a finished run or a LoRA run (base +
adapter), with sampling controls; side by side, one message goes to two models. Below it, "Try a
classifier": the label probabilities of typed text by a classifier run, or by two side by side."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gradio as gr
from huggingface_hub import ModelCard

from minimind.errors import MiniMindError, SamplingError
from minimind.generation import chat
from minimind.sampling_params import SamplingParams

from .. import classifiers
from ..context import AppContext, user_errors, user_errors_gen
from ..i18n import t, tr


def _text(content) -> str | None:
    """The text of a chat message's content (a string or text parts); None for anything else."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type", "text") == "text"
                                         and isinstance(p.get("text"), str) for p in content):
        return "".join(p["text"] for p in content)
    return None


def text_history(history) -> list[dict]:
    """The user and assistant turns of a history as plain text. Anything else a caller put in it
    (a file, an image, a component) is dropped: echoed back, the page would serve it as a download."""
    turns = []
    for turn in history or []:
        if isinstance(turn, dict) and turn.get("role") in ("user", "assistant"):
            text = _text(turn.get("content"))
            if text is not None:
                turns.append({"role": turn["role"], "content": text})
    return turns


def _messages(history: list[dict], system: str) -> list[dict]:
    if system is not None and not isinstance(system, str):
        raise SamplingError("the system message must be text")
    msgs = [{"role": "system", "content": system.strip()}] if system and system.strip() else []
    return msgs + text_history(history)


def _params(temperature, top_p, top_k, max_new, repetition) -> SamplingParams:
    """The sliders' values as sampling parameters; SamplingParams checks them, an emptied or
    non-numeric value from the API included (a slider may send a whole number as 40.0)."""
    def whole(value):
        return int(value) if isinstance(value, float) and value.is_integer() else value

    return SamplingParams(temperature=temperature, top_p=top_p, top_k=whole(top_k), max_new_tokens=whole(max_new),
                          repetition_penalty=repetition)


def _answer(ctx: AppContext, model_id: str, history: list[dict], system: str, params: SamplingParams):
    """Yields the growing history with the assistant's answer streaming in."""
    loaded = ctx.models.load(ctx.model_folder(model_id))
    generation = chat(loaded.model, loaded.tokenizer, _messages(history, system), params, engine=loaded.engine)
    note = "\n\n" + tr("dropped_turns", n=generation.dropped_turns) if generation.dropped_turns else ""
    history = history + [{"role": "assistant", "content": ""}]
    text = ""
    for piece in generation:
        text += piece
        history[-1] = {"role": "assistant", "content": text}
        yield history
    # an answer of spaces and newlines alone (a barely trained model's) would be an invisible bubble
    history[-1] = {"role": "assistant", "content": (text if text.strip() else "…") + note}
    yield history


def respond(ctx: AppContext, message, history, history_b, model, model_b, side_by_side, system,
            temperature, top_p, top_k, max_new, repetition):
    """Send `message` (to two models side by side when asked) and stream the answers."""
    if not isinstance(message, str) or not message.strip():
        raise gr.Error("type a message first", print_exception=False)
    params = _params(temperature, top_p, top_k, max_new, repetition)
    history = text_history(history) + [{"role": "user", "content": message}]
    history_b = text_history(history_b) + [{"role": "user", "content": message}] if side_by_side else []
    yield "", history, history_b
    yield from _stream_both(ctx, history, history_b, model, model_b if side_by_side else None, system, params)


def _stream_both(ctx, history, history_b, model, model_b, system, params):
    """Advance both answers in turn so they stream at the same time."""
    streams = [_answer(ctx, model, history, system, params)]
    if model_b:
        streams.append(_answer(ctx, model_b, history_b, system, params))
    latest = [history, history_b]
    live = list(range(len(streams)))
    while live:
        for i in list(live):
            try:
                latest[i] = next(streams[i])
            except StopIteration:
                live.remove(i)
        yield "", latest[0], latest[1]


def regenerate(ctx: AppContext, history, history_b, model, model_b, side_by_side, system,
               temperature, top_p, top_k, max_new, repetition):
    """Drop the last answer(s) and ask again with the same last message."""
    def trimmed(h):
        h = text_history(h)
        while h and h[-1].get("role") == "assistant":
            h.pop()
        return h

    history, history_b = trimmed(history), trimmed(history_b)
    if not history:
        raise gr.Error("nothing to regenerate yet", print_exception=False)
    params = _params(temperature, top_p, top_k, max_new, repetition)
    yield from _stream_both(ctx, history, history_b if side_by_side else [], model,
                            model_b if side_by_side else None, system, params)


def chat_choices(ctx: AppContext) -> list[tuple[str, str]]:
    """(label, id) of the models that write text: every offered model but the classifiers."""
    labelling = {model_id for _, model_id in classifiers.classifier_choices(ctx)}
    return [(label, model_id) for label, model_id in ctx.model_choices() if model_id not in labelling]


def try_classifier(ctx: AppContext, text, model, model_b=None, side_by_side=False):
    """The label probabilities of `text` by classifier `model` (and by `model_b` side by side), for
    the page's gr.Label panes (each headed by its classifier's name)."""
    if not isinstance(text, str) or not text.strip():
        raise gr.Error("type a text to classify first", print_exception=False)
    if not model:
        raise gr.Error("choose a classifier (train one on a labelled corpus on the Train tab)",
                       print_exception=False)
    first = classifiers.classify(ctx, model, [text])[0]
    second = classifiers.classify(ctx, model_b, [text])[0] if side_by_side and model_b else None
    return (gr.update(value=first, label=model_label(ctx, model)),
            gr.update(value=second, label=model_label(ctx, model_b), visible=True) if second is not None
            else gr.update(value=None, visible=False))


def model_defaults(ctx: AppContext, model_id: str | None) -> SamplingParams:
    """The sampling defaults the model was saved with (its generation_config.json)."""
    try:
        return SamplingParams.from_model(ctx.model_folder(model_id))
    except Exception:  # an unknown or vanished model: the library's defaults; chat will say what is wrong
        return SamplingParams()


def model_label(ctx: AppContext, model_id: str | None) -> str:
    """The name a model goes by on the page (its dropdown label), for a chat pane's header."""
    for label, offered_id in ctx.model_choices():
        if offered_id == model_id:
            return label
    return model_id or ""


CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def writes_chinese(folder: Path) -> bool:
    """Does the model in `folder` write Chinese? Its model card's `language` when it states one (the
    shipped models do), else its tokenizer: a vocabulary of which a fifth or more spells Chinese."""
    card = folder / "README.md"
    if card.is_file():
        try:
            stated = ModelCard.load(card).data.language
        except (OSError, ValueError):  # a card whose front matter is not YAML says nothing
            stated = None
        if stated:
            return "zh" in ([stated] if isinstance(stated, str) else list(stated))
    try:
        vocab = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError):
        return True  # the page's own models are Chinese unless they say otherwise
    tokens = list(vocab) if isinstance(vocab, dict) else [t[0] for t in vocab]
    chinese = sum(1 for token in tokens if CJK.search(token) or _byte_level_cjk(token))
    return chinese >= 0.2 * max(len(tokens), 1)


def _byte_level_cjk(token: str) -> bool:
    """A byte-level token holding the lead byte of a 3-byte UTF-8 character (CJK's range), as GPT-2's
    alphabet spells it (bytes 0xE3-0xE9 are the characters ã..é)."""
    return any(char in "ãäåæçèé" for char in token)


def message_placeholder(ctx: AppContext, model_id: str | None) -> str:
    """The message box's example: a Chinese poem request for a model that writes Chinese, else English."""
    try:
        chinese = writes_chinese(ctx.model_folder(model_id)) if model_id else True
    except MiniMindError:
        chinese = True
    return t("message_placeholder" if chinese else "message_placeholder_en")


def build(ctx: AppContext) -> None:
    """The conversation first (panes, message box, buttons), the model and settings beside it:
    the message box is the tab's first input; the system prompt and sampling sit in Settings."""
    choices = chat_choices(ctx)
    default = choices[0][1] if choices else None
    start = model_defaults(ctx, default)
    max_new0 = min(max(start.max_new_tokens, 8), 1024)  # within the slider's range
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=480):
            with gr.Row():  # each pane is headed by the name of the model that answers in it
                chatbot = gr.Chatbot(label=model_label(ctx, default), height=420, elem_id="chatbot")
                chatbot_b = gr.Chatbot(label=model_label(ctx, default), height=420, visible=False,
                                       elem_id="chatbot-b")
            message = gr.Textbox(label=t("message"), placeholder=message_placeholder(ctx, default), lines=1,
                                 max_lines=6, elem_id="chat-input")  # one line: Enter sends
            with gr.Row():
                send = gr.Button(t("send"), variant="primary", elem_id="chat-send")
                regen = gr.Button(t("regenerate"), elem_id="chat-regenerate")
                clear = gr.Button(t("clear"), elem_id="chat-clear")
        with gr.Column(scale=1, min_width=280, elem_id="chat-side"):
            model = gr.Dropdown(choices, value=default, label=t("model"), elem_id="chat-model",
                                allow_custom_value=True)
            side_by_side = gr.Checkbox(value=False, label=t("side_by_side"), elem_id="chat-side-by-side")
            model_b = gr.Dropdown(choices, value=default, label=t("model_b"), visible=False,
                                  allow_custom_value=True, elem_id="chat-model-b")
            with gr.Accordion(t("chat_settings"), open=False, elem_id="chat-settings"):
                # several lines: Enter starts a new line here, it does not look like (or act as) a send box
                system = gr.Textbox(label=t("system_optional"), placeholder=t("system_placeholder"),
                                    lines=3, max_lines=8, elem_id="chat-system")
                temperature = gr.Slider(0.0, 2.0, value=start.temperature, step=0.05, label=t("temperature"))
                top_p = gr.Slider(0.05, 1.0, value=start.top_p, step=0.05, label=t("top_p"))
                top_k = gr.Slider(0, 200, value=start.top_k, step=1, label=t("top_k"))
                max_new = gr.Slider(8, 1024, value=max_new0, step=8, label=t("max_new_tokens"))
                repetition = gr.Slider(1.0, 2.0, value=start.repetition_penalty, step=0.05,
                                       label=t("repetition_penalty"))

    side_by_side.change(lambda on: (gr.update(visible=on), gr.update(visible=on)), [side_by_side],
                        [model_b, chatbot_b], api_name=False)
    model.change(lambda m: (gr.update(label=model_label(ctx, m)), gr.update(placeholder=message_placeholder(ctx, m))),
                 [model], [chatbot, message], api_name=False)
    model_b.change(lambda m: gr.update(label=model_label(ctx, m)), [model_b], [chatbot_b], api_name=False)
    controls = [model, model_b, side_by_side, system, temperature, top_p, top_k, max_new, repetition]
    # the API's parameters are these handlers' own (name and order as `controls`); Gradio's defaults are
    # the page's first values, a None default makes the system prompt and the second model optional
    def send_message(message, history=None, history_b=None, model=default, model_b=None, side_by_side=False,
                     system_prompt=None, temperature=start.temperature, top_p=start.top_p, top_k=start.top_k,
                     max_new_tokens=max_new0, repetition_penalty=start.repetition_penalty):
        """Send a message; the answer streams into the conversation (into both, side by side)."""
        yield from respond(ctx, message, history, history_b, model, model_b, side_by_side, system_prompt,
                           temperature, top_p, top_k, max_new_tokens, repetition_penalty)

    def regenerate_answer(history=None, history_b=None, model=default, model_b=None, side_by_side=False,
                          system_prompt=None, temperature=start.temperature, top_p=start.top_p, top_k=start.top_k,
                          max_new_tokens=max_new0, repetition_penalty=start.repetition_penalty):
        """Drop the last answer and answer the last message again."""
        yield from regenerate(ctx, history, history_b, model, model_b, side_by_side, system_prompt,
                              temperature, top_p, top_k, max_new_tokens, repetition_penalty)

    def clear_chat():
        """An empty message box and conversations."""
        return "", [], []

    handler = user_errors_gen(send_message)
    chat_io = ([message, chatbot, chatbot_b] + controls, [message, chatbot, chatbot_b])
    send.click(handler, *chat_io, api_name="chat", api_description=(
        "Send `message` to `model` and stream its answer: returns the cleared message box and the "
        "conversation (`history` plus the message and the answer). Optional: `system_prompt`, the sampling "
        "settings (the model's defaults), `history` to go on with a conversation, and `side_by_side` with "
        "`model_b` (and `history_b`) for a second model's answer."))
    message.submit(handler, *chat_io, api_name=False)
    regen.click(user_errors_gen(regenerate_answer), [chatbot, chatbot_b] + controls, [message, chatbot, chatbot_b],
                api_name="regenerate", api_description=(
                    "Answer the last user message of `history` again (its last answer dropped), with the same "
                    "parameters as /chat."))
    clear.click(clear_chat, None, [message, chatbot, chatbot_b], api_name="clear_chat",
                api_description="Empty the message box and both conversations.")

    def refresh():
        fresh = chat_choices(ctx)
        return gr.update(choices=fresh), gr.update(choices=fresh)

    def defaults(model_id):
        p = model_defaults(ctx, model_id)
        return p.temperature, p.top_p, p.top_k, min(max(p.max_new_tokens, 8), 1024), p.repetition_penalty

    model.input(defaults, [model], [temperature, top_p, top_k, max_new, repetition], api_name=False)
    model.focus(refresh, None, [model, model_b], api_name=False)
    model_b.focus(refresh, None, [model, model_b], api_name=False)

    build_try(ctx)


def build_try(ctx: AppContext) -> None:
    """"Try a classifier": a text, one classifier's label probabilities (or two side by side)."""
    found = classifiers.classifier_choices(ctx)
    first = found[0][1] if found else None
    with gr.Accordion(t("try_title"), open=True, elem_id="try-box"):
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=480):
                text = gr.Textbox(label=t("try_text"), placeholder=t("try_placeholder"), lines=2, max_lines=8,
                                  elem_id="try-input")
                button = gr.Button(t("try_button"), variant="primary", elem_id="try-btn")
                with gr.Row():
                    label = gr.Label(label=t("try_probabilities"), num_top_classes=10, elem_id="try-label")
                    label_b = gr.Label(label=t("try_probabilities"), num_top_classes=10, visible=False,
                                       elem_id="try-label-b")
            with gr.Column(scale=1, min_width=280):
                model = gr.Dropdown(found, value=first, label=t("classifier"), info=t("classifier_info"),
                                    elem_id="try-model", allow_custom_value=True)
                side = gr.Checkbox(value=False, label=t("try_side_by_side"), elem_id="try-side-by-side")
                model_b = gr.Dropdown(found, value=first, label=t("classifier_b"), visible=False,
                                      elem_id="try-model-b", allow_custom_value=True)

    def refresh():
        fresh = classifiers.classifier_choices(ctx)
        return gr.update(choices=fresh), gr.update(choices=fresh)

    side.change(lambda on: (gr.update(visible=on), gr.update(visible=on)), [side], [model_b, label_b],
                api_name=False)
    def classify(text, model=first, model_b=None, side_by_side=False):
        """The label probabilities of a text by a classifier (and by a second one side by side)."""
        return try_classifier(ctx, text, model, model_b, side_by_side)

    handler = user_errors(classify)
    button.click(handler, [text, model, model_b, side], [label, label_b], api_name="classify", api_description=(
        "The probability of each label of `text` by the classifier `model` (a classifier run, `run:<id>`); "
        "with `side_by_side`, by `model_b` too (the second output)."))
    text.submit(handler, [text, model, model_b, side], [label, label_b], api_name=False)
    model.focus(refresh, None, [model, model_b], api_name=False)
    model_b.focus(refresh, None, [model, model_b], api_name=False)

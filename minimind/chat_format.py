"""How a conversation becomes the prompt a model answers: the tokenizer's chat template with the
assistant's turn opened. A leaf: chat, the API and GRPO's prompts (minimind.data.tokens) all
encode with it, and it imports nothing of the project."""

from __future__ import annotations


def encode_chat(tokenizer, messages: list[dict]) -> list[int]:
    """Token ids of the conversation with the assistant's turn opened."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]

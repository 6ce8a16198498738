"""Property: sampled text from the shipped models is always valid UTF-8 (no U+FFFD).

Before the sampler's UTF-8 guard, 6 of 24 sampled API answers from MiniMind-Tang carried
U+FFFD. Here each shipped model writes at temperature 1.2 up to the end of its context (no
stop token, so every answer fills the 256 tokens less its prompt) for prompts from its
held-out sample (50 for MiniMind-Tang, whose characters are mostly several bytes; 16 for
MiniMind-Shakespeare, whose text is almost all ASCII), through the engine every face uses, and
then 16 chat answers through `chat` as the page and API run it.
"""

import json
from pathlib import Path

import pytest

from minimind.checkpoint import load_model, load_tokenizer_for
from minimind.chat_format import encode_chat
from minimind.generation import chat
from minimind.sampling_params import SamplingParams
from minimind.inference import Sampler, engine_for, guard_for
from minimind.byte_level import bytes_to_unicode

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {"minimind-tang": "heldout_sample.jsonl", "minimind-shakespeare": "heldout_sample.txt"}
PROMPTS = {"minimind-tang": 50, "minimind-shakespeare": 16}

pytestmark = pytest.mark.usefixtures("one_thread")


def _prompts(folder: Path, sample: str) -> list[str]:
    if sample.endswith(".jsonl"):
        poems = [json.loads(line) for line in (folder / sample).read_text(encoding="utf-8").splitlines()]
        return [f"以《{p['title']}》為題寫一首詩" for p in poems][:PROMPTS[folder.name]]
    lines = [line.strip() for line in (folder / sample).read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if len(line) > 20][:PROMPTS[folder.name]]


def _strict_text(tokenizer, ids: list[int]) -> str:
    """The bytes the tokens stand for, decoded strictly (UnicodeDecodeError on invalid UTF-8)."""
    to_byte = {char: byte for byte, char in bytes_to_unicode().items()}
    special = set(tokenizer.all_special_ids)
    data = bytes(to_byte[ch] for i in ids if i not in special for ch in tokenizer.convert_ids_to_tokens(i))
    return data.decode("utf-8")


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_sampled_text_from_a_shipped_model_is_valid_utf8(name):
    folder = ROOT / "checkpoints" / name
    model, tokenizer = load_model(folder), load_tokenizer_for(folder)
    engine = engine_for(model)
    guard = guard_for(tokenizer, engine.vocab_size)
    assert guard is not None
    prompts = _prompts(folder, SHIPPED[name])
    assert len(prompts) == PROMPTS[name]
    context = model.config.max_position_embeddings
    params = SamplingParams(temperature=1.2, top_p=1.0)
    streams = []
    for i, prompt in enumerate(prompts):
        ids = encode_chat(tokenizer, [{"role": "user", "content": prompt}])
        room = context - len(ids)
        assert room >= 200
        streams.append((room, engine.submit(ids, Sampler.from_params(params.replace(seed=i), engine.vocab_size,
                                                                     guard), room)))
    byte_tokens = 0
    for room, stream in streams:
        ids = list(stream)
        assert len(ids) == room
        text = _strict_text(tokenizer, ids)  # raises on invalid UTF-8
        assert "\ufffd" not in text and "\ufffd" not in tokenizer.decode(ids, skip_special_tokens=True)
        byte_tokens += sum(len(tokenizer.convert_ids_to_tokens(i)) == 1 and ord(tokenizer.convert_ids_to_tokens(i))
                           >= 0x80 for i in ids)
    if name == "minimind-tang":
        assert byte_tokens > 100  # the model does write characters byte by byte: the guard had work to do

    answers = [chat(model, tokenizer, [{"role": "user", "content": p}],
                    SamplingParams(temperature=1.2, top_p=1.0, max_new_tokens=64, seed=i)) for i, p in
               enumerate(prompts[:16])]
    for answer in answers:
        pieces = list(answer)
        assert all("\ufffd" not in piece for piece in pieces)


def test_beam_search_keeps_characters_whole_too():
    """Beam search runs through transformers' generate with the same guard on every beam; a
    prompt ending in an emoji made the shipped Tang model's best beam start with a lone byte."""
    from minimind.generation import complete

    folder = ROOT / "checkpoints" / "minimind-tang"
    model, tokenizer = load_model(folder), load_tokenizer_for(folder)
    for prompt, n in (("床前明月光，🐉", 1), ("床前明月光，🐉", 5), ("𠀀", 2), ("春風", 12)):
        text = complete(model, tokenizer, prompt, SamplingParams(temperature=0, num_beams=3, max_new_tokens=n)).read()
        assert "\ufffd" not in text and text, (prompt, n, text)

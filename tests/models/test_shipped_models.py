"""The shipped checkpoints: small enough, loadable with AutoModelForCausalLM, as good on their
held-out sample as their model card says, and producing well-formed text."""

import re
from pathlib import Path

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM

import minimind  # noqa: F401  (registers the model type)
from minimind.checkpoint import load_tokenizer_for
from minimind.evaluate import evaluate_documents
from minimind.generation import chat, complete
from minimind.sampling_params import SamplingParams
from scripts.corpora import shakespeare_split, tang_split
from scripts.finalize import EVAL_CONTEXT, sample_documents
from helpers import ROOT, shared_corpus

SHIPPED = {"minimind-tang": "heldout_sample.jsonl", "minimind-shakespeare": "heldout_sample.txt"}


def _folder(name: str) -> Path:
    folder = ROOT / "checkpoints" / name
    if not (folder / "model.safetensors").is_file():
        pytest.skip(f"{folder} is not trained yet (scripts/train_*.sh)")
    return folder


def _card_metric(folder: Path, prefix: str) -> float:
    front = (folder / "README.md").read_text(encoding="utf-8").split("---")[1]
    metrics = yaml.safe_load(front)["model-index"][0]["results"][0]["metrics"]
    return next(m["value"] for m in metrics if m["name"].startswith(prefix))


@pytest.mark.parametrize("name", list(SHIPPED))
def test_checkpoint_is_small_and_loads_with_auto_classes(name):
    folder = _folder(name)
    size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    assert size <= 30 * 2**20
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert type(model).__name__ == "MiniMindForCausalLM"
    assert (folder / "tokenizer.json").is_file() and (folder / "LICENSE.chinese-poetry").is_file() == (name == "minimind-tang")


def _card_row(folder: Path, text: str) -> dict:
    """The card's "Held-out quality" row whose first cell starts with `text`:
    | text | characters | loss (nats/token) | perplexity | bits per character |"""
    for line in (folder / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("*`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith(text):
            chars, loss, ppl, bpc = (float(c.replace(",", "")) for c in cells[1:])
            return {"characters": int(chars), "loss": loss, "perplexity": ppl, "bpc": bpc}
    raise AssertionError(f"no '{text}' row in {folder / 'README.md'}")


def _assert_card_figures(measured, stated: dict) -> None:
    """The card's figures, re-measured: the same text (characters) and within 2 % for the rest."""
    assert measured.characters == stated["characters"], (measured, stated)
    for key in ("loss", "perplexity", "bpc"):
        got = getattr(measured, key)
        assert abs(got - stated[key]) <= 0.02 * stated[key], (key, got, stated[key])


def _measure(folder: Path, documents: list[str]):
    """As scripts/finalize.py measured the card: float32 from the bf16 weights, windows of 256 tokens."""
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return evaluate_documents(model, load_tokenizer_for(folder), documents, context=EVAL_CONTEXT)


@pytest.mark.parametrize("name", list(SHIPPED))
def test_heldout_sample_figures_match_the_model_card(name):
    """The card's row for the shipped held-out sample, and its YAML figure, on the file that ships."""
    folder = _folder(name)
    sample = folder / SHIPPED[name]
    measured = _measure(folder, sample_documents(sample))
    stated = _card_row(folder, sample.name)
    _assert_card_figures(measured, stated)
    assert _card_metric(folder, f"held-out sample BPC ({sample.name})") == pytest.approx(stated["bpc"], abs=1e-4)


def _full_heldout(name: str, tmp_path: Path) -> list[str]:
    """Every held-out document, split as scripts/finalize.py split them (needs ../shared/corpora)."""
    if name == "minimind-tang":
        return tang_split(shared_corpus("tang_poems.jsonl"), cache_dir=str(tmp_path / "cache"))[1]
    return [body for _, body in shakespeare_split(shared_corpus("shakespeare.txt"))[1]]  # each play whole


@pytest.mark.parametrize("name", ["minimind-tang",
                                  pytest.param("minimind-shakespeare", marks=pytest.mark.slow)])  # ~1 min
def test_full_heldout_figures_match_the_model_card(name, tmp_path):
    """The card's headline figures are measured on every held-out document, which does not ship
    (../shared/corpora); the fast twin above checks the shipped sample's figures."""
    folder = _folder(name)
    stated = _card_row(folder, "all held-out")
    _assert_card_figures(_measure(folder, _full_heldout(name, tmp_path)), stated)
    for prefix, key in (("held-out BPC", "bpc"), ("held-out perplexity", "perplexity"), ("held-out loss", "loss")):
        assert _card_metric(folder, prefix) == pytest.approx(stated[key], abs=0.006), prefix


def test_tang_answers_with_a_well_formed_poem():
    folder = _folder("minimind-tang")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = load_tokenizer_for(folder)
    answer = chat(model, tokenizer, [{"role": "user", "content": "以《春夜》为题写一首五言绝句"}],
                  SamplingParams(temperature=0.8, top_p=0.9, top_k=40, max_new_tokens=96, seed=0)).read()
    han = re.findall(r"[\u4e00-\u9fff]", answer)
    assert len(han) >= 10 and len(han) >= 0.6 * len(answer.replace("\n", "").replace("，", "").replace("。", ""))
    assert "\ufffd" not in answer and "<|" not in answer


def test_tang_form_check_matches_the_model_card():
    """The card's form check (one seeded answer to each of 30 held-out title requests: in the
    requested form, and rhyming too), re-run on the shipped weights."""
    from scripts.finalize import form_accuracy

    folder = _folder("minimind-tang")
    card = (folder / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"with (\d+) held-out titles.*?, (\d+) answers had exactly that form.*? and (\d+) of them also "
                       r"rhymed", card)
    assert stated, "no form check on the card"
    total, right, rhymed = (int(g) for g in stated.groups())
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    got = form_accuracy(model, load_tokenizer_for(folder), folder / "heldout_sample.jsonl", n=total)
    assert got[2] == total and abs(got[0] - right) <= 1 and abs(got[1] - rhymed) <= 2, (got, (right, rhymed, total))


def test_shakespeare_continues_in_english_verse():
    folder = _folder("minimind-shakespeare")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = load_tokenizer_for(folder)
    text = complete(model, tokenizer, "ROMEO:", SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=60,
                                                                  seed=0)).read()
    words = re.findall(r"[A-Za-z']+", text)
    assert len(words) >= 3 and "\ufffd" not in text and "<|" not in text  # it may end the speech early
    assert sum(c.isascii() for c in text) >= 0.95 * len(text)


def test_shakespeare_writes_the_next_speech():
    """Trained on running text (sections, not paragraph by paragraph), the model goes on past the
    speech it is given: a blank line, another speaker's name, another speech. The model trained
    paragraph by paragraph stopped after the first speech in 4 samples of 4."""
    folder = _folder("minimind-shakespeare")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = load_tokenizer_for(folder)
    prompt = "MIRANDA.\nIf by your art, my dearest father, you have\n"
    went_on = 0
    for seed in range(4):
        text = complete(model, tokenizer, prompt, SamplingParams(temperature=0.8, top_p=0.9, top_k=40,
                                                                 max_new_tokens=160, seed=seed)).read()
        went_on += bool(re.search(r"\n\n[A-Z][A-Z ]+\.\n", text))
    assert went_on >= 3, went_on


@pytest.mark.llama_cpp
@pytest.mark.parametrize("name", list(SHIPPED))
def test_llama_cpp_decodes_the_shipped_models_greedy_tokens_as_the_engine_does(name):
    """The engine's llama.cpp decoder (float32 weights and KV cache, minimind/inference/cpp_decoder.py)
    sums in another order than PyTorch: on the shipped models, long greedy answers to held-out
    prompts must still be plain decoding's tokens."""
    import json

    from minimind.checkpoint import load_model
    from minimind.chat_format import encode_chat
    from minimind.inference import Engine, Sampler
    from minimind.inference.gguf_context import llama_cpp_installed

    if not llama_cpp_installed():
        pytest.skip("llama-cpp-python is not installed")
    folder = _folder(name)
    model, tokenizer = load_model(folder).float().eval(), load_tokenizer_for(folder)
    sample = (folder / SHIPPED[name]).read_text(encoding="utf-8")
    if name == "minimind-tang":
        titles = [json.loads(line)["title"] for line in sample.splitlines()[:3]]
        prompts = [encode_chat(tokenizer, [{"role": "user", "content": f"以《{t}》为题写一首七言律诗"}]) for t in titles]
    else:
        speeches = [p for p in sample.split("\n\n") if len(p) > 200][:3]
        prompts = [tokenizer(s[:300], add_special_tokens=False)["input_ids"] for s in speeches]
    plain, cpp = Engine(model, speculate=False), Engine(model, llama_cpp=True)
    for prompt in prompts:
        n = min(200, model.config.max_position_embeddings - len(prompt) - 1)
        expected = list(plain.submit(prompt, Sampler(len(tokenizer)), n))
        assert list(cpp.submit(prompt, Sampler(len(tokenizer)), n)) == expected
    assert cpp.describe().startswith("llama.cpp") and cpp.cpp.usable

"""Export cards the Hub understands: every format's README.md parses with huggingface_hub's ModelCard
and states the license, library, task, base model, tags and languages the Hub lists a model by;
the license files travel beside the weights; the shipped models' cards parse the same way."""

import json
import shutil
from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard

from helpers import ROOT
from minimind.export import export, export_many
from minimind.export.license import license_id, resolve_terms
from minimind.hub import import_folder
from minimind.language import text_languages
from hub_models import build_family_model
from test_export import EVAL_TEXTS, trained_model_dir

SAMPLES = ROOT / "samples"
CPU_FORMATS = ["hf", "llama", "int8", "bnb-8bit", "bnb-nf4", "gguf-q8_0", "onnx", "onnx-int8"]
LIBRARY = {"hf": "transformers", "llama": "transformers", "merged": "transformers", "int8": "transformers",
           "bnb-8bit": "transformers", "bnb-nf4": "transformers", "gguf-q8_0": None}
# beside "minimind": the architecture a dense model is stored as (all but hf: Llama), and the format's own
FORMAT_TAGS = {"hf": set(), "llama": {"llama"}, "int8": {"llama", "torchao", "int8"},
               "bnb-8bit": {"llama", "bitsandbytes", "8-bit"}, "bnb-nf4": {"llama", "bitsandbytes", "4-bit"},
               "gguf-q8_0": {"llama", "gguf"}, "onnx": {"llama", "onnx"}, "onnx-int8": {"llama", "onnx", "int8"},
               "merged": {"llama", "lora"}}


def card_of(folder: Path):
    """The card's front matter as the Hub's client reads it."""
    return ModelCard.load(folder / "README.md").data


def run_checkpoint(model_dir: Path, root: Path, corpus: str, licenses: list[str]) -> Path:
    """`model_dir` as the checkpoint of a run trained on the sample `corpus`, stored as the page stores
    a sample: in a folder with the given sample license files beside it."""
    data = root / "corpus"
    data.mkdir(parents=True)
    shutil.copyfile(SAMPLES / corpus, data / corpus)
    for name in licenses:
        shutil.copyfile(SAMPLES / name, data / name)
    run = root / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"model": {"init_from": ""},
                                                     "data": {"files": [str(data / corpus)]}}))
    return Path(shutil.copytree(model_dir, run / "checkpoints" / "step-40"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer):
    return trained_model_dir(tmp_path_factory, tokenizer)


@pytest.fixture(scope="module")
def tang_run(model_dir, tmp_path_factory):
    return run_checkpoint(model_dir, tmp_path_factory.mktemp("tang-run"), "tang_poems_sample.jsonl",
                          ["LICENSE.chinese-poetry"])


@pytest.fixture(scope="module")
def exported(tang_run, tmp_path_factory):
    results = export_many(tang_run, CPU_FORMATS, tmp_path_factory.mktemp("cards"), eval_text=EVAL_TEXTS)
    assert all(r.verified for r in results), [r.error for r in results]
    return {r.format: r for r in results}


@pytest.mark.parametrize("fmt", CPU_FORMATS)
def test_every_format_card_parses_with_the_corpus_license_beside_the_weights(exported, fmt):
    r = exported[fmt]
    data = card_of(r.folder)
    assert data.license == "mit" and data.license_name is None  # the corpus's LICENSE.chinese-poetry
    assert (r.folder / "LICENSE.chinese-poetry").read_bytes() == (SAMPLES / "LICENSE.chinese-poetry").read_bytes()
    assert "LICENSE.chinese-poetry" not in r.files  # the export's own files stay what loads
    assert data.pipeline_tag == "text-generation"
    assert data.language == ["zh", "en"]  # the held-out texts: Tang verse and English lines
    assert data.base_model is None and data.datasets is None
    assert set(data.tags) == {"minimind"} | FORMAT_TAGS[fmt]
    if fmt.startswith("onnx"):  # Transformers.js reads a Llama config beside onnx/model*.onnx
        layout = any((r.folder / "onnx").glob("model*.onnx"))
        assert data.library_name == ("transformers.js" if layout else None)
    else:
        assert data.library_name == LIBRARY[fmt]
    text = (r.folder / "README.md").read_text(encoding="utf-8")
    assert "## License" in text and "`LICENSE.chinese-poetry`" in text


def test_the_hf_card_says_it_needs_minimind_and_points_to_llama(exported):
    text = (exported["hf"].folder / "README.md").read_text(encoding="utf-8")
    assert "loads only after `import minimind`" in text and "`llama` is the portable one" in text
    assert "import minimind" in text.split("## Load it", 1)[1]


def test_a_merged_adapter_is_tagged_lora(tang_run, tmp_path):
    from peft import LoraConfig, get_peft_model

    from minimind.checkpoint import load_model

    lora = get_peft_model(load_model(tang_run), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
    lora.save_pretrained(tmp_path / "adapter")
    r = export(tmp_path / "adapter", "merged", tmp_path / "merged", eval_text=EVAL_TEXTS)
    data = card_of(r.folder)
    assert set(data.tags) == {"minimind"} | FORMAT_TAGS["merged"] and data.library_name == "transformers"
    assert data.license == "mit" and (r.folder / "LICENSE.chinese-poetry").is_file()  # from the base's run


def test_a_classifier_card_is_text_classification(tokenizer, tmp_path):
    """A classifier's ONNX folder keeps its config in MiniMind form, which Transformers.js cannot map:
    no library is claimed, the task is text classification."""
    import torch

    from minimind.classifier import MiniMindForSequenceClassification, label_maps
    from minimind.tokenizer import save_tokenizer
    from helpers import tiny_config

    torch.manual_seed(0)
    config = tiny_config(**label_maps(["poem", "play"]))
    config.pad_token_id = tokenizer.pad_token_id
    MiniMindForSequenceClassification(config).eval().save_pretrained(tmp_path / "model")
    save_tokenizer(tokenizer, tmp_path / "model")
    r = export(tmp_path / "model", "onnx", tmp_path / "onnx", eval_text=EVAL_TEXTS[:8])
    data = card_of(r.folder)
    assert data.pipeline_tag == "text-classification" and data.library_name is None
    assert set(data.tags) == {"minimind", "onnx"} and data.license is None


def test_no_license_is_claimed_when_nothing_states_one(model_dir, tmp_path):
    """A model made elsewhere with no license file: the card claims none and says so."""
    r = export(model_dir, "hf", tmp_path / "hf", verify=False)
    data = card_of(r.folder)
    assert data.license is None and data.language is None and data.library_name == "transformers"
    assert not list(r.folder.glob("LICEN*"))
    assert "claims no license" in (r.folder / "README.md").read_text(encoding="utf-8")


def test_an_imported_model_names_its_base_and_keeps_its_license(tmp_path):
    """Imported from the Hub id tiny/llama, whose card states Llama 3.2's license (a Hub id)."""
    build_family_model("llama", tmp_path / "source")
    import_folder(tmp_path / "source", tmp_path / "model", source="tiny/llama")
    r = export(tmp_path / "model", "llama", tmp_path / "llama", eval_text=EVAL_TEXTS)
    data = card_of(r.folder)
    assert data.base_model == "tiny/llama" and data.license == "llama3.2"
    assert set(data.tags) == {"minimind", "llama"} and data.library_name == "transformers"
    assert (r.folder / "LICENSE").read_text() == (tmp_path / "source" / "LICENSE").read_text()
    assert "| Base model | `tiny/llama` |" in (r.folder / "README.md").read_text(encoding="utf-8")


def test_a_fine_tune_of_an_import_keeps_its_base_and_adds_its_corpus(tmp_path):
    """A run started from an imported Llama 3.2 (its own license) and trained on Shakespeare
    (CC-BY 2.5): two licenses, so `other`, named after both and linked to a file beside it."""
    build_family_model("llama", tmp_path / "source")
    import_folder(tmp_path / "source", tmp_path / "model", source="tiny/llama")
    checkpoint = run_checkpoint(tmp_path / "model", tmp_path, "shakespeare_sample.txt", ["LICENSE.shakespeare"])
    config = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    config["model"]["init_from"] = str(tmp_path / "model")
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(config))
    for name in ("import.json", "LICENSE", "README.md"):  # a run's checkpoint holds the model alone
        (checkpoint / name).unlink()
    terms = resolve_terms(checkpoint)
    assert terms.base_models == ("tiny/llama",)
    assert terms.license == "other" and terms.license_name == "cc-by-2.5-and-llama3.2"
    assert set(terms.files) == {"LICENSE", "LICENSE.shakespeare"} and terms.license_link in terms.files


def test_a_sample_stored_with_both_licenses_takes_its_own(model_dir, tmp_path):
    """The page stores a sample corpus with every sample license beside it: the one that names the
    corpus applies; where none does, all of them do."""
    both = ["LICENSE.chinese-poetry", "LICENSE.shakespeare"]
    shakespeare = resolve_terms(run_checkpoint(model_dir, tmp_path / "a", "shakespeare_sample.txt", both))
    assert shakespeare.license == "cc-by-2.5" and list(shakespeare.files) == ["LICENSE.shakespeare"]
    tang = resolve_terms(run_checkpoint(model_dir, tmp_path / "b", "tang_poems_sample.jsonl", both))
    assert tang.license == "other" and tang.license_name == "mit-and-cc-by-2.5"
    assert set(tang.files) == set(both)


def test_a_corpus_without_a_license_file_leaves_the_license_unknown(model_dir, tmp_path):
    terms = resolve_terms(run_checkpoint(model_dir, tmp_path, "shakespeare_sample.txt", []))
    assert terms.license is None and terms.unknown == ["corpus shakespeare_sample.txt"] and not terms.files


def test_license_texts_are_read_as_hub_ids(tmp_path):
    assert license_id((SAMPLES / "LICENSE.chinese-poetry").read_text()) == "mit"
    assert license_id((SAMPLES / "LICENSE.shakespeare").read_text()) == "cc-by-2.5"  # the texts', not the code's
    assert license_id("Apache License\n Version 2.0, January 2004") == "apache-2.0"
    assert license_id("Creative Commons Attribution-ShareAlike 4.0 International") == "cc-by-sa-4.0"
    assert license_id("All rights reserved.") is None


def test_languages_are_told_from_the_text():
    assert text_languages((SAMPLES / "shakespeare_sample.txt").read_text(encoding="utf-8")[:50000]) == ["en"]
    poems = [json.loads(line)["text"] for line in (SAMPLES / "tang_poems_sample.jsonl").open(encoding="utf-8")]
    assert text_languages(poems[:200]) == ["zh"]
    assert text_languages(EVAL_TEXTS) == ["zh", "en"]
    assert text_languages("Le chat est sur la table et il mange une pomme avec du pain.") == []  # not guessed
    assert text_languages([]) == []


@pytest.mark.parametrize("name,license,language,license_file", [
    ("minimind-tang", "mit", ["zh"], "LICENSE.chinese-poetry"),
    ("minimind-shakespeare", "cc-by-2.5", ["en"], "LICENSE.shakespeare")])
def test_shipped_cards_parse_and_name_their_corpus_license(name, license, language, license_file):
    folder = ROOT / "checkpoints" / name
    data = card_of(folder)
    assert (data.license, data.language, data.library_name, data.pipeline_tag) == (
        license, language, "transformers", "text-generation")
    assert (folder / license_file).is_file() and f"({license_file} here)" in (folder / "README.md").read_text() \
        or f"see {license_file}" in (folder / "README.md").read_text()
    assert resolve_terms(folder).license == license  # what an export of it will say


@pytest.mark.parametrize("kind,name", [("tang", "minimind-tang"), ("shakespeare", "minimind-shakespeare")])
def test_shipped_card_front_matter_is_what_finalize_builds(kind, name):
    """scripts/finalize.py writes the header with ModelCardData; the shipped one is exactly that."""
    from scripts.finalize import card_data

    card = ModelCard.load(ROOT / "checkpoints" / name / "README.md")
    assert card.content.split("---\n")[1].strip() == card_data(kind, card.data.eval_results).to_yaml()

"""The first minutes on the page: the corpus headline counts tokens with the shipped tokenizer that writes
the corpus shortest, and names it (an English corpus is not counted one byte piece at a time by the Tang
model's tokenizer); the Train tab starts from a model, so a first Start works."""

import pytest
from helpers import ROOT

from minimind.data import DataConfig
from webapp import work

SHIPPED = {name: str(ROOT / "checkpoints" / name) for name in ("minimind-tang", "minimind-shakespeare")}


@pytest.mark.parametrize("sample, kind, counted_by", [("shakespeare_sample.txt", "text", "minimind-shakespeare"),
                                                      ("tang_poems_sample.jsonl", "auto", "minimind-tang")])
def test_tokens_are_counted_with_the_tokenizer_that_writes_the_corpus_shortest(sample, kind, counted_by):
    if not all((ROOT / "checkpoints" / name / "tokenizer.json").is_file() for name in SHIPPED):
        pytest.skip("needs the shipped tokenizers")
    files = [str(ROOT / "samples" / sample)]
    stats, spelled, counting = work.inspect_files(files, DataConfig(files=files, kind=kind), SHIPPED)
    assert counting == counted_by and set(spelled) == set(SHIPPED)
    assert stats.chars_per_token == pytest.approx(spelled[counted_by].chars_per_token, rel=0.1)
    other = next(name for name in SHIPPED if name != counted_by)
    assert spelled[other].chars_per_token < stats.chars_per_token


def test_the_train_tab_starts_from_a_shipped_model_not_from_nothing(tmp_path):
    """A first Start works without choosing: the default mode fine-tunes the first shipped model; with
    none shipped, a new model of the size the budget allows."""
    from webapp_helpers import page_workspace

    from webapp.context import AppContext
    from webapp.jobs import JobManager
    from webapp.tabs.train_form import default_base

    ws, shipped = page_workspace(tmp_path)
    assert default_base(AppContext(ws, JobManager(ws), shipped_dir=shipped)) == "shipped:minimind-tang"
    assert default_base(AppContext(ws, JobManager(ws), shipped_dir=tmp_path / "none")) == "new:auto"


def test_a_starting_run_shows_step_0_of_unknown_not_none(tmp_path):
    from minimind.training import RunDir
    from webapp.jobs import JobManager
    from webapp.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    run = RunDir(ws.new_run_dir("lora")).create()
    (run.path / "config.yaml").write_text("mode: lora\n")
    run.write_status(state="running", total=None, step=None)
    assert [row["step"] for row in JobManager(ws).table()] == ["0/?"]


@pytest.mark.parametrize("name, chinese", [("minimind-tang", True), ("minimind-shakespeare", False)])
def test_the_message_box_suggests_a_request_in_the_models_language(tmp_path, name, chinese):
    """By the model card's language, and without a card (a run's checkpoint) by its vocabulary."""
    import shutil

    from webapp.tabs.chat import writes_chinese

    folder = ROOT / "checkpoints" / name
    if not (folder / "tokenizer.json").is_file():
        pytest.skip("needs the shipped tokenizers")
    assert writes_chinese(folder) is chinese
    bare = tmp_path / "run-checkpoint"
    bare.mkdir()
    shutil.copy(folder / "tokenizer.json", bare / "tokenizer.json")
    assert writes_chinese(bare) is chinese

"""Bringing a model on the page (webapp/imports.py): "Start from" offers it, an import lands in the
workspace's models/ and every tab then offers it as imported:<name>; a public Space takes Hub ids only,
never a server folder; the same model imported twice is one model; a failed import leaves nothing."""

from pathlib import Path

import pytest

from webapp.context import AppContext
from webapp.imports import import_into, import_name, import_steps
from webapp.jobs import JobManager
from webapp.tabs.train_form import HUB_CHOICE, TrainForm, base_choices
from webapp.workspace import WorkspaceError
from webapp_helpers import page_workspace

from hub_models import build_family_model

NUMBERS = {"steps": 5, "batch": 2, "seq_len": 64, "lr": 1e-4, "accum": 1, "precision": "fp32", "rank": 4,
           "alpha": 8, "eval_every": 0}


@pytest.fixture
def ctx(tmp_path):
    ws, shipped = page_workspace(tmp_path)
    return AppContext(ws, JobManager(ws), shipped_dir=shipped)


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("byom") / "tiny-llama"
    build_family_model("llama-smollm", folder)
    return folder


def test_an_import_is_offered_everywhere_under_its_name(ctx, llama_folder):
    assert (("a Hugging Face model: id or folder…", HUB_CHOICE) in base_choices(ctx))
    steps = list(import_steps(ctx.workspace, str(llama_folder), local_folders=True))
    assert steps[-1] == ("imported `imported:tiny-llama`", "imported:tiny-llama")
    assert ("imported: tiny-llama", "imported:tiny-llama") in ctx.model_choices()
    assert ctx.model_folder("imported:tiny-llama") == ctx.workspace.models / "tiny-llama"
    config = TrainForm(base="imported:tiny-llama", mode="lora", corpus="chats", **NUMBERS).to_config(ctx)
    assert config.model.init_from == str(ctx.workspace.models / "tiny-llama")
    again = list(import_steps(ctx.workspace, f"  {llama_folder}  ", local_folders=True))
    assert again[-1][0] == "`imported:tiny-llama` was already imported"
    assert [p.name for p in ctx.workspace.models.iterdir()] == ["tiny-llama"]       # no leftovers


def test_the_import_choice_itself_is_not_a_starting_point(ctx):
    with pytest.raises(WorkspaceError, match="press Import first"):
        TrainForm(base=HUB_CHOICE, mode="lora", corpus="chats", **NUMBERS).to_config(ctx)


def test_a_public_space_takes_hub_ids_only(ctx, llama_folder):
    with pytest.raises(WorkspaceError, match="imports from the Hub only"):
        import_into(ctx.workspace, str(llama_folder), local_folders=False)
    with pytest.raises(WorkspaceError, match="type a Hugging Face model id \\(owner/name"):
        import_into(ctx.workspace, "   ", local_folders=False)
    assert import_name("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB--SmolLM2-135M-Instruct"


def test_a_failed_import_leaves_nothing_and_says_why(ctx, tmp_path):
    from minimind.errors import CheckpointError

    (tmp_path / "not-a-model").mkdir()
    with pytest.raises(CheckpointError, match="no config.json"):
        list(import_steps(ctx.workspace, str(tmp_path / "not-a-model"), local_folders=True))
    assert list(ctx.workspace.models.iterdir()) == []


@pytest.mark.parametrize("sample, own, other", [("Tang poems (2,016 poems, JSONL)", "LICENSE.chinese-poetry",
                                                 "LICENSE.shakespeare"),
                                                ("Shakespeare: The Comedy of Errors (txt)", "LICENSE.shakespeare",
                                                 "LICENSE.chinese-poetry")])
def test_a_bundled_sample_is_stored_with_its_own_license_only(ctx, sample, own, other):
    """An export's card states the license found beside its corpus: a sample brings its own, not every
    sample's (the Tang poems' exports said 'mit-and-cc-by-2.5')."""
    from webapp.tabs.corpus import stored_files

    [stored] = stored_files(ctx, None, sample)
    folder = Path(stored).parent
    assert (folder / own).is_file() and not (folder / other).exists()

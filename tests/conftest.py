"""Shared fixtures: offline hub settings, a tokenizer trained on a few strings, tiny models."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_UPDATE_DOWNLOAD_COUNTS", "0")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two test processes share the two cores: one thread each, in them and in every process they start
    # (a trainer the page launches, a server, a benchmark's child), which take PyTorch's default. With
    # two threads beside the other test process, each op waited for a descheduled thread: a 1-minute
    # LoRA's steps took 3.3-5 s against 0.12 s alone, and it made 7 steps.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import torch
from helpers import SAMPLE_TEXTS, tiny_config

import minimind

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tokenizer():
    from minimind.tokenizer import build_tokenizer

    return build_tokenizer(SAMPLE_TEXTS, vocab_size=512, min_frequency=1)


@pytest.fixture(scope="session")
def tokenizer_dir(tokenizer, tmp_path_factory):
    from minimind.tokenizer import save_tokenizer

    return save_tokenizer(tokenizer, tmp_path_factory.mktemp("tokenizer"))


@pytest.fixture
def tiny_model():
    torch.manual_seed(0)
    return minimind.MiniMindForCausalLM(tiny_config()).eval()


@pytest.fixture(scope="module")
def one_thread():
    """On a 2-core machine shared with other jobs, a descheduled OpenMP worker stalls every op for
    a scheduler tick; one thread keeps small-model tests fast (results do not depend on it)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


_CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed  # for studio_page's screenshot on failure
    return report


@pytest.fixture
def studio_page(request, tmp_path):
    """A browser walk's MiniMind Studio: `page = studio_page(**options)` serves the app (on
    tmp_path/"workspace" unless given one; `shipped_dir=`, `background_jobs=`, `access=`... go to
    build_app) and returns a headless Chromium page opened at it (`locale=`, `accept_downloads=`);
    `studio_page.url` is its address, `studio_page.screenshot(name)` saves test-artifacts/<name>.png.
    A failed test leaves test-artifacts/<test>-failure.png. Skips where Debian's chromium is missing.
    Mark the test `browser` (`pytest -m "not browser"` leaves the walks out)."""
    from contextlib import ExitStack
    from pathlib import Path

    from webapp_helpers import CHROMIUM, StudioPage

    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian chromium (apt-get install chromium)")
    with ExitStack() as stack:
        studio = StudioPage(tmp_path / "workspace", stack)
        yield studio
        if studio.page is not None and request.node.stash.get(_CALL_FAILED, False):
            studio.screenshot(f"{request.node.name}-failure")


# The two test processes take the files longest first (tests/file_order.py)

def pytest_addoption(parser):
    parser.addoption("--record-file-seconds", action="store_true",
                     help="update tests/file_seconds.json (the order the test processes take the files in) "
                          "with this run's seconds per file")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from file_order import LongestFileFirst

    return LongestFileFirst(config, log)


def pytest_configure(config):
    if config.getoption("record_file_seconds") and not os.environ.get("PYTEST_XDIST_WORKER"):
        from file_order import FileSeconds

        config.pluginmanager.register(FileSeconds(), "file-seconds")

"""Shared fixtures: offline hub settings, a tokenizer trained on a few strings, tiny models."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_UPDATE_DOWNLOAD_COUNTS", "0")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

import minimind  # noqa: E402
from helpers import SAMPLE_TEXTS, tiny_config  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):
    # two test processes share the two cores: one thread each, or every op waits on the other's workers
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

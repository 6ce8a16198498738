"""Helpers the tests import: sample texts, tiny configs, where the shared corpora are."""

import os
import random
import socket
from pathlib import Path

import pytest

from minimind.config import MiniMindConfig

ROOT = Path(__file__).resolve().parents[1]
SHARED_CORPORA = ROOT.parent / "shared" / "corpora"

SAMPLE_TEXTS = [
    "床前明月光，疑是地上霜。舉頭望明月，低頭思故鄉。",
    "春眠不覺曉，處處聞啼鳥。夜來風雨聲，花落知多少。",
    "白日依山盡，黃河入海流。欲窮千里目，更上一層樓。",
    "ROMEO: But, soft! what light through yonder window breaks?",
    "JULIET: O Romeo, Romeo! wherefore art thou Romeo?",
    "To be, or not to be, that is the question.",
    "Hello world! 你好，世界。 1234 5678 — emoji 🙂🚀 tabs\tand  spaces",
    "system user assistant instruction input output",
] * 20


def tiny_config(**overrides) -> MiniMindConfig:
    """A 2-layer, width-64 model: fast enough for many tests."""
    base = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    return MiniMindConfig(**{**base, **overrides})



def shared_corpus(name: str) -> Path:
    path = SHARED_CORPORA / name
    if not path.is_file():
        pytest.skip(f"{path} is not available (needs ../shared/corpora)")
    return path


_PORTS_TAKEN: set[int] = set()


def free_port() -> int:
    """A port no other test process will pick: each xdist worker draws from its own block below
    the kernel's ephemeral range (32768+), so a port handed out here cannot be taken by another
    worker's server, nor by an outgoing connection, between this check and the server's bind."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    block = 20000 + 1000 * (int(worker[2:] or 0) % 12)
    for port in random.sample(range(block, block + 1000), 1000):
        if port in _PORTS_TAKEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _PORTS_TAKEN.add(port)
        return port
    raise AssertionError(f"no free port in {block}-{block + 999}")

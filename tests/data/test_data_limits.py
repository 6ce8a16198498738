"""What a corpus decodes to is bounded, not only its bytes on disk: a parquet file that expands past
PARQUET_MAX_EXPANSION times its size is refused before its rows are written out (the 523-byte file
that decodes to 300 MiB in milliseconds), and max_chars stops reading any corpus at a stated size."""

import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from minimind.data import DataConfig, inspect_corpus
from minimind.data.readers import PARQUET_MAX_EXPANSION
from minimind.errors import ConfigError, CorpusError


def _write(path, table, **kw):
    pq.write_table(table, path, **{"compression": "zstd", **kw})
    return path


def _refused_quickly(path, tmp_path, needle, **config):
    started = time.perf_counter()
    with pytest.raises(CorpusError, match=needle) as caught:
        inspect_corpus([str(path)], DataConfig(cache_dir=str(tmp_path / "cache"), **config))
    assert time.perf_counter() - started < 2
    return str(caught.value)


def test_a_dictionary_parquet_of_523_bytes_is_refused_before_it_expands(tmp_path):
    table = pa.table({"text": pa.array(["a" * 2**20] * 300).dictionary_encode()})  # 300 MiB of text
    path = _write(tmp_path / "dictionary.parquet", table)
    assert path.stat().st_size < 1024
    message = _refused_quickly(path, tmp_path, "decodes to more than")
    assert f"{PARQUET_MAX_EXPANSION} times its {path.stat().st_size:,} bytes" in message and "row 1" in message


def test_pages_that_decompress_past_the_limit_are_refused_from_the_footer(tmp_path):
    path = _write(tmp_path / "one.parquet", pa.table({"text": ["a" * (32 << 20)]}))
    assert _refused_quickly(path, tmp_path, "decodes to more than").startswith(f"{path}: file footer")


def test_without_a_stored_schema_and_inside_chats_the_dictionary_is_still_counted(tmp_path):
    plain = _write(tmp_path / "plain.parquet", pa.table({"text": ["a" * 2**20] * 300}), store_schema=False)
    _refused_quickly(plain, tmp_path, "decodes to more than")
    chat = [{"role": "user", "content": "b" * 2**20}, {"role": "assistant", "content": "c" * 2**20}]
    nested = _write(tmp_path / "chats.parquet", pa.table({"messages": [chat] * 200}))
    _refused_quickly(nested, tmp_path, "decodes to more than")


def test_values_count_at_their_width_however_well_they_compress(tmp_path):
    import numpy as np

    zeros = pa.ListArray.from_arrays(pa.array([0, 5_000_000], pa.int32()), pa.array(np.zeros(5_000_000, np.int64)))
    numbers = _write(tmp_path / "numbers.parquet", pa.table({"text": zeros}), compression_level=22)
    wide = _write(tmp_path / "wide.parquet", pa.table({"text": pa.array([b"a" * 2**16] * 300, pa.binary(2**16))}))
    for path in (numbers, wide):  # 40 MB of zeros in one row; 300 fixed-width values of 64 KiB
        assert path.stat().st_size < 2048
        assert _refused_quickly(path, tmp_path, "decodes to more than").startswith(f"{path}: file footer")


def test_real_compressed_corpora_stay_well_inside_the_limit(tmp_path):
    system = "You are a poet of the Tang dynasty; answer in classical Chinese verse. " * 20
    rows = [{"messages": [{"role": "system", "content": system}, {"role": "user", "content": f"写诗 {i}"},
                          {"role": "assistant", "content": f"床前明月光 {i}"}]} for i in range(5000)]
    path = _write(tmp_path / "chats.parquet", pa.Table.from_pylist(rows))  # one long prompt in every row
    stats = inspect_corpus([str(path)], DataConfig(cache_dir=str(tmp_path / "cache")))
    assert stats.documents == 5000 and stats.characters > 50 * path.stat().st_size


def test_max_chars_stops_reading_and_names_the_setting(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("\n\n".join("x" * 500 for _ in range(100)), encoding="utf-8")
    message = _refused_quickly(text, tmp_path, "more than 10,000 characters", max_chars=10_000, split="paragraph")
    assert "MINIMIND_MAX_CORPUS_CHARS" in message and "line 41" in message  # where reading stopped
    assert inspect_corpus([str(text)], DataConfig(cache_dir=str(tmp_path / "c2"), max_chars=50_000,
                                                  split="paragraph")).documents == 100
    with pytest.raises(ConfigError, match="max_chars must be a positive integer"):
        DataConfig(max_chars=0)

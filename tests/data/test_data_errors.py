"""Bad corpus files: each one gives a CorpusError naming the file and the position, nothing else escapes."""

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from minimind.data import DataConfig, inspect_corpus, iter_texts, prepare_corpus
from minimind.errors import CorpusError

POEM = "床前明月光，疑是地上霜。\n舉頭望明月，低頭思故鄉。"


def jsonl(*records) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records).encode()


def chat(*messages) -> dict:
    return {"messages": [{"role": r, "content": c} for r, c in messages]}


def parquet_bytes(tmp_path, table: dict) -> bytes:
    path = tmp_path / "made.parquet.tmp"
    pq.write_table(pa.table(table), path)
    return path.read_bytes()


# (case id, file name, content (bytes, or a function of tmp_path), config overrides,
#  position the error must name, words the reason must contain)
CASES = [
    ("zero-byte upload", "upload.jsonl", b"", {}, "byte 0", "empty (0 bytes)"),
    ("whitespace only", "empty.txt", b"\n \n\t\n", {}, "byte 0", "only whitespace"),
    ("binary png", "photo.txt", b"\x89PNG\r\n\x1a\n" + bytes(range(256)), {}, "byte 0", "PNG image"),
    ("binary NUL", "blob.jsonl", b'{"text": "a"}\n\x00\x01\x02\x03', {}, "byte 14", "NUL byte"),
    ("NUL past the first 64 KiB", "late.txt", b"text\n" * 20000 + b"a\x00b", {}, "byte 100001 (line 20001)",
     "NUL byte"),
    ("invalid UTF-8", "broken.txt", b"hello\nworld \xff\xfe ok\n", {}, "byte 12 (line 2)", "invalid UTF-8"),
    ("truncated UTF-8", "cut.txt", "abc床".encode()[:-1], {}, "byte 3 (line 1)", "ends in the middle"),
    ("GBK-looking", "gbk.txt", (POEM + "\n").encode("gbk") * 3, {}, "byte 0 (line 1)", "GBK"),
    ("Latin-1-looking", "latin.txt", "café au lait, très bien\n".encode("cp1252"), {}, "(line 1)", "Windows-1252"),
    ("UTF-16 without BOM", "utf16.txt", "hello world, plain text\n".encode("utf-16-le"), {}, "byte 1",
     "UTF-16 little-endian"),
    ("malformed JSON at line 3", "bad.jsonl", jsonl({"text": "a"}, {"text": "b"}, '{"text": "c",'), {}, "line 3",
     "malformed JSON"),
    ("unclosed JSON record: the column is where the line ends", "open.jsonl", jsonl({"text": "a"}, '{"text": "b"'), {},
     "line 2", "Expecting ',' delimiter at column 13"),
    ("record missing the field", "poems.jsonl", jsonl({"text": "a"}, {"title": "b", "author": "c"}), {}, "line 2",
     "missing field 'text'"),
    ("missing the named field", "named.jsonl", jsonl({"poem": "a"}, {"text": "b"}), {"text_field": "poem"}, "line 2",
     "missing field 'poem'"),
    ("text field not a string", "num.jsonl", jsonl({"text": "a"}, {"text": 42}), {}, "line 2", "expected a string"),
    ("bad role", "chat.jsonl", jsonl(chat(("user", "hi"), ("assistant", "yo")), chat(("user", "hi"), ("robot", "x"))),
     {}, "line 2", "role 'robot'"),
    ("empty conversation", "chat.jsonl", jsonl({"messages": []}), {}, "line 1", "empty conversation"),
    ("no assistant", "chat.jsonl", jsonl(chat(("user", "hi"))), {}, "line 1", "no assistant message"),
    ("content not a string", "chat.jsonl", jsonl({"messages": [{"role": "user", "content": None}]}), {}, "line 1",
     "content null"),
    ("mixed kinds in one file", "mixed.jsonl", jsonl({"text": "a"}, chat(("user", "q"), ("assistant", "a"))), {},
     "line 2", "mixed kinds"),
    ("record is not an object", "list.jsonl", jsonl({"text": "a"}, "[1, 2]"), {}, "line 2", "expected a JSON object"),
    ("instruction without output", "alpaca.jsonl", jsonl({"instruction": "do", "input": ""}),
     {"kind": "instruction"}, "line 1", "missing field 'output'"),
    ("CSV with no text-like column", "table.csv", b"id,price\n1,2.5\n2,3.5\n", {}, "header (line 1)",
     "no text-like column"),
    ("CSV row with a wrong field count", "rows.csv", b"id,text\n1,hello\n2,world,extra\n", {}, "row 2 (line 3)",
     "found 3 fields"),
    ("over the size limit", "big.txt", b"x" * 3000, {"max_file_mb": 0.001}, "byte 1048", "limit is 0.001 MiB"),
    ("path traversal", "../../outside.txt", b"text\n", {"root": "uploads"}, "file name", "outside the corpus folder"),
    ("unsupported type", "notes.docx", b"PK\x03\x04....", {}, "file name", "unsupported file type '.docx'"),
    ("JSON object holding the records", "wrapped.json", json.dumps({"data": [{"text": "a"}]}).encode(), {}, "line 1",
     "array of records"),
    ("JSON scalar", "scalar.json", b"42\n", {}, "line 1", "expected an array of records"),
    ("JSON array of non-records", "numbers.json", b"[1, 2, 3]", {}, "record 1 (line 1)", "expected a JSON object"),
    ("malformed JSON array", "array.json", b'[\n{"text": "a"},\n{"text": }\n]', {}, "record 2 (line 3)",
     "malformed JSON"),
    ("corrupt parquet", "data.parquet", b"PAR1" + b"\x00garbage" * 50, {}, "file footer", "corrupt parquet"),
    ("parquet that is not parquet", "fake.parquet", b"text\nhello\n", {}, "byte 0", "expected 'PAR1'"),
    ("parquet without a text column", "nums.parquet", lambda tmp: parquet_bytes(tmp, {"id": [1, 2]}), {}, "schema",
     "no text-like column"),
    ("chat kind forced on a .txt", "plain.txt", b"hello\n", {"kind": "chat"}, "line 1", "holds plain text"),
    ("lenient limit exceeded", "noisy.jsonl", jsonl({"text": "ok"}, "{bad", "{bad", "{bad", {"text": "fine"}),
     {"strict": False, "max_skipped": 2}, "line 4", "more than 2 bad records"),
]


def write(tmp_path, name: str, content) -> str:
    """Write the case file under tmp_path/uploads and return the name to hand in (relative to it)."""
    base = tmp_path / "uploads"
    base.mkdir(exist_ok=True)
    data = content(tmp_path) if callable(content) else content
    target = (base / name).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return name


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_file_gives_corpus_error_with_file_and_position(tmp_path, monkeypatch, case):
    _, name, content, overrides, position, words = case
    monkeypatch.chdir(tmp_path)
    given = write(tmp_path, name, content)
    if "root" not in overrides:
        given = f"uploads/{given}"
    config = DataConfig(cache_dir=str(tmp_path / "cache"), **overrides)
    with pytest.raises(CorpusError) as caught:
        inspect_corpus([given], config)
    err = caught.value
    assert err.file == given and err.position and position in err.position, str(err)
    assert str(err).startswith(f"{given}: {err.position}: ")
    assert words in err.reason, str(err)


def test_matrix_covers_every_required_error():
    assert len(CASES) >= 15
    ids = " ".join(c[0] for c in CASES)
    for required in ("zero-byte", "whitespace", "binary", "invalid UTF-8", "GBK", "UTF-16", "malformed JSON",
                     "missing the field", "bad role", "empty conversation", "mixed kinds", "no text-like",
                     "size limit", "path traversal", "not an object", "corrupt parquet", "lenient"):
        assert required in ids, required


def test_prepare_and_iter_texts_refuse_the_same_files(tmp_path, tokenizer):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(jsonl({"text": "a"}, "{oops"))
    config = DataConfig(cache_dir=str(tmp_path / "cache"))
    with pytest.raises(CorpusError, match="line 2"):
        prepare_corpus([bad], tokenizer, config)
    with pytest.raises(CorpusError, match="line 2"):
        list(iter_texts([bad]))
    with pytest.raises(CorpusError, match="no such file"):
        iter_texts([tmp_path / "missing.txt"])  # file checks run before the first text is asked for


def test_lenient_mode_skips_up_to_the_limit_and_reports_positions(tmp_path):
    path = tmp_path / "noisy.jsonl"
    path.write_bytes(jsonl({"text": "one"}, "{bad", {"title": "no text"}, {"text": "two"}, "[3]", {"text": "3"}))
    stats = inspect_corpus([path], DataConfig(cache_dir=str(tmp_path / "c"), strict=False, max_skipped=3))
    assert stats.documents == 3 and stats.skipped_count == 3
    assert [s.position for s in stats.skipped] == ["line 2", "line 3", "line 5"]
    assert all(s.file == str(path) for s in stats.skipped)
    assert "malformed JSON" in stats.skipped[0].reason and "missing field" in stats.skipped[1].reason
    with pytest.raises(CorpusError, match="line 2"):
        inspect_corpus([path], DataConfig(cache_dir=str(tmp_path / "c")))


def test_utf16_with_bom_is_decoded_and_reported(tmp_path):
    text = POEM + "\n\nTo be, or not to be.\n"
    (tmp_path / "u8.txt").write_text(text, encoding="utf-8")
    (tmp_path / "u16.txt").write_bytes(text.encode("utf-16"))  # with a byte-order mark
    (tmp_path / "u8bom.txt").write_bytes(text.encode("utf-8-sig"))
    config = DataConfig(cache_dir=str(tmp_path / "c"))
    plain = inspect_corpus([tmp_path / "u8.txt"], config)
    for name in ("u16.txt", "u8bom.txt"):
        stats = inspect_corpus([tmp_path / name], config)
        assert (stats.documents, stats.characters, stats.samples) == (plain.documents, plain.characters,
                                                                       plain.samples)
    assert any("UTF-16" in w and "u16.txt" in w for w in inspect_corpus([tmp_path / "u16.txt"], config).warnings)
    assert list(iter_texts([tmp_path / "u16.txt"])) == [POEM + "\n\nTo be, or not to be."]  # one section
    assert list(iter_texts([tmp_path / "u16.txt"], config=DataConfig(split="paragraph"))) == [POEM, "To be, or not to be."]


def test_hostile_names_are_refused_and_printed_safely(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "uploads").mkdir()
    (tmp_path / "secret.txt").write_text("secret\n")
    (tmp_path / "uploads" / "link.txt").symlink_to(tmp_path / "secret.txt")
    config = DataConfig(cache_dir=str(tmp_path / "c"), root=str(tmp_path / "uploads"))
    for name in ("../secret.txt", str(tmp_path / "secret.txt"), "link.txt", "sub/../../secret.txt"):
        with pytest.raises(CorpusError, match="outside the corpus folder"):
            inspect_corpus([name], config)
    for name in ("evil\x1b[31m\n.txt", "nul\x00.txt", ""):
        with pytest.raises(CorpusError) as caught:
            inspect_corpus([name], DataConfig(cache_dir=str(tmp_path / "c")))
        assert not re.search(r"[\x00-\x1f]", str(caught.value))
    with pytest.raises(CorpusError, match="folder"):
        inspect_corpus([tmp_path / "uploads"], DataConfig(cache_dir=str(tmp_path / "c")))
    with pytest.raises(CorpusError, match="not a regular file"):
        inspect_corpus(["/dev/null"], DataConfig(cache_dir=str(tmp_path / "c")))


def test_files_of_different_kinds_are_refused(tmp_path):
    (tmp_path / "plain.jsonl").write_bytes(jsonl({"text": "a"}))
    (tmp_path / "chat.jsonl").write_bytes(jsonl(chat(("user", "q"), ("assistant", "a"))))
    with pytest.raises(CorpusError) as caught:
        inspect_corpus([tmp_path / "plain.jsonl", tmp_path / "chat.jsonl"], DataConfig(cache_dir=str(tmp_path)))
    assert caught.value.file.endswith("chat.jsonl") and caught.value.position == "line 1"
    assert "one kind per corpus" in str(caught.value)


def test_no_files_and_all_empty_records(tmp_path):
    with pytest.raises(CorpusError, match="no files"):
        inspect_corpus([], DataConfig(cache_dir=str(tmp_path)))
    (tmp_path / "blank.jsonl").write_bytes(jsonl({"text": ""}, {"text": "  "}))
    with pytest.raises(CorpusError, match="no usable documents"):
        inspect_corpus([tmp_path / "blank.jsonl"], DataConfig(cache_dir=str(tmp_path)))

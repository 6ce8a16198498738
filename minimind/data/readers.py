"""Stream the records of one checked file, each with its position (line, record or row).

Readers parse in a single streaming pass and never hold a whole file: JSON Lines
line by line, a JSON array element by element, CSV row by row, parquet batch by
batch, text paragraph by paragraph. A record that cannot be parsed goes to
`Problems` (which raises in strict mode); a file-level fault raises CorpusError.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import CorpusError
from .config import DataConfig
from .files import CorpusFile
from .labels import expected as expected_labelled
from .kinds import expected_fields, needed_columns
from .validate import Problems, describe, snippet

TEXT_CHUNK = 1 << 20           # characters read at a time from a .json array
MAX_RECORD_CHARS = 64 << 20    # one JSON array element may not be larger than this
CSV_FIELD_LIMIT = 64 << 20     # csv's default limit (128 KiB per field) is too small for documents
PARQUET_BATCH_ROWS = 256       # rows decoded at a time
# A parquet file is compressed, and dictionary encoding stores a repeated value once: 523 bytes can
# decode to 300 MiB. Prose compresses 1.3-3x, chats that repeat one long system prompt in every row
# about 100x; a file may decode to this many times its size (plus PARQUET_FREE_BYTES), checked from
# its metadata before a page is read and again batch by batch, before the rows are written out.
PARQUET_MAX_EXPANSION = 1000
PARQUET_FREE_BYTES = 1 << 20
DELIMITERS = ",;\t|"
SECTION_BREAK_LINES = 3  # blank lines that end a scene or chapter in most plain-text books


def read_text(info: CorpusFile, config: DataConfig) -> Iterator[tuple[str, str]]:
    """(position, document) of a .txt/.md file: sections, paragraphs or lines (`config.split`);
    a paragraph longer than max_document_chars is cut at line ends."""
    with info.path.open(encoding=info.encoding, newline=None) as fh:
        if config.split == "line":
            for n, line in enumerate(fh, 1):
                if line.strip():
                    yield f"line {n}", line.rstrip("\n")
            return
        yield from _blocks(fh, config)


def _blocks(fh, config: DataConfig) -> Iterator[tuple[str, str]]:
    """Paragraphs (split "paragraph") or sections (split "section"): runs of paragraphs with the
    blank lines between them kept, cut before a paragraph once a section holds section_chars, or
    at a break of SECTION_BREAK_LINES blank lines (a scene, a chapter) once it holds a quarter of that."""
    sections = config.split == "section"
    lines: list[str] = []
    size = start = blanks = 0

    def flush():
        return f"line {start}", "".join(lines).strip("\n")

    for n, line in enumerate(fh, 1):
        if not line.strip():
            blanks += 1
            if lines and not sections:
                yield flush()
                lines, size = [], 0
            continue
        if lines and sections and blanks and (
                size >= config.section_chars
                or blanks >= SECTION_BREAK_LINES and size >= config.section_chars // 4):
            yield flush()
            lines, size = [], 0
        if not lines:
            start = n
        elif blanks:
            lines.append("\n" * blanks)
        blanks = 0
        lines.append(line)
        size += len(line)
        if size >= config.max_document_chars:
            yield flush()
            lines, size = [], 0
    if lines:
        yield flush()


def read_records(info: CorpusFile, config: DataConfig, problems: Problems) -> Iterator[tuple[str, object]]:
    """(position, parsed record) of a JSONL, JSON, CSV or parquet file."""
    reader = {"jsonl": _jsonl, "json": _json, "csv": _csv, "parquet": _parquet}[info.format]
    yield from reader(info, config, problems)


def _jsonl(info: CorpusFile, config: DataConfig, problems: Problems) -> Iterator[tuple[str, object]]:
    with info.path.open(encoding=info.encoding, newline=None) as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:  # without its line end, which json would count as a second line (its column then 1)
                yield f"line {n}", json.loads(line.rstrip("\n"))
            except json.JSONDecodeError as err:
                problems.bad(info.name, f"line {n}", f"malformed JSON ({err.msg} at column {err.colno}): found "
                             f"{snippet(line.strip())}; expected one JSON object per line")
            except RecursionError:
                problems.bad(info.name, f"line {n}", "JSON nested too deeply; expected a flat record")


class _JsonStream:
    """A .json file read in chunks: values decoded one at a time with their line numbers."""

    def __init__(self, fh, name: str):
        self.fh, self.name = fh, name
        self.buf, self.pos, self.eof = "", 0, False
        self.line, self.counted = 1, 0  # line number at buffer index `counted`
        self.decoder = json.JSONDecoder()

    def more(self) -> bool:
        """Drop what was consumed and read the next chunk; False at end of file."""
        if self.eof:
            return False
        self.where(self.pos)
        self.buf, self.counted, self.pos = self.buf[self.pos:], self.counted - self.pos, 0
        chunk = self.fh.read(TEXT_CHUNK)
        self.eof = not chunk
        self.buf += chunk
        return bool(chunk)

    def skip_space(self) -> str:
        """The next non-whitespace character (not consumed), or '' at end of file."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf) or not self.more():
                return self.buf[self.pos: self.pos + 1]

    def where(self, pos: int | None = None) -> int:
        """Line number at buffer index `pos` (counting newlines only once, as positions advance)."""
        pos = self.pos if pos is None else pos
        if pos > self.counted:
            self.line += self.buf.count("\n", self.counted, pos)
            self.counted = pos
        return self.line

    def value(self, record: int) -> object:
        """Decode the value starting here, reading more while it is incomplete."""
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as err:
                near_end = len(self.buf) - err.pos < 4096 or err.msg.startswith("Unterminated string")
                if near_end and len(self.buf) - self.pos < MAX_RECORD_CHARS and not self.eof:
                    self.more()  # maybe only cut off by the chunk: decode again with more text
                    continue
                raise CorpusError(f"malformed JSON ({err.msg}): found {snippet(self.buf[err.pos: err.pos + 40])}; "
                                  "expected a valid JSON array of records", self.name,
                                  f"record {record} (line {self.where(err.pos)})") from None
            except RecursionError:
                raise CorpusError("JSON nested too deeply; expected flat records", self.name,
                                  f"record {record} (line {self.where()})") from None
            self.pos = end
            return value


def _json(info: CorpusFile, config: DataConfig, problems: Problems) -> Iterator[tuple[str, object]]:
    """A JSON array of records; a file of concatenated objects (mislabelled JSON Lines) also works."""
    with info.path.open(encoding=info.encoding, newline=None) as fh:
        stream = _JsonStream(fh, info.name)
        first = stream.skip_space()
        if first == "{":
            yield from _json_objects(stream, info)
            return
        if first != "[":
            value = stream.value(1)
            raise CorpusError(f"found {describe(value)} at the top level; expected an array of records "
                              "[{...}, {...}]", info.name, "line 1")
        stream.pos += 1
        n = 0
        while True:
            char = stream.skip_space()
            if char == "]" and n == 0:
                stream.pos += 1
                break
            n += 1
            line = stream.where()
            yield f"record {n} (line {line})", stream.value(n)
            char = stream.skip_space()
            if char == ",":
                stream.pos += 1
            elif char == "]":
                stream.pos += 1
                break
            else:
                raise CorpusError(f"found {snippet(char) if char else 'the end of the file'} after record {n}; "
                                  "expected ',' or ']'", info.name, f"line {stream.where()}")
        if stream.skip_space():
            raise CorpusError("found more data after the closing ']'; expected one JSON array",
                              info.name, f"line {stream.where()}")


def _json_objects(stream: _JsonStream, info: CorpusFile) -> Iterator[tuple[str, object]]:
    n = 0
    while stream.skip_space():
        n += 1
        line = stream.where()
        value = stream.value(n)
        if n == 1 and isinstance(value, dict) and not stream.skip_space():
            lists = [k for k, v in value.items() if isinstance(v, list) and v and isinstance(v[0], dict)]
            records_like = ("messages", "conversations", "text", "content", "chosen", "prompt")
            if lists and not any(k in value for k in records_like):
                raise CorpusError(f"found one JSON object whose field {lists[0]!r} holds the records; expected "
                                  "an array of records at the top level — save that list on its own",
                                  info.name, "line 1")
        yield f"record {n} (line {line})", value


def _csv(info: CorpusFile, config: DataConfig, problems: Problems) -> Iterator[tuple[str, object]]:
    # The csv module's field limit is process-wide; raising it (never lowering) is harmless to other users.
    csv.field_size_limit(max(csv.field_size_limit(), CSV_FIELD_LIMIT))
    with info.path.open(encoding=info.encoding, newline="") as fh:
        first_line = fh.readline()
        fh.seek(0)
        delimiter = "\t" if info.suffix == ".tsv" else max(DELIMITERS, key=first_line.count)
        rows = csv.reader(fh, delimiter=delimiter)
        try:
            header = [h.strip() for h in next(rows)]
        except (StopIteration, csv.Error) as err:
            raise CorpusError(f"cannot read the header row ({err}); expected column names", info.name,
                              "line 1") from None
        _check_columns(header, info, config, "header (line 1)")
        n, last_line = 0, rows.line_num
        while True:
            try:
                row = next(rows)
            except StopIteration:
                break
            except csv.Error as err:
                if rows.line_num == last_line:
                    raise CorpusError(f"unreadable CSV ({err})", info.name, f"line {last_line + 1}") from None
                problems.bad(info.name, f"line {last_line + 1}", f"unreadable CSV row ({err}); expected "
                             f"{len(header)} fields separated by {delimiter!r}")
                last_line = rows.line_num
                continue
            start, last_line = last_line + 1, rows.line_num
            if not row or row == [""]:
                continue
            n += 1
            if len(row) != len(header):
                problems.bad(info.name, f"row {n} (line {start})", f"found {len(row)} fields; expected "
                             f"{len(header)} as in the header (separated by {delimiter!r})")
                continue
            yield f"row {n} (line {start})", dict(zip(header, row))


def _parquet(info: CorpusFile, config: DataConfig, problems: Problems) -> Iterator[tuple[str, object]]:
    try:
        table = pq.ParquetFile(info.path)
        names = table.schema_arrow.names
    except (pa.ArrowException, OSError, ValueError) as err:
        raise CorpusError(f"corrupt parquet file ({_first_line(err)}); expected a readable parquet file",
                          info.name, "file footer") from None
    columns = _check_columns(names, info, config, "schema")
    limit = PARQUET_MAX_EXPANSION * info.size + PARQUET_FREE_BYTES
    leaves = _check_stored_size(table.metadata, columns, limit, info)
    try:  # strings come back as dictionaries, as stored: counted below before they are written out
        table = pq.ParquetFile(info.path, read_dictionary=leaves)
    except (pa.ArrowException, OSError, ValueError, KeyError) as err:
        raise CorpusError(f"corrupt parquet file ({_first_line(err)}); expected a readable parquet file",
                          info.name, "file footer") from None
    n = decoded = 0
    for group in range(table.num_row_groups):
        try:
            for batch in table.iter_batches(row_groups=[group], columns=columns, batch_size=PARQUET_BATCH_ROWS):
                decoded += sum(_decoded_bytes(column) for column in batch.columns)
                if decoded > limit:
                    raise _expands(info, limit, f"row {n + 1}")
                for record in batch.to_pylist():
                    n += 1
                    yield f"row {n}", record
        except (pa.ArrowException, OSError, ValueError) as err:
            raise CorpusError(f"corrupt parquet data ({_first_line(err)}); expected readable rows", info.name,
                              f"row group {group + 1} (after row {n})") from None


def _expands(info: CorpusFile, limit: int, position: str) -> CorpusError:
    return CorpusError(f"this parquet file decodes to more than {limit:,} bytes, {PARQUET_MAX_EXPANSION} times its "
                       f"{info.size:,} bytes on disk (plus {PARQUET_FREE_BYTES >> 20} MiB): far more than text "
                       "compresses to; if it is real text, save it as JSON Lines or CSV", info.name, position)


_VALUE_BYTES = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 4}


def _check_stored_size(meta: pq.FileMetaData, columns: list[str], limit: int, info: CorpusFile) -> list[str]:
    """Refuse, before any page is read, a file whose chunks of `columns` say they decode past
    `limit`: their pages decompressed, or their values at their width (a value is at least its
    width however well it compresses: 40M zeros in a list are 320 MB), whichever is more. Returns
    those columns' string leaves (paths such as messages.list.element.content)."""
    leaves, widths = [], {}
    for i in range(meta.num_columns):
        column = meta.schema.column(i)
        if column.path.split(".")[0] not in columns:
            continue
        widths[column.path] = column.length if column.physical_type == "FIXED_LEN_BYTE_ARRAY" else \
            _VALUE_BYTES.get(column.physical_type, 1)
        if column.physical_type == "BYTE_ARRAY":
            leaves.append(column.path)
    stored = 0
    for group in range(meta.num_row_groups):
        row_group = meta.row_group(group)
        for i in range(row_group.num_columns):
            chunk = row_group.column(i)
            if chunk.path_in_schema in widths:
                stored += max(chunk.total_uncompressed_size, chunk.num_values * max(widths[chunk.path_in_schema], 1))
    if stored > limit:
        raise _expands(info, limit, "file footer")
    return leaves


def _decoded_bytes(array: pa.Array) -> int:
    """Bytes `array` holds once each value is written out: a dictionary's values counted every time
    they are used (not once, as the array stores them), inside lists and structs too."""
    kind = array.type
    if pa.types.is_dictionary(kind):
        values = array.dictionary
        if pa.types.is_string(values.type) or pa.types.is_binary(values.type) or \
                pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type):
            return int(pc.sum(pc.take(pc.binary_length(values), array.indices)).as_py() or 0) + len(array)
        return values.nbytes * len(array) // max(1, len(values))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return 8 * len(array) + _decoded_bytes(array.flatten())
    if pa.types.is_struct(kind):
        return sum(_decoded_bytes(array.field(i)) for i in range(kind.num_fields))
    return array.nbytes


def _check_columns(names: list[str], info: CorpusFile, config: DataConfig, position: str) -> list[str]:
    """The columns to read; CorpusError when the table has none a kind could use."""
    columns = needed_columns(names, config.kind, config.text_field, config.label_field)
    if columns is None:
        want = (expected_fields(config.text_field) if config.kind == "auto" else
                expected_labelled(config.text_field, config.label_field)
                if config.kind == "labelled" or config.label_field else
                f"the columns of kind {config.kind!r}")
        shown = ", ".join(snippet(n, 30) for n in names[:12]) or "none"
        raise CorpusError(f"no text-like column: found columns [{shown}]; expected {want}", info.name, position)
    return columns


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0][:200] if text else type(err).__name__

"""Open a corpus file safely and check its bytes before any parsing starts.

Every refusal here is a CorpusError naming the file and a position: a name
that leaves the allowed folder, a missing or special file, an unknown type,
a size over the limit, an empty or binary file, or text that is not UTF-8
(with a guess at what it is instead). UTF-16/UTF-32 with a byte-order mark is
certain enough to decode; that is reported as a warning. The same pass hashes
the bytes, which is the file's part of the cache key.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CorpusError
from .config import DataConfig
from .validate import safe_name

FORMATS = {".txt": "text", ".md": "text", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json",
           ".csv": "csv", ".tsv": "csv", ".parquet": "parquet"}
CHUNK = 1 << 20   # bytes read at a time
HEAD = 1 << 16    # bytes looked at for byte-order marks, NULs and file signatures
MIB = 1 << 20

# Byte-order marks, longest first (the UTF-32 LE mark starts with the UTF-16 LE one).
BOMS = [(codecs.BOM_UTF32_LE, "utf-32", "UTF-32 little-endian"), (codecs.BOM_UTF32_BE, "utf-32", "UTF-32 big-endian"),
        (codecs.BOM_UTF8, "utf-8-sig", "UTF-8"), (codecs.BOM_UTF16_LE, "utf-16", "UTF-16 little-endian"),
        (codecs.BOM_UTF16_BE, "utf-16", "UTF-16 big-endian")]
SIGNATURES = [(b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
              (b"%PDF", "a PDF document"), (b"PK\x03\x04", "a zip archive (or .docx/.xlsx)"),
              (b"\x1f\x8b", "a gzip archive"), (b"BZh", "a bzip2 archive"), (b"\xfd7zXZ", "an xz archive"),
              (b"7z\xbc\xaf", "a 7-zip archive"), (b"\x28\xb5\x2f\xfd", "a zstd archive"),
              (b"\x7fELF", "a program (ELF)"), (b"MZ", "a Windows program"), (b"PAR1", "a parquet file"),
              (b"SQLite format 3", "an SQLite database"), (b"ARROW1", "an Arrow file"),
              (b"RIFF", "audio or video (RIFF)"), (b"ID3", "an MP3 file"),
              (b"\xd0\xcf\x11\xe0", "an old Office document")]


@dataclass
class CorpusFile:
    """A checked corpus file: where it is, how to decode it and what its bytes hash to."""

    path: Path                 # resolved path on disk
    name: str                  # the name as given, safe to print
    format: str                # "text", "jsonl", "json", "csv" or "parquet"
    suffix: str                # lower-case extension, e.g. ".tsv"
    size: int                  # bytes
    encoding: str = ""         # codec to open it with ("utf-8", "utf-8-sig", "utf-16", "utf-32"); "" for parquet
    digest: str = ""           # blake2b of the bytes
    warnings: list[str] = field(default_factory=list)


def open_file(given: str | os.PathLike, config: DataConfig) -> CorpusFile:
    """Resolve, check and scan one file; raise CorpusError for anything unusable."""
    info = _resolve(given, config)
    if info.format == "parquet":
        _scan_parquet(info)
    else:
        _scan_text(info, int(config.max_file_mb * MIB))
    return info


def _resolve(given: str | os.PathLike, config: DataConfig) -> CorpusFile:
    raw = os.fspath(given)
    name = safe_name(raw) or "(empty name)"
    if not raw or "\x00" in raw:
        raise CorpusError("the file name is empty or holds a NUL byte; expected a file path", name, "file name")
    path = Path(raw)
    if config.root is not None:
        root = Path(config.root).resolve()
        path = (root / path).resolve()
        if not path.is_relative_to(root):
            raise CorpusError("the name leads outside the corpus folder; expected a file inside that folder",
                              name, "file name")
    try:
        st = path.stat()
    except FileNotFoundError:
        raise CorpusError("no such file", name, "file name") from None
    except OSError as err:
        raise CorpusError(f"cannot open it ({err.strerror}); expected a readable file", name, "file name") from None
    if stat.S_ISDIR(st.st_mode):
        raise CorpusError("this is a folder; expected a file", name, "file name")
    if not stat.S_ISREG(st.st_mode):
        raise CorpusError("this is not a regular file (a device, pipe or socket); expected a file", name, "file name")
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise CorpusError(f"unsupported file type {suffix or '(no extension)'!r}; expected one of "
                          f"{', '.join(FORMATS)}", name, "file name")
    limit = int(config.max_file_mb * MIB)
    if st.st_size > limit:
        raise CorpusError(f"the file is {st.st_size:,} bytes ({st.st_size / MIB:,.1f} MiB); the limit is "
                          f"{config.max_file_mb:g} MiB",
                          name, f"byte {limit}")
    if st.st_size == 0:
        raise CorpusError("the file is empty (0 bytes); expected text or records", name, "byte 0")
    return CorpusFile(path=path, name=name, format=FORMATS[suffix], suffix=suffix, size=st.st_size)


def _scan_parquet(info: CorpusFile) -> None:
    digest = hashlib.blake2b(digest_size=16)
    with info.path.open("rb") as fh:
        head = fh.read(4)
        if head != b"PAR1":
            raise CorpusError(f"this is not a parquet file: found bytes {head.hex(' ')!r} "
                              f"({_signature(head) or 'no parquet header'}); expected 'PAR1'", info.name, "byte 0")
        digest.update(head)
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    info.digest = digest.hexdigest()


def _scan_text(info: CorpusFile, limit: int) -> None:
    """Decode the whole file once: validates the encoding, counts lines, hashes the bytes."""
    with info.path.open("rb") as fh:
        head = fh.read(HEAD)
        encoding, label = _bom(head)
        if encoding is None:
            _refuse_binary(info, head)
            encoding = "utf-8"
        elif encoding != "utf-8-sig":
            info.warnings.append(f"{info.name}: decoded as {label} (byte-order mark found); "
                                 "saving it as UTF-8 is smaller and safer")
        info.encoding = encoding
        decoder = codecs.getincrementaldecoder(encoding)("strict")
        digest = hashlib.blake2b(digest_size=16)
        fed = lines = 0
        has_text = False
        chunk = head
        while chunk:
            digest.update(chunk)
            pending = decoder.getstate()[0]
            try:
                text = decoder.decode(chunk)
            except UnicodeDecodeError as err:
                _refuse_encoding(info, encoding, label, pending + chunk, err, fed - len(pending), lines)
            nul = chunk.find(b"\x00") if encoding.startswith("utf-8") else -1
            if nul >= 0:  # a NUL past the first 64 KiB: binary data inside text
                line = lines + chunk.count(b"\n", 0, nul) + 1
                raise CorpusError("found a NUL byte: this is binary data, not text; expected UTF-8 text",
                                  info.name, f"byte {fed + nul} (line {line})")
            fed += len(chunk)
            if fed > limit:
                raise CorpusError(f"the file grew past the limit of {limit / MIB:g} MiB while being read",
                                  info.name, f"byte {limit}")
            lines += text.count("\n")
            has_text = has_text or not text.isspace() and text != ""
            chunk = fh.read(CHUNK)
        start = fed - len(decoder.getstate()[0])
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise CorpusError(f"the file ends in the middle of a {encoding.upper()} character (truncated?); "
                              "expected complete characters", info.name, f"byte {start} (line {lines + 1})") from None
    info.digest = digest.hexdigest()
    if not has_text:
        raise CorpusError("the file holds only whitespace; expected text or records", info.name, "byte 0")


def _bom(head: bytes) -> tuple[str | None, str]:
    for mark, encoding, label in BOMS:
        if head.startswith(mark):
            return encoding, label
    return None, ""


def _refuse_binary(info: CorpusFile, head: bytes) -> None:
    what = _signature(head)
    nul = head.find(b"\x00")
    if what is None and nul < 0:
        return
    if what is None:
        utf16 = _utf16_without_bom(head)
        if utf16:
            raise CorpusError(f"found NUL bytes in every other position: this looks like {utf16} text without a "
                              "byte-order mark, which cannot be decoded with certainty; expected UTF-8 — re-save "
                              "it as UTF-8 (or as UTF-16 with a byte-order mark)", info.name, f"byte {nul}")
        raise CorpusError("found a NUL byte: this is binary data, not text; expected UTF-8 text",
                          info.name, f"byte {nul}")
    raise CorpusError(f"this is binary data (it looks like {what}); expected UTF-8 text", info.name, "byte 0")


def _signature(head: bytes) -> str | None:
    for magic, what in SIGNATURES:
        if head.startswith(magic):
            return what
    return None


def _utf16_without_bom(head: bytes) -> str | None:
    """'UTF-16 little-endian' when most odd bytes are NUL (ASCII-range text), and so on."""
    sample = head[: len(head) // 2 * 2]
    if len(sample) < 4:
        return None
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    half = len(sample) // 2
    if odd > 0.3 * half and even < 0.05 * half:
        return "UTF-16 little-endian"
    if even > 0.3 * half and odd < 0.05 * half:
        return "UTF-16 big-endian"
    return None


def _refuse_encoding(info: CorpusFile, encoding: str, label: str, data: bytes, err: UnicodeDecodeError,
                     base: int, lines: int) -> None:
    offset = base + err.start
    line = lines + data[: err.start].count(b"\n") + 1 if encoding.startswith("utf-8") else lines + 1
    found = data[err.start: err.start + 4].hex(" ")
    if encoding.startswith("utf-8"):
        guess = guess_encoding(data[max(0, err.start - 4000): err.start + 4000])
        hint = (f"it looks like {guess[0]} — re-save it as UTF-8 (e.g. `iconv -f {guess[1]} -t UTF-8 "
                "in.txt > out.txt`)" if guess else "re-save it as UTF-8")
        message = f"invalid UTF-8: found bytes {found!r} that are not UTF-8; expected UTF-8 text; {hint}"
    else:
        message = (f"its byte-order mark says {label}, but found bytes {found!r} that are not valid {label}; "
                   "expected consistent text — re-save it as UTF-8")
    raise CorpusError(message, info.name, f"byte {offset} (line {line})")


def guess_encoding(sample: bytes) -> tuple[str, str] | None:
    """(label, iconv name) of the legacy encoding a non-UTF-8 sample most likely uses; None when unsure."""
    start = next((i for i, b in enumerate(sample) if b < 0x80), 0)
    end = max((i for i, b in enumerate(sample) if b < 0x80), default=len(sample) - 1) + 1
    sample = sample[start:end]
    non_ascii = sum(b >= 0x80 for b in sample)
    if not non_ascii:
        return None
    for codec, label, iconv, is_script in (
            ("gbk", "GBK/GB18030 (Chinese)", "GB18030", lambda c: "\u4e00" <= c <= "\u9fff"),
            ("shift_jis", "Shift-JIS (Japanese)", "SHIFT_JIS",
             lambda c: "\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff"),
            ("cp1252", "Windows-1252/Latin-1 (Western European)", "WINDOWS-1252", lambda c: c.isalpha())):
        try:
            text = sample.decode(codec)
        except UnicodeDecodeError:
            continue
        wide = [c for c in text if ord(c) >= 0x80]
        if wide and sum(map(is_script, wide)) >= 0.6 * len(wide):
            return label, iconv
    return None

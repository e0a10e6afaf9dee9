"""Log files on disk, plain or gzip-compressed.

Committed datasets are large, repetitive CSV text (a thousand H200 inputs are ~13 MB, ~1 MB compressed), so
the readers take ``FILE.txt.gz`` wherever they take ``FILE.txt``. Collection still appends to plain text:
a run resumes from a plain copy, and the finished log is compressed with
``python -m torchgen_ah.merge_data FILE.txt.gz FILE.txt``.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import shutil
import warnings
import zlib

from ah_plugin.collect.log_format import AHLogError

COMPRESSED_SUFFIX = ".gz"
_CHUNK = 1 << 20


def is_compressed(path) -> bool:
    """True when ``path`` names a gzip-compressed log (by its ``.gz`` suffix)."""
    return os.fspath(path).endswith(COMPRESSED_SUFFIX)


def plain_name(path) -> str:
    """``h200_mm.txt.gz`` -> ``h200_mm.txt``; a plain name is returned as it is."""
    path = os.fspath(path)
    return path[: -len(COMPRESSED_SUFFIX)] if is_compressed(path) else path


def log_stem(path) -> str:
    """``datasets/h200/h200_mm.txt.gz`` -> ``h200_mm``: a log's dataset name, compressed or not."""
    return os.path.splitext(os.path.basename(plain_name(path)))[0]


def read_log_bytes(path, cut_short: str = "warn") -> bytes:
    """The whole log as bytes, decompressed if needed.

    A compressed file cut short (a copy that stopped) yields the whole lines before the cut, with a
    warning (``cut_short="warn"``), or raises AHLogError (``"error"``: for writers such as merge_data,
    which would make the loss permanent). The torn line is dropped, never parsed: a number cut inside
    its digits still reads as a number. Corrupt gzip data (bad bytes, a failed checksum) is an
    AHLogError naming the file: text decoded from it could hold wrong numbers.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    if not is_compressed(path):
        return raw
    out = bytearray()
    pos = 0
    while pos < len(raw):  # gzip allows several members back to back (e.g. `cat a.gz b.gz`)
        if raw[pos] == 0 and not raw[pos:].strip(b"\0"):
            break  # zero padding after the last member (tape and block devices add it; gzip ignores it)
        stream = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            while not stream.eof and pos < len(raw):
                chunk = raw[pos: pos + _CHUNK]
                pos += len(chunk)
                out += stream.decompress(chunk)
        except zlib.error as exc:  # corrupt bytes: nothing decoded from this member can be trusted
            where = "" if not out else f" after {len(out):,} bytes of good text"
            raise AHLogError(path, 1, f"not readable as gzip data{where} ({exc}); the file is corrupt, "
                                      "restore it (git checkout, or compress the plain log again)") from None
        if not stream.eof:
            whole = out.rfind(b"\n") + 1
            message = (f"compressed data ends early (file cut short): {whole:,} bytes of whole lines "
                       "before the cut")
            if cut_short == "error":
                raise AHLogError(path, out.count(b"\n", 0, whole) + 1, message)
            warnings.warn(f"{path}: {message} are read, the torn line after them is dropped")
            del out[whole:]
            break
        pos -= len(stream.unused_data)
    return bytes(out)


def read_log_head(path, lines: int = 2) -> list[str]:
    """The first ``lines`` lines of a log (metadata and header), without reading a compressed file whole."""
    opener = gzip.open if is_compressed(path) else open
    head = []
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as f:
            for _ in range(lines):
                head.append(f.readline())
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise AHLogError(path, 1, f"not readable as gzip data ({exc})") from None
    return head


def open_log_text(path, cut_short: str = "warn"):
    """A text reader over the log, line by line (universal newlines off: rows end with ``\\n``)."""
    if is_compressed(path):
        return io.TextIOWrapper(io.BytesIO(read_log_bytes(path, cut_short)), encoding="utf-8",
                                errors="replace", newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def compress_file(src, dst) -> None:
    """Gzip ``src`` into ``dst`` atomically, with no timestamp or name inside, so the same text always
    gives the same bytes (a regenerated dataset shows no spurious diff)."""
    dst = os.fspath(dst)
    tmp = f"{dst}.tmp{os.getpid()}"
    try:
        with open(src, "rb") as fin, open(tmp, "wb") as raw_out:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw_out, compresslevel=9, mtime=0) as out:
                shutil.copyfileobj(fin, out, 1 << 20)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def written_as_text(path):
    """Yield the path a whole-log writer should write plain text to: ``path`` itself, or, for a ``.gz``
    name, a temporary plain file beside it that is compressed into ``path`` when the block ends without
    an error (and removed either way)."""
    path = os.fspath(path)
    if not is_compressed(path):
        yield path
        return
    text = f"{path}.text{os.getpid()}"
    try:
        yield text
        compress_file(text, path)
    finally:
        if os.path.exists(text):
            os.remove(text)


def refuse_compressed_output(path) -> None:
    """Raise ValueError when a collector is pointed at a compressed file: it can only append plain text."""
    if is_compressed(path):
        raise ValueError(
            f"{os.fspath(path)}: a run appends to a plain-text log and cannot write gzip; collect into "
            f"{plain_name(path)} (uncompress a committed log first: gzip -dk {os.fspath(path)}) and compress "
            f"the finished log with: python -m torchgen_ah.merge_data {os.fspath(path)} {plain_name(path)}")

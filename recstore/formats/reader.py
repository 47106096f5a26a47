"""Read run records from files, directories, globs and stdin, one JSON value at a time.

Inputs stream: an NDJSON file is read line by line and never held in memory whole. Every input
yields :class:`RawInput` values carrying either the parsed JSON ``value`` or an ``error`` (bad
JSON, NaN literal, invalid UTF-8, truncated last line), so a caller can store the good records
and keep the bad ones as rejects. Each file is also described by a :class:`SourceFile` whose
SHA-256 and size are known once its records have been consumed.

Example:
    >>> for source in iter_sources(["runs.ndjson.gz"]):          # doctest: +SKIP
    ...     for raw in source.inputs():
    ...         print(raw.line, raw.error or raw.value["runId"])
    ...     print(source.sha256, source.size_bytes)
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import io
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from recstore.errors import InputError
from recstore.formats.jsontext import parse_json_bytes

__all__ = ["RawInput", "SourceFile", "iter_inputs", "iter_sources"]

STDIN = "-"
_JSON_SUFFIXES = (".json",)
_NDJSON_SUFFIXES = (".jsonl", ".ndjson")
_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class RawInput:
    """One JSON value read from a source: ``value`` when it parsed, else ``error``."""

    source_uri: str
    line: int | None
    text: str | None
    value: Any = None
    error: str | None = None
    raw: bytes | None = None  # the exact bytes, kept only when they are not valid UTF-8


class _HashingReader(io.RawIOBase):
    """Pass-through reader that hashes and counts the bytes read from ``raw``."""

    def __init__(self, raw: IO[bytes]):
        self._raw = raw
        self.sha256 = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # noqa: ANN001 - io protocol
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.sha256.update(data)
        self.size += n
        return n


class SourceFile:
    """One input: a file path or stdin. ``sha256``/``size_bytes`` are final after :meth:`inputs`."""

    def __init__(self, uri: str, path: Path | None, fmt: str, compression: str | None):
        self.uri = uri
        self.path = path
        self.format = fmt  # "json" (one document) or "ndjson" (one per line)
        self.compression = compression
        self.sha256: str | None = None
        self.size_bytes: int | None = None

    def inputs(self) -> Iterator[RawInput]:
        """Yield every value of this source, in order, with its 1-based line (NDJSON only)."""
        raw = sys.stdin.buffer if self.path is None else open(self.path, "rb")  # noqa: SIM115
        hashing = _HashingReader(raw)
        stream: IO[bytes] = io.BufferedReader(hashing, buffer_size=1 << 20)
        try:
            if self.compression == "gzip":
                stream = gzip.GzipFile(fileobj=stream, mode="rb")
            if self.format == "ndjson":
                yield from self._ndjson(stream)
            else:
                yield self._document(stream.read(), None)
            stream.read()  # hash any bytes past the last line (gzip trailer, etc.)
        except (OSError, EOFError) as exc:
            yield RawInput(self.uri, None, None, error=f"cannot read input: {exc}")
        finally:
            self.sha256 = hashing.sha256.hexdigest()
            self.size_bytes = hashing.size
            if self.path is not None:
                raw.close()

    def _ndjson(self, stream: IO[bytes]) -> Iterator[RawInput]:
        line_no = 0
        for data in stream:
            line_no += 1
            if not data.strip():
                continue
            complete = data.endswith(b"\n")
            item = self._document(data, line_no)
            if item.error and not complete:
                item = RawInput(
                    item.source_uri,
                    item.line,
                    item.text,
                    error=f"truncated last line (no newline at end): {item.error}",
                    raw=item.raw,
                )
            yield item

    def _document(self, data: bytes, line: int | None) -> RawInput:
        value, error = parse_json_bytes(data)
        if error is None:
            return RawInput(self.uri, line, None, value)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return RawInput(
                self.uri, line, data.decode("utf-8", "replace"), error=error, raw=bytes(data)
            )
        return RawInput(self.uri, line, text.rstrip("\r\n"), error=error)


def _classify(path: Path) -> tuple[str, str | None] | None:
    name = path.name.lower()
    compression = None
    if name.endswith(".gz"):
        compression = "gzip"
        name = name[:-3]
    if name.endswith(_JSON_SUFFIXES):
        return "json", compression
    if name.endswith(_NDJSON_SUFFIXES):
        return "ndjson", compression
    return None


def _expand(arg: str) -> list[Path]:
    path = Path(arg)
    if path.is_dir():
        found = [
            Path(root) / f
            for root, _dirs, files in os.walk(path)
            for f in files
            if _classify(Path(f)) is not None
        ]
        return sorted(found)
    if path.exists():
        if _classify(path) is None:
            raise InputError(
                "unsupported file type (expected .json, .jsonl, .ndjson, optionally .gz)",
                source=arg,
            )
        return [path]
    if _GLOB_CHARS.search(arg):
        matches = [Path(m) for m in sorted(glob.glob(arg, recursive=True))]
        files = [m for m in matches if m.is_file() and _classify(m) is not None]
        if not files:
            raise InputError("the pattern matches no .json/.jsonl/.ndjson files", source=arg)
        return files
    raise InputError("no such file or directory", source=arg)


def iter_sources(paths: Iterable[str]) -> Iterator[SourceFile]:
    """Expand ``paths`` (files, directories recursively, globs, ``-`` for NDJSON on stdin).

    All paths are checked before the first source is yielded, so a typo fails fast.

    Raises:
        InputError: a path does not exist, matches nothing, or has an unsupported extension.
    """
    plan: list[SourceFile] = []
    for arg in paths:
        if arg == STDIN:
            plan.append(SourceFile("stdin", None, "ndjson", None))
            continue
        for path in _expand(arg):
            fmt, compression = _classify(path) or ("ndjson", None)
            plan.append(SourceFile(str(path.resolve()), path, fmt, compression))
    yield from plan


def iter_inputs(paths: Iterable[str]) -> Iterator[RawInput]:
    """Every value of every source in ``paths``; see :func:`iter_sources`."""
    for source in iter_sources(paths):
        yield from source.inputs()


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

import enum
import errno
import fnmatch
import gzip
import hashlib
import io
import mmap
import os
import re
import stat
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from recstore.errors import InputError
from recstore.formats import DEFAULT_MAX_RECORD_BYTES
from recstore.formats.jsontext import parse_json_bytes

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "PENDING",
    "RawInput",
    "SourceFile",
    "iter_inputs",
    "iter_sources",
    "parse_input",
]

STDIN = "-"
_JSON_SUFFIXES = (".json",)
_NDJSON_SUFFIXES = (".jsonl", ".ndjson")
_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class RawInput:
    """One JSON value read from a source: ``value`` when it parsed, else ``error``.

    ``data`` is the input as read (a line, a file), kept while the value is processed so a
    rejected input is stored exactly; for an input too large to read, ``data`` is a prefix and
    ``sha256``/``size`` describe the whole of it."""

    source_uri: str
    line: int | None
    text: str | None
    value: Any = None
    error: str | None = None
    raw: bytes | None = None  # the exact bytes, kept only when they are not valid UTF-8
    data: bytes | None = None
    sha256: bytes | None = None
    size: int | None = None
    complete: bool = True  # the line ended with a newline (NDJSON)


class _Unparsed(enum.Enum):
    PENDING = "pending"


# The value of a RawInput read but not parsed yet (see SourceFile.units and parse_input); an
# enum member, so it stays itself when pickled to a worker process.
PENDING: Any = _Unparsed.PENDING


def parse_input(raw: RawInput) -> RawInput:
    """``raw`` with its data parsed (``value``) or the reason it is not JSON (``error``); inputs
    already parsed or refused are returned as they are. Pure, so it can run in a worker."""
    if raw.value is not PENDING:
        return raw
    data = raw.data or b""
    value, error = parse_json_bytes(data)
    if error is None:
        return RawInput(raw.source_uri, raw.line, None, value, data=data)
    if not raw.complete:
        error = f"truncated last line (no newline at end): {error}"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return RawInput(
            raw.source_uri, raw.line, data.decode("utf-8", "replace"), error=error,
            raw=bytes(data), data=data,
        )
    return RawInput(raw.source_uri, raw.line, text.rstrip("\r\n"), error=error, data=data)


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


# How much of an oversized input the reject keeps (the rest is described by size and sha256).
_KEPT_PREFIX = 64 * 2**10
_READ_CHUNK = 1 << 20


class SourceFile:
    """One input: a file path or stdin. ``sha256``/``size_bytes`` are final after :meth:`inputs`.

    ``problem`` (set by a directory walk for a dangling link, a special file, ...) makes the
    source yield one error instead of opening anything."""

    def __init__(
        self,
        uri: str,
        path: Path | None,
        fmt: str,
        compression: str | None,
        *,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        problem: str | None = None,
    ):
        self.uri = uri
        self.path = path
        self.format = fmt  # "json" (one document) or "ndjson" (one per line)
        self.compression = compression
        self.max_record_bytes = max_record_bytes
        self.problem = problem
        self.sha256: str | None = None
        self.size_bytes: int | None = None

    @property
    def size_hint(self) -> int:
        """Bytes on disk before reading (0 for stdin or what cannot be inspected)."""
        try:
            return self.path.stat().st_size if self.path is not None and not self.problem else 0
        except OSError:
            return 0

    def small_input_bytes(self, limit: int, enough: int) -> int:
        """Bytes of this source's inputs of at most ``limit`` bytes each, counted until there
        are ``enough``, as far as the file tells before it is read: a document over ``limit``
        counts nothing, a plain NDJSON file counts its short lines, stdin and gzip files count
        whole (their lines cannot be seen before reading them)."""
        size = self.size_hint
        if size <= limit or self.compression is not None or self.path is None:
            return size
        if self.format == "json":
            return 0
        try:
            with open(self.path, "rb") as fh, \
                    mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _short_line_bytes(data, limit, enough)
        except (OSError, ValueError):  # not mappable (a special file, emptied meanwhile)
            return size

    def inputs(self) -> Iterator[RawInput]:
        """Yield every value of this source, in order, with its 1-based line (NDJSON only)."""
        for raw in self.units():
            yield parse_input(raw)

    def units(self) -> Iterator[RawInput]:
        """Like :meth:`inputs`, but values are left unparsed (``PENDING``) for the caller to
        parse with :func:`parse_input`, perhaps in another process."""
        if self.problem is not None:
            yield RawInput(self.uri, None, None, error=self.problem, data=b"")
            return
        try:
            raw = sys.stdin.buffer if self.path is None else open(self.path, "rb")  # noqa: SIM115
        except OSError as exc:
            yield RawInput(self.uri, None, None, error=f"cannot read input: {_os_reason(exc)}",
                           data=b"")
            return
        hashing = _HashingReader(raw)
        stream: IO[bytes] = io.BufferedReader(hashing, buffer_size=1 << 20)
        try:
            if self.compression == "gzip":
                stream = gzip.GzipFile(fileobj=stream, mode="rb")
            if self.format == "ndjson":
                yield from self._ndjson(stream)
            else:
                yield self._whole(stream)
            while stream.read(_READ_CHUNK):  # hash any bytes past the last line (gzip trailer)
                pass
        except (OSError, EOFError, zlib.error) as exc:
            yield RawInput(self.uri, None, None, error=f"cannot read input: {_os_reason(exc)}",
                           data=b"")
        finally:
            self.sha256 = hashing.sha256.hexdigest()
            self.size_bytes = hashing.size
            if self.path is not None:
                raw.close()

    def _ndjson(self, stream: IO[bytes]) -> Iterator[RawInput]:
        line_no = 0
        limit = self.max_record_bytes
        while True:
            data = stream.readline(limit + 1)
            if not data:
                return
            line_no += 1
            if len(data) > limit and not data.endswith(b"\n"):
                yield self._oversized(data, stream.readline, line_no)
                continue
            if not data.strip():
                continue
            yield RawInput(self.uri, line_no, None, PENDING, data=data,
                           complete=data.endswith(b"\n"))

    def _whole(self, stream: IO[bytes]) -> RawInput:
        data = stream.read(self.max_record_bytes + 1)
        if len(data) > self.max_record_bytes:
            return self._oversized(data, lambda n: stream.read(_READ_CHUNK), None)
        return RawInput(self.uri, None, None, PENDING, data=data)

    def _oversized(self, head: bytes, read_more, line: int | None) -> RawInput:
        """An input over the size limit: the rest is read (to hash it) but never held."""
        digest = hashlib.sha256(head)
        size = len(head)
        tail = head
        while not (line is not None and tail.endswith(b"\n")):
            tail = read_more(_READ_CHUNK)
            if not tail:
                break
            digest.update(tail)
            size += len(tail)
        kept = head[:_KEPT_PREFIX]
        return RawInput(
            self.uri, line, kept.decode("utf-8", "replace"),
            error=(
                f"record of {size:,} bytes is over the {self.max_record_bytes:,}-byte limit "
                "(raise it with `max_record_bytes`); the reject keeps its first "
                f"{len(kept):,} bytes, its size and sha256"
            ),
            data=kept, sha256=digest.digest(), size=size,
        )

def _short_line_bytes(data: mmap.mmap, limit: int, enough: int) -> int:
    """Bytes in the lines of ``data`` no longer than ``limit``, counted until ``enough``."""
    short = start = 0
    while start < len(data) and short < enough:
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        if end - start <= limit:
            short += end - start
        start = end
    return short


def _os_reason(exc: BaseException) -> str:
    """``Permission denied`` rather than ``[Errno 13] Permission denied: '/x'``."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, zlib.error):  # "Error -3 while decompressing data: invalid block type"
        return f"corrupt gzip data ({str(exc).rpartition(': ')[2]})"
    return str(exc)


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


def _walk_problem(path: Path) -> str | None:
    """Why a file found by a directory walk must not be opened, or None when it may be."""
    try:
        mode = path.stat().st_mode  # follows links: a link to a regular file is read
    except FileNotFoundError:
        return "skipped: a symbolic link whose target does not exist"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "skipped: a symbolic link loop"
        return f"skipped: cannot inspect it: {_os_reason(exc)}"
    if not stat.S_ISREG(mode):
        return "skipped: not a regular file (a FIFO, socket or device is never opened)"
    return None


def _walk(top: Path, enter: Callable[[tuple[str, ...]], bool],
          keep: Callable[[tuple[str, ...]], bool]) -> list[tuple[Path, str | None]]:
    """The files under ``top`` whose path below it ``keep`` accepts, each with the reason it
    must not be read (or None), then the folders that could not be read.

    The one walk behind directory and glob arguments. A link to a folder is never entered (a
    ``..`` or ``.`` link would list the same files again, or forever); ``top`` itself may be a
    link, as when it is named. A link to a file is listed like the file (see ``_walk_problem``).
    ``enter`` prunes the folders no match can lie in."""
    unreadable: list[tuple[Path, str | None]] = []
    found: list[Path] = []
    for root, dirs, files in os.walk(top, onerror=lambda exc: unreadable.append(
            (Path(exc.filename), f"skipped: cannot read the folder: {_os_reason(exc)}"))):
        below = Path(root).relative_to(top).parts  # followlinks=False: links stay in dirs
        dirs[:] = [d for d in dirs if enter((*below, d))]
        found += [Path(root) / f for f in files
                  if _classify(Path(f)) is not None and keep((*below, f))]
    return [(f, _walk_problem(f)) for f in sorted(found)] + unreadable


def _glob(pattern: str) -> list[tuple[Path, str | None]]:
    """The files a glob matches, found by :func:`_walk` from its literal leading folder.

    Python's glob semantics (``*`` and ``?`` within one name, ``**`` any number of folders,
    names starting with ``.`` matched only by a part that starts with ``.``), except that no
    link to a folder below the leading folder is followed, as for a directory argument."""
    if pattern.endswith(("/", os.sep)):
        return []  # `D/*/` matches folders only
    parts = Path(pattern).parts
    split = next(i for i, part in enumerate(parts) if _GLOB_CHARS.search(part))
    top, rest = Path(*parts[:split]) if split else Path("."), parts[split:]
    if not top.is_dir():
        return []
    return _walk(top, lambda below: _glob_match(rest, below, partial=True),
                 lambda below: _glob_match(rest, below, partial=False))


def _glob_match(pats: tuple[str, ...], names: tuple[str, ...], *, partial: bool) -> bool:
    """Whether ``names`` (the parts of a path) match ``pats`` (a glob's parts); ``partial``: a
    folder that a longer path matching ``pats`` could start with."""
    if not pats:
        return not names
    if not names:
        return partial
    if pats[0] == "**":
        for absorbed in range(len(names) + 1):
            if _glob_match(pats[1:], names[absorbed:], partial=partial):
                return True
            if absorbed < len(names) and names[absorbed].startswith("."):
                return False  # ``**`` never crosses a hidden name
        return partial  # ``**`` took every folder and may take more below
    hidden_ok = pats[0].startswith(".") or not names[0].startswith(".")
    return (hidden_ok and fnmatch.fnmatchcase(names[0], pats[0])
            and _glob_match(pats[1:], names[1:], partial=partial))


def _expand(arg: str) -> list[tuple[Path, str | None]]:
    """The files an argument names, each with the reason it must not be read (or None)."""
    path = Path(arg)
    if path.is_dir():
        return _walk(path, lambda below: True, lambda below: True)
    if path.exists():
        if _classify(path) is None:
            raise InputError(
                "unsupported file type (expected .json, .jsonl, .ndjson, optionally .gz)",
                source=arg,
            )
        return [(path, None)]
    if path.is_symlink():
        problem = _walk_problem(path) or "a symbolic link whose target does not exist"
        raise InputError(problem.removeprefix("skipped: "), source=arg)
    if _GLOB_CHARS.search(arg):
        files = _glob(arg)
        if not files:
            raise InputError("the pattern matches no .json/.jsonl/.ndjson files", source=arg)
        return files
    raise InputError("no such file or directory", source=arg)


def iter_sources(
    paths: Iterable[str], *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> Iterator[SourceFile]:
    """Expand ``paths`` (files, directories recursively, globs, ``-`` for NDJSON on stdin).

    All paths are checked before the first source is yielded, so a typo fails fast. Files a
    walk finds that must not be opened (dangling or looping links, FIFOs, devices) become
    sources that yield one error each, so they are kept as rejects and the rest is read. A
    directory or glob never follows a link to a folder below it; a link to a file is read, and
    each file once, however many paths reach it.

    Raises:
        InputError: a path does not exist, matches nothing, or has an unsupported extension.
    """
    plan: list[SourceFile] = []
    planned: set[str] = set()  # each file is read once, by the path it resolves to
    for arg in paths:
        if arg == STDIN:
            plan.append(
                SourceFile("stdin", None, "ndjson", None, max_record_bytes=max_record_bytes)
            )
            continue
        for path, problem in _expand(arg):
            fmt, compression = _classify(path) or ("ndjson", None)
            uri = str(path.absolute()) if problem else str(path.resolve())
            if uri in planned:  # a link to a file already listed, or a path named twice
                continue
            planned.add(uri)
            plan.append(
                SourceFile(uri, path, fmt, compression, max_record_bytes=max_record_bytes,
                           problem=problem)
            )
    yield from plan


def iter_inputs(paths: Iterable[str]) -> Iterator[RawInput]:
    """Every value of every source in ``paths``; see :func:`iter_sources`."""
    for source in iter_sources(paths):
        yield from source.inputs()


"""Files recstore writes are owner-only, like the store itself.

Everything recstore creates on disk — the store and its WAL, Parquet exports, ``query -o``
files, compare and sweep reports — holds stored run data, which may be private. Files are
created ``0600`` and directories ``0700`` whatever the umask; a file recstore overwrites is
made ``0600`` too. These are the only ways the package creates files.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from recstore.errors import InputError

FILE_MODE = 0o600
DIR_MODE = 0o700

__all__ = ["DIR_MODE", "FILE_MODE", "owner_only_umask", "private_dir", "private_open",
           "private_tree", "write_private_text"]


def private_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> IO[Any]:
    """``open(path, mode, **kwargs)`` for writing (``"w"``, ``"wb"``, ``"x"``, ``"a"`` ...)
    that creates the file ``0600``, or makes an existing one ``0600`` before writing to it."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    if "x" in mode:
        flags |= os.O_EXCL
    elif "a" in mode:
        flags |= os.O_APPEND
    else:
        flags |= os.O_TRUNC
    fd = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        return open(fd, mode, **kwargs)  # noqa: SIM115 - the caller closes it
    except BaseException:
        os.close(fd)
        raise


def write_private_text(path: str | os.PathLike, text: str, *, encoding: str = "utf-8",
                       errors: str = "strict") -> None:
    """``Path(path).write_text(text)``, owner-only."""
    with private_open(path, "w", encoding=encoding, errors=errors) as fh:
        fh.write(text)


def private_dir(path: str | os.PathLike) -> Path:
    """Create ``path`` and its missing parents ``0700`` (existing directories keep their mode:
    they are the user's); returns it as a ``Path``."""
    path = Path(path)
    missing = []
    for candidate in (path, *path.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass
        os.chmod(directory, DIR_MODE)  # mkdir's mode is narrowed by the umask only
    if not path.is_dir():
        raise InputError("exists and is not a directory", source=str(path))
    return path


@contextmanager
def owner_only_umask() -> Iterator[None]:
    """Files and directories that other code creates inside (DuckDB's store, WAL and ``COPY``
    output) are owner-only. The umask is process-wide, so it is narrowed only for the block."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


def private_tree(path: str | os.PathLike) -> None:
    """Make the folders and files below ``path`` owner-only (for what another process wrote
    there: Spark's JVM writes with its own umask). Symbolic links are left alone."""
    for root, dirs, files in os.walk(path):
        for name in dirs:
            if not os.path.islink(os.path.join(root, name)):
                os.chmod(os.path.join(root, name), DIR_MODE)
        for name in files:
            if not os.path.islink(os.path.join(root, name)):
                os.chmod(os.path.join(root, name), FILE_MODE)

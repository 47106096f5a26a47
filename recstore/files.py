"""Files recstore writes are owner-only, never replace what recstore owns, never follow links.

Everything recstore creates on disk — the store and its WAL, Parquet exports, ``query -o``
files, compare and sweep reports — holds stored run data, which may be private. Files are
created ``0600`` and directories ``0700`` whatever the umask. These are the only ways the
package creates files.

An output (:func:`write_output`) is written to a new temporary file in the target's folder and
renamed over the target once it is complete and on disk, so that:

- a failure (a full disk, Ctrl-C) leaves the earlier file, or nothing, never half a file;
- a symbolic link planted at the target is replaced, never written through (the link's target
  elsewhere is untouched), and nothing is ever truncated in place;
- the target is checked first against the files recstore owns (:func:`protect_store_files`:
  the store, its write-ahead log, its lock files; and export manifests), by real path and by
  inode, so ``-o`` naming the store through a link is refused instead of replacing the store.

Operating-system errors become one line naming the file and what is wrong
(:func:`file_error`: a full disk names its mount point).
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

from recstore.errors import InputError

FILE_MODE = 0o600
DIR_MODE = 0o700
#: The manifest that marks a folder as a recstore export (``recstore export``, ``spark build``).
EXPORT_MANIFEST = "recstore-export.json"

T = TypeVar("T")

__all__ = ["DIR_MODE", "EXPORT_MANIFEST", "FILE_MODE", "check_output_path", "file_error",
           "is_disk_problem", "os_errors_as_input", "owned_file", "owner_only_umask",
           "private_dir", "private_open", "private_tree", "protect_store_files", "write_output",
           "write_private_text"]

# Real-path glob patterns of the files outputs must not replace, with what each is. Filled by
# every Store (and the CLI's --db) as it is named; export manifests are protected by name.
_PROTECTED: dict[str, str] = {f"*{os.sep}{EXPORT_MANIFEST}": "a recstore export manifest"}


def protect_store_files(db_path: str | os.PathLike) -> None:
    """From now on, refuse outputs onto the store ``db_path`` or the files recstore keeps beside
    it: DuckDB's write-ahead log, the sweep lock files (``recstore.sweep.locks``), the file that
    names its server (``recstore serve``) and a new
    store being created (``recstore.store.db``)."""
    real = os.path.realpath(db_path)
    base = glob.escape(real)
    _PROTECTED.setdefault(base, f"the store {db_path}")
    _PROTECTED.setdefault(base + ".wal", f"the write-ahead log of the store {db_path}")
    _PROTECTED.setdefault(base + ".sweep*.lock", f"a lock file of the store {db_path}")
    _PROTECTED.setdefault(base + ".serve.json", f"the server file of the store {db_path}")
    folder, name = os.path.split(real)
    _PROTECTED.setdefault(os.path.join(glob.escape(folder), f".{glob.escape(name)}.*.new*"),
                          f"a store being created for {db_path}")


def owned_file(path: str | os.PathLike) -> str | None:
    """What recstore file ``path`` is (through symbolic links and hard links), or None."""
    real = os.path.realpath(path)
    try:
        identity = os.stat(path)
    except OSError:
        identity = None
    for pattern, what in _PROTECTED.items():
        if fnmatch.fnmatchcase(real, pattern):
            return what
        if identity is not None and identity.st_nlink > 1:  # a hard link to an owned file?
            for owned in glob.glob(pattern) if "*" in pattern else [pattern]:
                if _same_file(identity, owned):
                    return what
    return None


def _same_file(identity: os.stat_result, other: str) -> bool:
    try:
        found = os.stat(other)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (identity.st_dev, identity.st_ino)


def check_output_path(path: str | os.PathLike, *, owned: bool = False) -> None:
    """Refuse ``path`` as an output before anything is computed or written: a file recstore
    owns (unless ``owned``: recstore rewriting one of its own), a folder, or a place whose
    folder does not exist.

    Raises:
        InputError: naming ``path`` and what is wrong.
    """
    where = str(path)
    owner = None if owned else owned_file(path)
    if owner is not None:
        raise InputError(f"is {owner}; write the output somewhere else (nothing was written)",
                         source=where)
    if os.path.isdir(path):
        raise InputError("is a folder; name a file to write", source=where)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.lexists(folder) else "does not exist"
        raise InputError(f"cannot write here: the folder {folder} {what}", source=where)


def write_output(path: str | os.PathLike, write: Callable[[IO[Any]], T], *, mode: str = "w",
                 encoding: str | None = "utf-8", errors: str | None = None,
                 newline: str | None = None, owned: bool = False, sync: bool = True) -> T:
    """Call ``write(file)`` to produce the output ``path`` and return what it returns.

    The file (text, or bytes with ``mode="wb"``) is a new owner-only temporary file in the
    target's folder, synced and renamed over ``path`` when ``write`` returns; on any error it is
    removed and ``path`` is left as it was. A target that is a FIFO or a terminal (``-o
    /dev/stdout``) is written directly. See the module docstring for what is refused;
    ``owned`` says the target is a file recstore owns and rewrites (an export manifest).
    ``sync=False`` skips the ``fsync`` before the rename, for one file of many that a re-run
    writes again (it is what made ``export --otlp`` of 3,000 runs take 4 s instead of 2.2 s).

    Raises:
        InputError: ``path`` is refused (:func:`check_output_path`), or the system could not
            write it (:func:`file_error`: a full disk, a read-only file system, ...).
    """
    check_output_path(path, owned=owned)
    binary = "b" in mode
    options: dict[str, Any] = {} if binary else {"encoding": encoding, "errors": errors,
                                                  "newline": newline}
    with os_errors_as_input(path):
        stream = _open_stream(path)
        if stream is not None:
            with open(stream, mode, **options) as fh:
                return write(fh)
        import tempfile  # here: the CLI imports this module at start-up, for protect_store_files

        folder, name = os.path.split(os.path.abspath(path))
        # mkstemp: O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600, a name nobody else holds
        fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
        try:
            os.fchmod(fd, FILE_MODE)
            with open(fd, mode, **options) as fh:
                result = write(fh)
                fh.flush()
                if sync:  # else a crash may leave the new name with no data yet
                    os.fsync(fh.fileno())
            os.replace(temporary, path)
        except BaseException:
            _remove(temporary)
            raise
    return result


def _open_stream(path: str | os.PathLike) -> int | None:
    """An open descriptor when ``path`` is a FIFO or a character device (written in place, as
    a shell's ``>`` would); None for a regular file, a link to one, or nothing yet."""
    try:
        if stat.S_ISREG(os.stat(path).st_mode):
            return None
    except FileNotFoundError:
        return None
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))  # no O_CREAT, no O_TRUNC
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return fd
    os.close(fd)  # replaced between the checks: write it the safe way
    return None


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


_PROBLEMS = {
    errno.ENOSPC: "no space left on the disk",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOENT: "no such file or folder",
    errno.ENOTDIR: "a part of the path is not a folder",
    errno.EISDIR: "is a folder",
}


def file_error(exc: BaseException, path: str | os.PathLike) -> InputError:
    """``exc`` (an ``OSError`` raised writing or creating ``path``, or DuckDB's error text of
    one) as one line naming the file and the problem; a full disk or quota also names the
    mount point of the file system."""
    code = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    code = code or _errno_in_text(str(exc))
    problem = (_PROBLEMS.get(code) if code else None) or getattr(exc, "strerror", None) \
        or str(exc).split("\n", 1)[0] or type(exc).__name__
    if code in (errno.ENOSPC, errno.EDQUOT):
        problem += f" ({_mount_point(path)} is full); free some space and retry"
    return InputError(f"cannot write: {problem}", source=str(path))


def is_disk_problem(exc: BaseException) -> bool:
    """Whether ``exc`` (an OS error, or DuckDB's or pyarrow's error text) says the disk is
    full, over quota or read-only."""
    code = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    return (code or _errno_in_text(str(exc))) in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


def _errno_in_text(text: str) -> int | None:
    """The errno of a message that carries only the text (pyarrow's and DuckDB's IO errors)."""
    lowered = text.lower()
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
        if os.strerror(code).lower() in lowered:
            return code
    return None


def _mount_point(path: str | os.PathLike) -> str:
    """The mount point of the file system that holds ``path`` (or would)."""
    current = os.path.abspath(path)
    while not os.path.exists(current):
        current = os.path.dirname(current)
    while not os.path.ismount(current):
        current = os.path.dirname(current)
    return current


@contextmanager
def os_errors_as_input(path: str | os.PathLike) -> Iterator[None]:
    """Turn an ``OSError`` raised in the block (writing ``path``) into :func:`file_error`."""
    try:
        yield
    except OSError as exc:
        raise file_error(exc, path) from exc


def private_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> IO[Any]:
    """``open(path, mode, **kwargs)`` for writing (``"w"``, ``"wb"``, ``"x"``, ``"a"`` ...)
    that creates the file ``0600``, or makes an existing one ``0600`` before writing to it, and
    never opens a symbolic link. For files written in place (a generated corpus); outputs go
    through :func:`write_output`."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
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
                       errors: str = "strict", sync: bool = True) -> None:
    """``Path(path).write_text(text)`` as an output (:func:`write_output`): owner-only, atomic."""
    write_output(path, lambda fh: fh.write(text), encoding=encoding, errors=errors, sync=sync)


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

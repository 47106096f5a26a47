"""The SQL the guard checked for a query text, remembered between runs of the CLI (issue 27.1).

sqlglot, which parses and checks every query (:mod:`recstore.query.guard`) and compiles the DSL,
costs a query about as much start-up time as DuckDB itself. ``recstore query`` runs the same
texts again and again (saved queries, scripts, a query refined at the shell), so the first run
that passes the guard writes the SQL it checked to a cache file, and a later run of the same
text takes that SQL without importing sqlglot. What runs is exactly what the guard passed:

* an entry is found only by the SHA-256 of everything the check depends on: the text and its
  language, the store's views (names, column names and types, the DSL's default fields), the
  versions of recstore, DuckDB and sqlglot, and the bytes of the query layer's code and of the
  function lists (:func:`entry_key`); a change to any of them misses;
* only what passed is written, never a refusal (a refused text is checked again every time);
  a query with parameters, and a DSL query that reads the clock (``started > -7d``), are never
  written, since the same text then compiles to different SQL;
* entries are owner-only files in an owner-only directory, opened without following symbolic
  links; a file or directory that another user could have written is ignored (not trusted, not
  read), as is any file that cannot be read. The cache is only a shortcut: without it every
  query is checked.

The directory is ``$RECSTORE_CACHE_DIR`` (empty: no cache), else ``$XDG_CACHE_HOME/recstore``
or ``~/.cache/recstore``, each with ``checked-sql/`` under it; it holds at most
:data:`MAX_ENTRIES` files (the oldest go first). The second wall (:func:`~recstore.query.sqltext.
lock_down`) holds whatever the SQL is.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recstore.query.views import Catalog

CACHE_ENV = "RECSTORE_CACHE_DIR"
MAX_ENTRIES = 512
MAX_ENTRY_BYTES = 1 << 20  # a longer checked SQL is not kept
_FORMAT = b"recstore checked sql 1"
# What the guard's decision and the SQL it prints depend on, besides the text and the views.
_CODE = ("api.py", "dsl.py", "functions.py", "guard.py", "sqltext.py", "views.py")
_LISTS = ("query-functions-allowed.txt", "query-functions-denied.txt")


def cache_directory() -> Path | None:
    """Where entries live (see the module docstring), or None when ``$RECSTORE_CACHE_DIR`` is
    set empty or there is no home folder to put it in."""
    configured = os.environ.get(CACHE_ENV)
    if configured is not None:
        return Path(configured) / "checked-sql" if configured else None
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, or relative (which the XDG rules say to ignore)
        home = os.path.expanduser("~")
        if not os.path.isabs(home):  # no home: no cache, rather than one in the working folder
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "recstore" / "checked-sql"


class CheckedCache:
    """Checked SQL by :func:`entry_key`, in the owner-only ``directory``."""

    def __init__(self, directory: Path):
        self.directory = directory

    @classmethod
    def default(cls) -> CheckedCache | None:
        """The cache of :func:`cache_directory`, or None when it is off."""
        directory = cache_directory()
        return cls(directory) if directory is not None else None

    def get(self, key: str) -> str | None:
        """The SQL stored under ``key``, or None (missing, unreadable or not trusted)."""
        folder = self._open_directory(create=False)
        if folder is None:
            return None
        try:
            fd = os.open(key, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        except OSError:
            return None
        finally:
            os.close(folder)
        try:
            info = os.fstat(fd)
            if not (stat.S_ISREG(info.st_mode) and _owner_only(info)) or \
                    info.st_size > MAX_ENTRY_BYTES:
                return None
            data = os.read(fd, MAX_ENTRY_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        try:
            return data.decode("utf-8") or None
        except UnicodeDecodeError:
            return None

    def put(self, key: str, sql: str) -> None:
        """Store ``sql`` under ``key`` (written whole or not at all); errors are ignored."""
        data = sql.encode("utf-8")
        folder = self._open_directory(create=True) if len(data) <= MAX_ENTRY_BYTES else None
        if folder is None:
            return
        temporary = f".{key}.{os.getpid()}"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=folder)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(temporary, key, src_dir_fd=folder, dst_dir_fd=folder)
            _prune(folder)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder)
        finally:
            os.close(folder)

    def _open_directory(self, create: bool) -> int | None:
        """The directory, opened (so that every entry is read from the directory checked here),
        when it is a real directory of this user that no one else can write; made owner-only
        when ``create`` and missing."""
        if create:
            with contextlib.suppress(OSError):
                self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            folder = os.open(self.directory,
                             os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            if _owner_only(os.fstat(folder)):
                return folder
        except OSError:
            pass
        os.close(folder)
        return None


def _prune(folder: int) -> None:
    """Drop the oldest entries of the open directory ``folder`` past :data:`MAX_ENTRIES`."""
    with os.scandir(folder) as scan:
        entries = [(e.stat(follow_symlinks=False).st_mtime, e.name) for e in scan
                   if not e.name.startswith(".")]
    for _, name in sorted(entries)[:max(0, len(entries) - MAX_ENTRIES)]:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=folder)


def entry_key(text: str, language: str, catalog: Catalog) -> str:
    """The SHA-256 (hex) of ``text`` compiled as ``language`` over ``catalog``'s views, with
    everything else the check depends on (see the module docstring)."""
    digest = hashlib.sha256(_FORMAT)
    for part in (_versions(), _views(catalog), language.encode(), text.encode("utf-8", "replace")):
        digest.update(len(part).to_bytes(8, "big") + part)
    digest.update(_code_digest())
    return digest.hexdigest()


def _versions() -> bytes:
    import duckdb

    from recstore import __version__

    return f"{__version__} {duckdb.__version__} {_sqlglot_version()}".encode()


def _sqlglot_version() -> str:
    """sqlglot's version file, read without importing sqlglot (the import is what is spared)."""
    spec = find_spec("sqlglot")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        with contextlib.suppress(OSError):
            return (Path(folder) / "_version.py").read_text(encoding="utf-8")
    return "unknown"


def _views(catalog: Catalog) -> bytes:
    return repr(sorted((view.name, [(c.name, c.type) for c in view.columns], view.default_fields)
                       for view in catalog.views.values())).encode()


def _code_digest() -> bytes:
    from recstore.resources import resource_dir

    digest = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for path in [here / name for name in _CODE] + [resource_dir("schema") / n for n in _LISTS]:
        try:
            data = path.read_bytes()
        except OSError:
            data = b"missing"
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.digest()


def _owner_only(info: os.stat_result) -> bool:
    return info.st_uid == os.getuid() and not info.st_mode & 0o077


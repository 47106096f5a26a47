"""Opening the store file: owner-only permissions, the writer lock, and schema versions.

DuckDB lets one process open a file read-write, or many open it read-only, never both
(tech-notes §2.2). A second opener gets ``IOException: Could not set lock on file ...
Conflicting lock is held in <exe> (PID n)``; :func:`connect` retries with backoff until the
lock timeout and then raises :class:`StoreLockedError` naming that process and its command line.
A timeout of 0 fails at once (the CLI's default for commands that only read: a query says the
store is busy instead of waiting behind an ingest); ``inf`` waits as long as it takes (sweeps).

Schema files ``schema/NNN_name.sql`` (from every layer) are applied in number order; the ones
applied are listed in ``schema_migrations`` and the highest number is ``meta.schema_version``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar, overload

import duckdb

from recstore.errors import (
    InputError,
    NotFoundError,
    RecstoreError,
    StoreCorruptError,
    StoreLockedError,
)
from recstore.files import file_error, is_disk_problem
from recstore.resources import resource_dir

T = TypeVar("T")

__all__ = [
    "check_is_store",
    "check_readable",
    "check_version",
    "connect",
    "connect_attached",
    "lock_holder",
    "lock_timeout_from_env",
    "ensure_schema",
    "is_new_store",
    "apply_schema_files",
    "pending_schema_files",
    "refresh_views",
    "row_limit",
    "schema_files",
    "store_error",
    "stored_version",
    "transaction",
    "upgrade_due",
    "views_digest",
]

# DuckDB's LIMIT is a BIGINT; a larger row count asks for every row.
_MAX_LIMIT = 2**63 - 1


@overload
def row_limit(limit: int) -> int: ...
@overload
def row_limit(limit: None) -> None: ...
def row_limit(limit: int | None) -> int | None:
    """``limit`` as DuckDB's ``LIMIT`` takes it: a count past BIGINT (``--limit
    99999999999999999999999``) is clamped, since no store holds that many rows, instead of
    failing DuckDB's conversion."""
    return None if limit is None else min(limit, _MAX_LIMIT)


_SCHEMA_FILE = re.compile(r"(\d{3})_[\w-]+\.sql\Z")
_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")
#: How long to wait for another process's lock when the caller gives no time (env overrides).
LOCK_TIMEOUT_ENV = "RECSTORE_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 30.0
#: ``meta.layout`` of a store whose log was upgraded but whose projections are not built yet
#: (:mod:`recstore.store.migrate`).
UPGRADE_PENDING_LAYOUT = "2-projections-pending"
#: ``meta`` key of :func:`views_digest` as the store's views were last defined.
VIEWS_DIGEST_KEY = "views_digest"


def schema_files() -> list[tuple[int, str, Path]]:
    """``[(version, file name, path)]`` of the shipped DDL, in apply order."""
    found = []
    for path in resource_dir("schema").iterdir():
        match = _SCHEMA_FILE.match(path.name)
        if match:
            found.append((int(match.group(1)), path.name, path))
    return sorted(found)


def _is_lock_error(exc: duckdb.Error) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def _retry_while_locked(path: Path, lock_timeout: float, open_once: Callable[[], T],
                        on_wait: Callable[[str], None] | None = None) -> T:
    """``open_once()``, retried with backoff while another process holds the lock, for up to
    ``lock_timeout`` seconds (``inf``: as long as it takes); then, or at once on any other IO
    error, a one-line store error. ``on_wait`` hears once that the open is waiting, and for whom.
    """
    deadline = time.monotonic() + max(lock_timeout, 0.0)
    delay = 0.02
    told = False
    while True:
        try:
            return open_once()
        except duckdb.IOException as exc:
            if not _is_lock_error(exc) or time.monotonic() + delay > deadline:
                raise _open_error(path, exc, lock_timeout) from None
            if on_wait is not None and not told:
                on_wait(f"{path}: waiting for the store, which {lock_holder(exc)} has open")
                told = True
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


# A new store file gets 64 KiB blocks instead of DuckDB's 256 KiB: every table takes at least a
# block, so with ~20 small tables a store of 6,000 runs was 40 % fixed overhead (1,837 -> 1,291
# bytes a run); at 200,000 runs the file is the same size and queries as fast. The file is created
# by an ATTACH that names the size, so connections need no setting of their own (DuckDB refuses a
# second connection to a file open in the same process with other settings, e.g. a user's).
NEW_FILE_BLOCK_SIZE = 64 * 1024


def connect(path: Path, *, read_only: bool, lock_timeout: float,
            on_wait: Callable[[str], None] | None = None) -> duckdb.DuckDBPyConnection:
    """Open the store ``path``, waiting up to ``lock_timeout`` seconds for another process's
    lock. A writer creates a new store where there is none (or an empty file).

    Raises:
        RecstoreError: ``path`` is not a recstore store (another program's DuckDB file, left
            unchanged), cannot be opened, or cannot be created (a full disk).
    """
    def open_once() -> duckdb.DuckDBPyConnection:
        if not read_only:
            if is_new_store(path):
                _create_store(path)
            else:
                _check_before_writing(path)
        con = duckdb.connect(str(path), read_only=read_only)
        if read_only:
            try:
                check_is_store(con, path)
            except BaseException:
                con.close()
                raise
        return con

    con = _retry_while_locked(path, lock_timeout, open_once, on_wait)
    # DuckDB draws its own progress bar on long statements; recstore's output stays its own
    con.execute("SET enable_progress_bar = false")
    return con


def is_new_store(path: Path) -> bool:
    """Whether ``path`` holds no store yet: nothing, or an empty file (``mktemp``'s)."""
    try:
        return path.stat().st_size == 0
    except FileNotFoundError:
        return True


def check_is_store(con: duckdb.DuckDBPyConnection, path: Path, *,
                   empty_ok: bool = False) -> None:
    """Refuse a DuckDB file recstore did not write: the store's mark is its ``meta`` table
    with a ``schema_version`` beside ``schema_migrations`` (also in a recstore 0.1 store). A
    database with nothing in it at all is a store not created yet: a writer (``empty_ok``)
    creates the schema in it, a reader finds no store.

    Raises:
        RecstoreError: naming ``path``; nothing in it was changed.
        NotFoundError: an empty database, unless ``empty_ok``.
    """
    if _has_store_mark(con):
        return
    if _is_empty(con):
        if empty_ok:
            return
        raise NotFoundError(f"{path}: no store here yet (run `recstore ingest` first)")
    raise RecstoreError(
        f"{path}: not a recstore store (a DuckDB file without recstore's schema); "
        "recstore left it unchanged — open a store, or a new path to create one")


def _has_store_mark(con: duckdb.DuckDBPyConnection) -> bool:
    columns = con.execute(
        # duckdb_columns(), not information_schema.columns: the same rows, without binding
        # the information_schema view (~5 ms of every read command's start)
        "SELECT table_name, list_sort(list(column_name)) FROM duckdb_columns() "
        "WHERE schema_name = 'main' AND database_name = current_database() "
        "AND table_name IN ('meta', 'schema_migrations') GROUP BY table_name"
    ).fetchall()
    found = dict(columns)
    if found.get("meta") != ["key", "value"] or "name" not in found.get("schema_migrations", []):
        return False
    version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return version is not None and str(version[0]).isdigit()


def _is_empty(con: duckdb.DuckDBPyConnection) -> bool:
    """No table, view, sequence or macro of anyone's in the database."""
    here = "database_name = current_database()"
    return con.execute(
        f"SELECT (SELECT count(*) FROM duckdb_tables() WHERE {here}) "
        f"+ (SELECT count(*) FROM duckdb_views() WHERE NOT internal AND {here}) "
        f"+ (SELECT count(*) FROM duckdb_sequences() WHERE {here}) "
        f"+ (SELECT count(*) FROM duckdb_functions() WHERE NOT internal AND {here})"
    ).fetchone()[0] == 0


def _check_before_writing(path: Path) -> None:
    """:func:`check_is_store` on a read-only look at ``path``, before a writer opens it
    (opening a DuckDB file read-write may write to it)."""
    try:
        probe = duckdb.connect(str(path), read_only=True)
    except duckdb.ConnectionException as exc:
        if "different configuration" in str(exc):
            return  # this process has it open as a writer already: checked when it opened
        raise
    with probe:
        check_is_store(probe, path, empty_ok=True)


def _create_store(path: Path) -> None:
    """A new store at ``path``: the schema is written into a temporary file beside it, which
    then takes the name, so ``path`` never holds half a store (a full disk fails before).
    A store another process created meanwhile is kept."""
    folder, name = os.path.split(os.path.abspath(path))
    temporary = Path(folder) / f".{name}.{secrets.token_hex(6)}.new"
    try:
        with duckdb.connect() as scratch:  # the block size is chosen when the file is made
            scratch.execute(f"ATTACH ? AS new_store (BLOCK_SIZE {NEW_FILE_BLOCK_SIZE})",
                            [str(temporary)])
            scratch.execute("DETACH new_store")
        os.chmod(temporary, 0o600)
        with duckdb.connect(str(temporary)) as con:
            ensure_schema(con, path)
            con.execute("CHECKPOINT")
        try:
            os.link(temporary, path)  # never replaces a store another process just created
        except FileExistsError:
            if is_new_store(path):  # an empty file (mktemp's) is replaced
                os.replace(temporary, path)
    finally:
        for leftover in (temporary, Path(f"{temporary}.wal")):
            leftover.unlink(missing_ok=True)


def lock_holder(exc: duckdb.Error) -> str:
    """Who holds the lock DuckDB reports in ``exc``: ``process N (its command line)``."""
    holder = _LOCK_HOLDER.search(str(exc))
    if not holder:
        return "another process"
    pid, exe = holder.group(2), holder.group(1)
    try:  # Linux: the holder's command line says more than its executable
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        command = " ".join(a.decode("utf-8", "replace") for a in argv if a)
    except OSError:
        command = ""
    command = command or exe
    return f"process {pid} ({command if len(command) <= 100 else command[:99] + '…'})"


def _open_error(path: Path, exc: duckdb.Error, lock_timeout: float) -> RecstoreError:
    if not _is_lock_error(exc):
        return store_error(exc, path) or RecstoreError(f"{path}: cannot open the store: {exc}")
    busy = f"{path}: the store is busy: {lock_holder(exc)} has it open"
    if lock_timeout <= 0:
        return StoreLockedError(f"{busy}; retry when it is done, or wait for it with "
                                f"`lock_timeout` SECONDS (env {LOCK_TIMEOUT_ENV})",
                                param="lock_timeout")
    return StoreLockedError(f"{busy}; waited {lock_timeout:g}s (retry later, or raise "
                            f"`lock_timeout` / env {LOCK_TIMEOUT_ENV})", param="lock_timeout")


def store_error(exc: BaseException, path: Path) -> RecstoreError | None:
    """A DuckDB or OS error on the store ``path`` as one line, when it is a full disk (or
    quota, or read-only file system) or a corrupt file; None for other errors."""
    if is_disk_problem(exc):
        return file_error(exc, path)
    if "Corrupt database file" in str(exc) or "checksum" in str(exc).lower():
        detail = str(exc).split("\n", 1)[0].removeprefix("Corrupt database file: ")
        return StoreCorruptError(f"{path}: the store is corrupt and cannot be read back "
                                 f"({detail}); nothing was written — restore it from a backup")
    return None


def check_readable(con: duckdb.DuckDBPyConnection) -> None:
    """Read back what the next write continues from (the batch chain and the last batch's
    events and streams), so a store whose recent blocks are corrupt takes no more writes.
    Bounded by one batch; ``verify`` reads every block."""
    last = "(SELECT coalesce(max(first_seq), 0) FROM batches)"
    con.execute("SELECT min(hash(b)) FROM batches b").fetchall()
    con.execute(f"SELECT min(hash(e)) FROM events e WHERE seq >= {last}").fetchall()
    con.execute(f"SELECT min(hash(s)) FROM streams s WHERE last_seq >= {last}").fetchall()


def lock_timeout_from_env(default: float = DEFAULT_LOCK_TIMEOUT) -> float:
    """Seconds from env ``RECSTORE_LOCK_TIMEOUT`` (a number, or ``inf`` for no limit), else
    ``default``."""
    text = os.environ.get(LOCK_TIMEOUT_ENV, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        raise InputError(f"expected seconds (a number >= 0, or inf), got {text!r}",
                         source=LOCK_TIMEOUT_ENV)
    return value


def connect_attached(
    path: Path, alias: str, *, lock_timeout: float,
    on_wait: Callable[[str], None] | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory database (writable, catalog ``memory``) with the store attached read-only
    as ``alias`` and selected with USE, so unqualified names read the store."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")

    def attach() -> duckdb.DuckDBPyConnection:
        con.execute(f"ATTACH ? AS {alias} (READ_ONLY)", [str(path)])
        con.execute(f"USE {alias}")
        return con

    try:
        return _retry_while_locked(path, lock_timeout, attach, on_wait)
    except BaseException:
        con.close()
        raise


def stored_version(con: duckdb.DuckDBPyConnection) -> int:
    """Schema version recorded in the store, 0 for an empty (new) file."""
    has_meta = con.execute(
        # duckdb_tables(), not information_schema.tables: the same rows, ~1.5 ms cheaper, and
        # a store's creation and opening ask four times
        "SELECT count(*) FROM duckdb_tables() "
        "WHERE table_name = 'meta' AND schema_name = 'main' "
        "AND database_name = current_database()"
    ).fetchone()[0]
    if not has_meta:
        return 0
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def check_version(path: Path, version: int) -> None:
    """Refuse a store written by a newer recstore."""
    known = schema_files()[-1][0]
    if version > known:
        raise RecstoreError(
            f"{path}: store schema version {version} is newer than this recstore supports "
            f"({known}); upgrade recstore to open it"
        )


def upgrade_due(con: duckdb.DuckDBPyConnection, path: Path) -> bool:
    """Whether a store a reader opened needs a writer first: a shipped schema file it has not
    applied, or a log upgrade waiting for its projections. One read of ``meta`` and
    ``schema_migrations`` (every read command pays it); ``con`` passed :func:`check_is_store`.

    Raises:
        RecstoreError: the store was written by a newer recstore.
    """
    # fetchall, not fetchone: a result left unfinished blocks the connection's next statement
    ((version, layout, digest, applied),) = con.execute(
        "SELECT (SELECT value FROM meta WHERE key = 'schema_version'), "
        "(SELECT value FROM meta WHERE key = 'layout'), "
        f"(SELECT value FROM meta WHERE key = '{VIEWS_DIGEST_KEY}'), "
        "(SELECT list(name) FROM schema_migrations)"
    ).fetchall()
    check_version(path, int(version))
    shipped = {name for _version, name, _file in schema_files()}
    return (int(version) == 0 or layout == UPGRADE_PENDING_LAYOUT
            or not shipped <= set(applied or ()) or digest != views_digest())


def pending_schema_files(con: duckdb.DuckDBPyConnection) -> list[tuple[int, str, Path]]:
    """Shipped schema files this store has not applied yet."""
    if stored_version(con) == 0:
        return schema_files()
    applied = {name for (name,) in con.execute("SELECT name FROM schema_migrations").fetchall()}
    return [entry for entry in schema_files() if entry[1] not in applied]


def _views_files() -> list[Path]:
    return [file for _version, name, file in schema_files() if name.endswith("_views.sql")]


@functools.lru_cache(maxsize=1)
def views_digest() -> str:
    """sha256 of the shipped view definitions (``*_views.sql``), kept in ``meta`` by the writer
    that defined them: a store whose digest differs defines its views again when next opened,
    so changing a view's SQL needs no schema file of its own."""
    digest = hashlib.sha256()
    for file in _views_files():
        digest.update(file.read_bytes())
    return digest.hexdigest()


def refresh_views(con: duckdb.DuckDBPyConnection) -> None:
    """Define the public views again (``*_views.sql``): DuckDB keeps a view's column list as it
    was when the view was created, so columns later files add to a table appear only then. The
    store keeps the digest of the SQL that defined them (:func:`views_digest`)."""
    for file in _views_files():
        con.execute(file.read_text(encoding="utf-8"))
    con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [VIEWS_DIGEST_KEY, views_digest()])


def apply_schema_files(con: duckdb.DuckDBPyConnection) -> None:
    """Run every shipped schema file (each is idempotent), then define the views again."""
    for _version, _name, file in schema_files():
        con.execute(file.read_text(encoding="utf-8"))
    refresh_views(con)


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """``BEGIN`` … ``COMMIT``, or ``ROLLBACK`` when the block fails. A failed ``COMMIT`` (a
    full disk) has ended the transaction already: its error is the one raised, not the
    rollback's "no transaction is active"."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass  # nothing left to roll back: the failed statement aborted it
        raise


def ensure_schema(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Create a new store's tables, or upgrade an older store by applying the missing files."""
    check_version(path, stored_version(con))
    missing = pending_schema_files(con)
    if not missing:
        _refresh_stale_views(con)
        return
    with transaction(con):
        for version, name, file in missing:
            con.execute(file.read_text(encoding="utf-8"))
            con.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                [version, name, datetime.now(UTC).replace(tzinfo=None)],
            )
        refresh_views(con)
        top = con.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
        con.execute(
            "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(top)]
        )


def _refresh_stale_views(con: duckdb.DuckDBPyConnection) -> None:
    """Define the views again when the store's were defined by other view SQL than shipped."""
    stored = con.execute("SELECT value FROM meta WHERE key = ?", [VIEWS_DIGEST_KEY]).fetchall()
    if stored == [(views_digest(),)]:
        return
    with transaction(con):
        refresh_views(con)

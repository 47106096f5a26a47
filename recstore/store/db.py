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

import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import duckdb

from recstore.errors import InputError, RecstoreError, StoreLockedError
from recstore.resources import resource_dir

T = TypeVar("T")

__all__ = [
    "check_version",
    "connect",
    "connect_attached",
    "lock_holder",
    "lock_timeout_from_env",
    "ensure_schema",
    "apply_schema_files",
    "pending_schema_files",
    "refresh_views",
    "schema_files",
    "stored_version",
]

_SCHEMA_FILE = re.compile(r"(\d{3})_[\w-]+\.sql\Z")
_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")
#: How long to wait for another process's lock when the caller gives no time (env overrides).
LOCK_TIMEOUT_ENV = "RECSTORE_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 30.0


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
    """Open ``path``, waiting up to ``lock_timeout`` seconds for another process's lock."""
    def open_once() -> duckdb.DuckDBPyConnection:
        if not read_only and not path.exists():
            _create_file(path)
        return duckdb.connect(str(path), read_only=read_only)

    con = _retry_while_locked(path, lock_timeout, open_once, on_wait)
    # DuckDB draws its own progress bar on long statements; recstore's output stays its own
    con.execute("SET enable_progress_bar = false")
    return con


def _create_file(path: Path) -> None:
    """An empty DuckDB file at ``path`` with :data:`NEW_FILE_BLOCK_SIZE` blocks."""
    with duckdb.connect() as scratch:
        scratch.execute(f"ATTACH ? AS new_store (BLOCK_SIZE {NEW_FILE_BLOCK_SIZE})", [str(path)])
        scratch.execute("DETACH new_store")


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
        return RecstoreError(f"{path}: cannot open the store: {exc}")
    busy = f"{path}: the store is busy: {lock_holder(exc)} has it open"
    if lock_timeout <= 0:
        return StoreLockedError(f"{busy}; retry when it is done, or wait for it with "
                                f"--lock-timeout SECONDS (env {LOCK_TIMEOUT_ENV})")
    return StoreLockedError(f"{busy}; waited {lock_timeout:g}s (retry later, or raise "
                            f"--lock-timeout / env {LOCK_TIMEOUT_ENV})")


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
        "SELECT count(*) FROM information_schema.tables "
        "WHERE table_name = 'meta' AND table_schema = 'main' "
        "AND table_catalog = current_database()"
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


def pending_schema_files(con: duckdb.DuckDBPyConnection) -> list[tuple[int, str, Path]]:
    """Shipped schema files this store has not applied yet."""
    if stored_version(con) == 0:
        return schema_files()
    applied = {name for (name,) in con.execute("SELECT name FROM schema_migrations").fetchall()}
    return [entry for entry in schema_files() if entry[1] not in applied]


def refresh_views(con: duckdb.DuckDBPyConnection) -> None:
    """Define the public views again (``*_views.sql``): DuckDB keeps a view's column list as it
    was when the view was created, so columns later files add to a table appear only then."""
    for _version, name, file in schema_files():
        if name.endswith("_views.sql"):
            con.execute(file.read_text(encoding="utf-8"))


def apply_schema_files(con: duckdb.DuckDBPyConnection) -> None:
    """Run every shipped schema file (each is idempotent), then define the views again."""
    for _version, _name, file in schema_files():
        con.execute(file.read_text(encoding="utf-8"))
    refresh_views(con)


def ensure_schema(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Create a new store's tables, or upgrade an older store by applying the missing files."""
    check_version(path, stored_version(con))
    missing = pending_schema_files(con)
    if not missing:
        return
    con.execute("BEGIN TRANSACTION")
    try:
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
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise

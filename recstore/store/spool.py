"""How worker processes hand a chunk's Arrow rows to the writer: through a spool file in memory.

A worker writes its chunk's tables (:class:`recstore.store.chunks.ChunkRows`) as Arrow IPC
streams, one after another, into one file of a spool directory (in ``/dev/shm`` where there is
one) and sends back only the prepared records and where each table's stream lies
(:class:`Spooled`). The writer memory-maps the file, removes it at once and reads the tables
zero-copy. Pickled through the pool's pipe, the rows took the writer's result thread ~47 us a
dev-corpus record (the pipe ~27, unpickling ~20; docs/store.md, issue 28); mapped, ~7.

A spool directory serves one input and is removed when its records are received, with any file
of a chunk still in flight. It is named with the writer's pid and pid namespace: one a killed
writer left is removed when the next writer opens a store (:func:`remove_stale_spools`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from recstore.store.chunks import ChunkRows

__all__ = [
    "SPOOL_PREFIX", "Spooled", "open_spool", "remove_stale_spools", "spool_base", "spool_prefix",
    "spool_rows",
]

# How a spool directory's name begins (then the pid namespace, the writer's pid, a random part).
SPOOL_PREFIX = "recstore-spool-"
_EVENTS_STREAM = ""  # the events table's stream in a spool file (projection tables by name)


@contextmanager
def open_spool(wanted: bool) -> Iterator[str | None]:
    """A new spool directory's path for the block (None when not ``wanted``)."""
    if not wanted:
        yield None
        return
    path = tempfile.mkdtemp(prefix=spool_prefix(os.getpid()), dir=spool_base())
    try:
        yield path
    finally:  # files of chunks still in flight (after an error) go with it
        shutil.rmtree(path, ignore_errors=True)


def spool_prefix(pid: int) -> str:
    """How the names of writer ``pid``'s spool directories begin."""
    return f"{SPOOL_PREFIX}{_PID_NAMESPACE}-{pid}-"


def _pid_namespace() -> str:
    """This process's pid namespace (its inode on Linux; ``0`` where it cannot be read)."""
    try:
        return os.readlink("/proc/self/ns/pid").partition("[")[2].rstrip("]") or "0"
    except OSError:
        return "0"


_PID_NAMESPACE = _pid_namespace()


def spool_base() -> str:
    """Where spool directories are made: ``/dev/shm`` (memory) where it can be written."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else tempfile.gettempdir()


def remove_stale_spools(base: str | None = None) -> None:
    """Remove the spool directories (in ``base``, default :func:`spool_base`) whose writer
    process is no longer running: what an ingest killed with SIGKILL left. Only this pid
    namespace's: another's pids mean other processes."""
    base = base or spool_base()
    ours = f"{SPOOL_PREFIX}{_PID_NAMESPACE}-"
    try:
        names = [name for name in os.listdir(base) if name.startswith(ours)]
    except OSError:
        return
    for name in names:
        pid = name[len(ours):].partition("-")[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        pass
    return True


@dataclass(slots=True)
class Spooled:
    """A worker's prepared chunk whose rows wait in a spool file: ``streams`` names each table
    and the span of the file its IPC stream takes; ``owners`` are the records they belong to."""

    prepared: list[Any]  # Prepared and Refused records
    path: str
    streams: list[tuple[str, int, int]]
    owners: list[int]
    size: int

    def unspool(self) -> list[Any]:
        """The prepared records, with their rows read from the file (mapped, then removed)."""
        with pa.memory_map(self.path) as source:
            data = source.read_buffer()  # the mapping lives as long as the rows use it
        os.unlink(self.path)
        tables = {name: pa.ipc.open_stream(data.slice(start, length)).read_all()
                  for name, start, length in self.streams}
        rows = ChunkRows(tables.pop(_EVENTS_STREAM), tables, self.size)
        for i in self.owners:
            self.prepared[i].rows = rows
        return self.prepared


def spool_rows(prepared: list, spool: str) -> list | Spooled:
    """``prepared`` (:class:`~recstore.store.prepare.Prepared` and refused records) with its
    chunk's rows written to a new file in ``spool``; as it was when there are none or the file
    cannot be written (they go through the pipe then)."""
    owners = [i for i, p in enumerate(prepared) if getattr(p, "rows", None) is not None]
    if not owners:
        return prepared
    rows = prepared[owners[0]].rows
    path = None
    try:
        fd, path = tempfile.mkstemp(dir=spool, suffix=".arrow")
        os.close(fd)
        streams = _write_streams(path, {_EVENTS_STREAM: rows.events, **rows.tables})
    except OSError:  # a full or removed spool (the writer has stopped)
        if path is not None:
            with suppress(OSError):
                os.unlink(path)
        return prepared
    for i in owners:
        prepared[i].rows = None
    return Spooled(prepared, path, streams, owners, rows.size)


def _write_streams(path: str, tables: dict[str, pa.Table]) -> list[tuple[str, int, int]]:
    """Write each table to ``path`` as an Arrow IPC stream, one after another; returns each
    one's name, start and length."""
    streams = []
    with pa.OSFile(path, "wb") as sink:
        for name, table in tables.items():
            start = sink.tell()
            with pa.ipc.new_stream(sink, table.schema) as out:
                out.write_table(table)
            streams.append((name, start, sink.tell() - start))
    return streams

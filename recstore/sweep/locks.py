"""Process locks beside the store file: one sweep scheduler per store, one run per sweep.

An exclusive ``flock`` on a small file that holds the owner's PID. The kernel drops the lock
when the process dies (even by SIGKILL), so a crash never leaves a stale lock behind; the PID in
the file only serves the message that names who holds it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
from pathlib import Path

from recstore.errors import InputError, StoreLockedError
from recstore.files import FILE_MODE, os_errors_as_input

# What a lock file holds: nothing (released) or its holder's PID.
_LOCK_CONTENT = re.compile(rb"\s*\d*\s*")
_MAX_LOCK_BYTES = 32


class PidLock:
    """An exclusive, non-blocking ``flock`` on ``path``; ``what`` names it in the refusal."""

    def __init__(self, path: str | Path, what: str):
        self.path = Path(path)
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`StoreLockedError` naming the PID that holds it.

        Raises:
            InputError: the lock path is a symbolic link, or a file recstore did not write.
        """
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise StoreLockedError(
                f"{self.what} is already running (PID {holder}, lock file {self.path}); "
                "wait for it or stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def _open(self) -> int:
        """The lock file, created 0600 when new. Never through a symbolic link, and never a
        file that is not a lock's (another user's, a hard link, one holding more than a PID):
        the holder rewrites it with its PID."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        where = str(self.path)
        with os_errors_as_input(where):
            try:
                fd = os.open(self.path, flags, FILE_MODE)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise InputError("lock file is a symbolic link; remove it (recstore does not "
                                     "write through links)", source=where) from None
                raise
        info = os.fstat(fd)
        content = os.pread(fd, _MAX_LOCK_BYTES + 1, 0)
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid()
                or info.st_nlink != 1 or len(content) > _MAX_LOCK_BYTES
                or not _LOCK_CONTENT.fullmatch(content)):
            os.close(fd)
            raise InputError("is not a lock file recstore wrote (a PID); move it away and "
                             "retry (it was left unchanged)", source=where)
        return fd

    def release(self) -> None:
        """Release the lock (the file stays; removing it would race with a new holder)."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> PidLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def scheduler_lock(db_path: str | Path) -> PidLock:
    """The lock that allows one ``sweep schedule`` per store: ``<db>.sweep.lock``."""
    return PidLock(f"{db_path}.sweep.lock", f"a sweep scheduler for {db_path}")


def sweep_run_lock(db_path: str | Path, sweep_name: str) -> PidLock:
    """The lock that allows one run of a sweep at a time: ``<db>.sweep-<name>.lock``."""
    return PidLock(f"{db_path}.sweep-{sweep_name}.lock", f"sweep {sweep_name!r} on {db_path}")

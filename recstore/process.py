"""Processes recstore starts: user commands (external replayers, judges) and sweep workers.

A user command runs in its own process group (a new session), so a timeout kills everything it
started — a replayer that runs its agent in a child process, or a shell script's pipeline — and
whatever it leaves behind is killed when it ends. Its output is read as bytes and decoded
strictly, so a command printing something that is not UTF-8 is one clear error, not a crash.

Worker processes call :func:`exit_with_parent`: when the process that started them dies (even by
SIGKILL, which gives it no chance to clean up), they kill the commands they are running and
exit, instead of finishing work nobody will collect.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

from recstore.errors import RecstoreError

__all__ = [
    "CommandError", "Finished", "exit_with_parent", "kill_running_commands", "run_command",
    "utf8_output", "worker_pool",
]

# After a kill, how long to wait for the pipes to close (a member that left the group may hold
# them open) before giving up on the rest of the output.
_DRAIN_SECONDS = 5.0
_PARENT_POLL_SECONDS = 0.2

_running: set[int] = set()  # process groups of the commands in flight in this process
_running_lock = threading.Lock()


class CommandError(RecstoreError):
    """A command could not be started or printed output that cannot be read."""


@dataclass(frozen=True)
class Finished:
    """How a command ended: its exit status (None when it was killed at the timeout while still
    running), its raw output, and whether it ran past the timeout."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool


def run_command(argv: Sequence[str], stdin: bytes, timeout: float | None, *,
                role: str = "the", cwd: str | None = None) -> Finished:
    """Run ``argv`` with ``stdin`` in its own process group; kill the group at ``timeout``
    seconds and once the command ends. ``role`` names the command in errors ("replayer").

    Raises:
        CommandError: the command does not exist, is not executable or is not a program.
    """
    name = f"{role} command {argv[0]!r}"
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cwd, start_new_session=True)
    except FileNotFoundError:
        raise CommandError(f"{name} not found") from None
    except PermissionError:
        raise CommandError(f"{name} is not executable (permission denied)") from None
    except OSError as exc:
        if exc.errno == errno.ENOEXEC:
            raise CommandError(f"{name} is not a program the system can run (a script needs "
                               "a #! line)") from None
        raise CommandError(f"cannot run {name}: {exc.strerror}") from None
    with _running_lock:
        _running.add(proc.pid)  # start_new_session: the group id is the command's pid
    try:
        try:
            stdout, stderr = proc.communicate(stdin, timeout=timeout)
            return Finished(proc.returncode, stdout, stderr, False)
        except subprocess.TimeoutExpired:
            # The command may have ended and left a child holding its output open: that is not
            # a timeout of the command itself.
            ended = proc.poll() is not None
            _kill_group(proc.pid)
            stdout, stderr = _drain(proc)
            return Finished(proc.returncode if ended else None, stdout, stderr, not ended)
    finally:
        _kill_group(proc.pid)
        with _running_lock:
            _running.discard(proc.pid)


def _drain(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    try:
        return proc.communicate(timeout=_DRAIN_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return b"", b""


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def kill_running_commands() -> None:
    """Kill the process group of every command this process is running (Ctrl-C)."""
    with _running_lock:
        groups = list(_running)
    for pgid in groups:
        _kill_group(pgid)


def utf8_output(data: bytes, what: str) -> str:
    """``data`` decoded as UTF-8, or a :class:`CommandError` saying where it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(f"{what} is not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
                           f"{exc.start})") from None


def exit_with_parent(parent_pid: int) -> None:
    """Exit this (worker) process as soon as ``parent_pid`` is no longer its parent, killing the
    commands it is running first. Call it first thing in the worker."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(_PARENT_POLL_SECONDS)
        with _running_lock:
            groups = list(_running)
        for pgid in groups:
            _kill_group(pgid)
        os._exit(1)

    threading.Thread(target=watch, name="recstore-parent-watch", daemon=True).start()


@contextmanager
def worker_pool(workers: int) -> Iterator[ProcessPoolExecutor | None]:
    """``workers`` worker processes, started now and ended with the block (None for 0).

    Open it before the store: the workers are forked (where the platform can) before this
    process opens DuckDB, whose threads must not be forked, and they never open the store.
    fork rather than spawn because a spawned worker imports the caller's ``__main__`` again: a
    user's script that ingests at top level would run again in every worker (and each would
    wait for the store's lock), and re-importing the package costs about a second per worker.
    Each worker exits when this process dies (:func:`exit_with_parent`).
    """
    if workers <= 0:
        yield None
        return
    import multiprocessing

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method),
                               initializer=exit_with_parent, initargs=(os.getpid(),))
    try:
        pool.submit(int)  # a fork pool starts all its workers at the first submit: now
        yield pool
    finally:  # after an error, work not started yet is dropped instead of waited for
        pool.shutdown(cancel_futures=True)

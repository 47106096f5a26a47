"""Processes recstore starts: user commands (external replayers, judges) and sweep workers.

A user command runs under a small reaper process (:mod:`recstore.reaper`) in a session of its
own. On Linux the reaper is a child subreaper: whatever the command starts — a child in its
process group, one that called ``setsid`` to leave it, a double-forked daemon — stays its
descendant, and is killed when the command ends, at the timeout and when recstore itself dies.
(Elsewhere the command's process group is killed, as a fallback.) Output is read as it comes,
at most ``max_output`` bytes of stdout (the child is stopped past that) and the last
:data:`STDERR_TAIL_BYTES` of stderr, as bytes decoded strictly: a command printing something
that is not UTF-8 is one clear error, not a crash.

Worker processes call :func:`exit_with_parent`: when the process that started them dies (even by
SIGKILL, which gives it no chance to clean up), they kill the commands they are running and
exit, instead of finishing work nobody will collect.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from recstore.errors import CommandError

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES", "CommandError", "Finished", "exit_with_parent",
    "kill_running_commands", "no_more_worker_pools", "run_command",
    "utf8_output", "worker_pool",
]

#: What a command may print on stdout (``run_command(max_output=)``): the ingest's largest
#: record (``recstore ingest --max-record-bytes``), since a replayer prints one record.
DEFAULT_MAX_OUTPUT_BYTES = 64 * 2**20
#: How much of a command's stderr is kept: its end, where the error usually is.
STDERR_TAIL_BYTES = 64 * 2**10
# After a stop, how long to wait for the reaper to report and the pipes to close.
_DRAIN_SECONDS = 5.0
_PARENT_POLL_SECONDS = 0.2
_READ_BYTES = 1 << 16
_REAPER = Path(__file__).with_name("reaper.py")
_USE_REAPER = sys.platform.startswith("linux")

_running: set[int] = set()  # reapers (process group leaders) of the commands in flight here
_running_lock = threading.Lock()


@dataclass(frozen=True)
class Finished:
    """How a command ended: its exit status (None when it was stopped while still running: at
    the timeout, or when its stdout passed the limit), its output, and why it was stopped."""

    returncode: int | None
    stdout: bytes  # at most the limit (nothing when ``output_exceeded``)
    stderr: bytes  # the last STDERR_TAIL_BYTES
    timed_out: bool
    output_exceeded: bool = False


def run_command(argv: Sequence[str], stdin: bytes, timeout: float | None, *,
                role: str = "the", cwd: str | None = None,
                max_output: int = DEFAULT_MAX_OUTPUT_BYTES) -> Finished:
    """Run ``argv`` with ``stdin`` and collect its output; stop it (and everything it started)
    at ``timeout`` seconds, when its stdout passes ``max_output`` bytes, and once it ends.
    ``role`` names the command in errors ("replayer").

    Raises:
        CommandError: the command does not exist, is not executable or is not a program.
    """
    name = f"{role} command {argv[0]!r}"
    status_read, status_write = os.pipe() if _USE_REAPER else (None, None)
    launch = ([sys.executable, "-I", "-S", str(_REAPER), str(status_write), str(os.getpid()),
               "--", *argv] if _USE_REAPER else list(argv))
    try:
        proc = subprocess.Popen(launch, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cwd, start_new_session=True,
                                pass_fds=(status_write,) if _USE_REAPER else ())
    except OSError as exc:
        if status_read is not None:
            os.close(status_read)
        raise _start_error(name, exc.errno) from None
    finally:
        if status_write is not None:
            os.close(status_write)
    with _running_lock:
        _running.add(proc.pid)  # start_new_session: the group id is the leader's pid
    try:
        output = _Collected(proc, stdin, status_read, max_output)
        deadline = None if timeout is None else time.monotonic() + timeout
        timed_out = not output.collect(deadline)
        if timed_out or output.exceeded:
            _stop(proc)
            output.collect(time.monotonic() + _DRAIN_SECONDS)
        returncode = _returncode(proc, output.status, name, timed_out or output.exceeded)
        return Finished(returncode, b"".join(output.stdout), bytes(output.stderr[-STDERR_TAIL_BYTES:]),
                        timed_out and returncode is None, output.exceeded)
    finally:
        if proc.poll() is None:  # let the reaper clean up (after an error here, too)
            _stop(proc)
            try:
                proc.wait(timeout=_DRAIN_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        _kill_group(proc.pid)  # the fallback, and anything the reaper could not reach
        proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            pipe.close()
        if status_read is not None:
            os.close(status_read)
        with _running_lock:
            _running.discard(proc.pid)


class _Collected:
    """A command's output as it is read: stdout up to ``max_output`` bytes, the tail of
    stderr and the reaper's status line, while its input is fed."""

    def __init__(self, proc: subprocess.Popen, stdin: bytes, status_fd: int | None,
                 max_output: int) -> None:
        self._proc = proc
        self._stdin = memoryview(stdin)
        self._max_output = max_output
        self._open = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
        if status_fd is not None:
            self._open[status_fd] = "status"
        for fd in (*self._open, proc.stdin.fileno()):
            os.set_blocking(fd, False)
        self.stdout: list[bytes] = []
        self.stdout_bytes = 0
        self.stderr = bytearray()
        self.status = b""
        self.exceeded = False

    def collect(self, deadline: float | None) -> bool:
        """Feed the input and read until every output is closed or stdout passes its limit
        (True; ``exceeded`` tells which), or until ``deadline`` (False)."""
        with selectors.DefaultSelector() as selector:
            for fd, what in self._open.items():
                selector.register(fd, selectors.EVENT_READ, what)
            stdin = self._proc.stdin
            if not stdin.closed and self._stdin:
                selector.register(stdin.fileno(), selectors.EVENT_WRITE, "stdin")
            elif not stdin.closed:
                stdin.close()
            while len(selector.get_map()) and not self.exceeded:
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    return False
                for key, _ in selector.select(wait):
                    if key.data == "stdin":
                        if not self._write():
                            selector.unregister(key.fd)
                            stdin.close()
                    elif not self._read(key.fd, key.data):
                        selector.unregister(key.fd)
                        del self._open[key.fd]
            if self.exceeded:  # read no more of it: the command is stopped next
                self._open.pop(self._proc.stdout.fileno(), None)
        return True

    def _write(self) -> bool:
        """Write the next piece of the input; False once it is all written (or refused)."""
        try:
            written = os.write(self._proc.stdin.fileno(), self._stdin[:_READ_BYTES])
        except BlockingIOError:
            return True
        except BrokenPipeError:  # the command does not read its input: that is its business
            return False
        self._stdin = self._stdin[written:]
        return bool(self._stdin)

    def _read(self, fd: int, what: str) -> bool:
        """Read what ``fd`` has; False at end of file."""
        try:
            data = os.read(fd, _READ_BYTES)
        except BlockingIOError:
            return True
        if not data:
            return False
        if what == "stdout":
            self.stdout.append(data)
            self.stdout_bytes += len(data)
            if self.stdout_bytes > self._max_output:  # unread: drop what was held
                self.exceeded, self.stdout = True, []
        elif what == "stderr":
            self.stderr += data
            if len(self.stderr) > 2 * STDERR_TAIL_BYTES:
                del self.stderr[:-STDERR_TAIL_BYTES]
        else:
            self.status += data
        return True


def _returncode(proc: subprocess.Popen, status: bytes, name: str, stopped: bool) -> int | None:
    """The command's exit status from the reaper's status line (None: it was stopped)."""
    if not _USE_REAPER:
        if stopped:  # killed with its group: it was still running, as far as can be told
            return None
        try:
            return proc.wait(timeout=_DRAIN_SECONDS)
        except subprocess.TimeoutExpired:
            return None
    word, _, value = status.decode("ascii", "replace").strip().partition(" ")
    if word == "error":
        raise _start_error(name, int(value))
    if word == "exit":
        return int(value)
    if word == "signal":
        return -int(value)
    return None  # "stopped", or a reaper that did not report


def _start_error(name: str, code: int | None) -> CommandError:
    if code == errno.ENOENT:
        return CommandError(f"{name} not found")
    if code in (errno.EACCES, errno.EPERM):
        return CommandError(f"{name} is not executable (permission denied)")
    if code == errno.ENOEXEC:
        return CommandError(f"{name} is not a program the system can run (a script needs "
                            "a #! line)")
    return CommandError(f"cannot run {name}: {os.strerror(code or 0)}")


def _stop(proc: subprocess.Popen) -> None:
    """Ask the reaper to kill the command and all it started (SIGTERM: it cleans up first);
    without a reaper, kill the command's process group."""
    if proc.poll() is not None:
        return
    if not _USE_REAPER:
        _kill_group(proc.pid)
        return
    try:
        proc.send_signal(signal.SIGTERM)
    except ProcessLookupError:
        pass


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def kill_running_commands() -> None:
    """Stop every command this process is running (Ctrl-C): each reaper is asked to kill its
    command and everything it started (their process groups without a reaper)."""
    with _running_lock:
        leaders = list(_running)
    for pid in leaders:
        if not _USE_REAPER:
            _kill_group(pid)
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


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
            reapers = list(_running)
        for pid in reapers:  # SIGTERM: each reaper kills its command's processes, then exits
            try:
                os.kill(pid, signal.SIGTERM if _USE_REAPER else signal.SIGKILL)
            except ProcessLookupError:
                pass
        os._exit(1)

    threading.Thread(target=watch, name="recstore-parent-watch", daemon=True).start()


_pools_allowed = True


def no_more_worker_pools() -> None:
    """From now on :func:`worker_pool` yields None (the work runs in this process):
    ``recstore serve`` runs other shells' commands in threads beside DuckDB's, and a fork then
    would copy their locks in whatever state they are."""
    global _pools_allowed
    _pools_allowed = False


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
    if workers <= 0 or not _pools_allowed:
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

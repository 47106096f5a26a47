"""The process between recstore and a user command: it outlives the command and kills whatever
the command left running (:mod:`recstore.process` starts it; stdlib only, run as a script).

    python -I -S reaper.py STATUS_FD PARENT_PID -- COMMAND [ARG ...]

On Linux it makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``): every process the
command starts that loses its parent — a double-forked daemon, a child that called ``setsid``
to leave the process group — is re-parented to it instead of to init, so it stays in reach.
When the command ends, or when this process receives SIGTERM (recstore's timeout, or
``PR_SET_PDEATHSIG`` when recstore itself dies), it kills every descendant with SIGKILL and
reaps it, then writes one status line to STATUS_FD and exits:

* ``exit N`` / ``signal N`` — how the command ended;
* ``stopped`` — it was still running when SIGTERM came;
* ``error ERRNO`` — it could not be started (not found, not executable, not a program).

It holds none of the command's pipes once the command runs, so recstore sees end-of-file on
the command's output as soon as the last process writing it is gone.
"""

from __future__ import annotations

import _signal as signal  # the C module: `signal` imports enum, a third of the start-up
import ctypes
import os
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


class _Stop(Exception):
    """SIGTERM arrived: stop the command and everything it started."""


_armed = True  # whether a SIGTERM still interrupts: once only, and only inside main's try


def _stop(signum: int, frame: object) -> None:
    # recstore may send SIGTERM while PR_SET_PDEATHSIG sends another: a second one raised
    # while the first is handled, or one arriving after the command ended, would end this
    # process before it kills what the command left running.
    global _armed
    if _armed:
        _armed = False
        raise _Stop


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux: no prctl
        return False


def _children() -> list[int]:
    """The pids whose parent is this process (from /proc; empty where there is none)."""
    me = os.getpid()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(entry))
    return found


def _kill_descendants() -> None:
    """SIGKILL every child and reap it, until none is left: a killed process's own children
    are re-parented here (the subreaper) and killed in the next round."""
    while True:
        for pid in _children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _spawn(command: list[str], status_fd: int) -> tuple[int | None, int]:
    """Start ``command`` on this process's stdin/stdout/stderr: (its pid, 0), or (None, errno)
    when it cannot be executed. (fork and exec, not ``subprocess``: its import is most of this
    script's start-up time.)"""
    report_read, report_write = os.pipe()  # close-on-exec: end of file once the exec succeeded
    pid = os.fork()
    if pid == 0:
        try:
            os.close(report_read)
            os.close(status_fd)
            for ignored in (signal.SIGPIPE, signal.SIGXFSZ):  # as Python found them
                signal.signal(ignored, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(report_write, str(exc.errno or 0).encode("ascii"))
        finally:
            os._exit(127)
    os.close(report_write)
    report = os.read(report_read, 32)
    os.close(report_read)
    if not report:
        return pid, 0
    os.waitpid(pid, 0)
    return None, int(report)


def _status(code: int) -> str:
    return f"signal {os.WTERMSIG(code)}" if os.WIFSIGNALED(code) else f"exit {os.WEXITSTATUS(code)}"


def _wait_for(main: int) -> str:
    """Reap children (adopted ones too) until ``main`` ends; its status line."""
    while True:
        pid, code = os.waitpid(-1, 0)
        if pid == main:
            return _status(code)


def _disarm() -> None:
    global _armed
    _armed = False


def main(argv: list[str]) -> int:
    status_fd, parent = int(argv[1]), int(argv[2])
    command = argv[4:]
    signal.signal(signal.SIGTERM, _stop)
    status = "stopped"
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # recstore died before the death signal was armed
            raise _Stop
        child, error = _spawn(command, status_fd)
        if child is None:
            status = f"error {error}"
        else:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # the command's pipes: only its own processes hold them now
                os.dup2(null, fd)
            status = _wait_for(child)
        _disarm()
    except _Stop:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # nothing may interrupt the clean-up
    _kill_descendants()
    os.write(status_fd, status.encode("ascii") + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

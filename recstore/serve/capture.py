"""Run a ``recstore`` command for another shell inside the server, its output captured per thread.

click's ``CliRunner`` captures a command's output by swapping ``sys.stdout`` and ``sys.stderr``
for the whole process (and ``os.environ`` for ``COLUMNS``), so two commands could only run one
at a time: a replay of an hour held every other forwarded query for that hour. Instead, the
first forwarded command installs :class:`_PerThread` streams in place of ``sys.stdin``,
``sys.stdout`` and ``sys.stderr`` once: a thread running a command writes into its own buffers,
every other thread (uvicorn's log, the watch loop) writes where it always did. The table width a
command fits (``COLUMNS``) is set for its thread only (:func:`recstore.cli.terminal.columns_for`).

Threads a command starts itself write to the server's own streams (their output is not the
command's result, only progress and warnings).
"""

from __future__ import annotations

import io
import sys
import threading
from typing import Any

__all__ = ["run_command"]

_LOCAL = threading.local()
_INSTALL = threading.Lock()


class _PerThread:
    """A text stream that is this thread's capture buffer while it runs a command, else the
    stream it replaced. Every attribute (``buffer``, ``isatty``, ``encoding``, ...) is the
    current target's, so click and rich see an ordinary text stream."""

    def __init__(self, name: str, original: Any):
        self._name = name
        self._original = original

    def _target(self) -> Any:
        streams = getattr(_LOCAL, "streams", None)
        return self._original if streams is None else streams[self._name]

    def write(self, text: str) -> int:  # the hot path: no __getattr__
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)

    def __iter__(self):
        return iter(self._target())


def _install() -> None:
    """Put :class:`_PerThread` streams in place of the process's, once."""
    with _INSTALL:
        for name in ("stdin", "stdout", "stderr"):
            if not isinstance(getattr(sys, name), _PerThread):
                setattr(sys, name, _PerThread(name, getattr(sys, name)))


def _buffer(data: bytes = b"") -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace",
                            write_through=True)


def run_command(args: list[str], obj: dict[str, Any], columns: str | None) -> dict:
    """Run ``recstore ARGS`` in this thread with ``obj`` as click's context object; returns
    ``{"stdout", "stderr", "exit_code"}``. stdin is empty; an unexpected exception is one line
    on stderr and exit status 1 (the traceback goes to the server's stderr)."""
    from recstore.cli import cli
    from recstore.cli.terminal import columns_for

    _install()
    streams = {"stdin": _buffer(), "stdout": _buffer(), "stderr": _buffer()}
    _LOCAL.streams = streams
    try:
        with columns_for(columns):
            exit_code = _exit_status(cli, args, obj)
    finally:
        _LOCAL.streams = None
    return {"stdout": _text(streams["stdout"]), "stderr": _text(streams["stderr"]),
            "exit_code": exit_code}


def _exit_status(cli: Any, args: list[str], obj: dict[str, Any]) -> int:
    try:
        cli.main(args=args, prog_name="recstore", obj=obj, standalone_mode=True)
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except Exception as exc:  # noqa: BLE001 - the other shell gets one line, the server the rest
        import traceback

        traceback.print_exc(file=sys.__stderr__)
        sys.stderr.write(f"recstore: error: the server failed running the command: {exc!r}\n")
        return 1
    return 0


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", errors="replace")

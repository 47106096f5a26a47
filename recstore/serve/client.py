"""The CLI beside a running server: find it, and send it a read command or records.

While ``recstore serve`` holds a store it writes ``<db>.serve.json`` (owner-only: URL, token,
pid). A read command (``query``, ``runs``, ``show``, ...) run from another shell on that store
is sent to the server (``POST /api/cli``), which runs the same command on the store it holds and
answers with its output and exit status; nothing waits for the store's lock. This module uses
only the standard library, so the CLI's start-up stays light.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["FORWARDED", "forward", "server_for"]

#: Commands the server runs for another shell (their output is text); ``ingest`` reads its
#: files in the server, with the paths made absolute here.
FORWARDED = frozenset({"query", "runs", "show", "rejects", "schema", "queries", "lineage",
                       "ingest"})
# ingest options that take a value (the value is not a path)
_INGEST_VALUES = frozenset({"--tag", "--format", "--batch-size", "--max-record-bytes",
                            "--workers", "--lock-timeout"})


def absolute_paths(command: str, args: list[str]) -> list[str]:
    """``args`` with ``ingest``'s paths made absolute (the server runs in another directory).

    Raises:
        ValueError: ``-`` (stdin) cannot be sent to a server.
    """
    if command != "ingest":
        return args
    out, value_next = [], False
    for arg in args:
        if value_next or arg.startswith("-") and arg != "-":
            out.append(arg)
            value_next = arg in _INGEST_VALUES
            continue
        if arg == "-":
            raise ValueError("stdin cannot be sent to the server; POST it to /v1/runrecords")
        out.append(os.path.abspath(os.path.expanduser(arg)))
    return out


def server_for(db: str | os.PathLike) -> dict | None:
    """``{"url", "token", "pid"}`` of the live server holding ``db``, or None."""
    path = Path(db)
    info_path = path.with_name(path.name + ".serve.json")
    try:
        info = json.loads(info_path.read_text())
        pid = int(info["pid"])
        if pid == os.getpid():
            return None
        os.kill(pid, 0)
        return info
    except (OSError, ValueError, KeyError, TypeError):
        return None


def forward(info: dict, command: str, args: list[str], timeout: float = 600) -> dict:
    """Run ``recstore COMMAND ARGS`` on the server; ``{"stdout", "stderr", "exit_code"}``."""
    import urllib.error  # here: only a command sent to a server pays for the import
    import urllib.request

    body = json.dumps({"command": command, "args": args,
                       "columns": os.environ.get("COLUMNS")}).encode()
    request = urllib.request.Request(info["url"].rstrip("/") + "/api/cli", data=body,
                                     method="POST",
                                     headers={"content-type": "application/json"})
    if info.get("token"):
        request.add_header("authorization", f"Bearer {info['token']}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 - own URL
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        try:
            why = json.loads(exc.read()).get("error", str(exc))
        except ValueError:
            why = str(exc)
        return {"stdout": "", "stderr": f"recstore: error: the server at {info['url']}: {why}\n",
                "exit_code": 2}
    except (urllib.error.URLError, OSError) as exc:
        return {"stdout": "", "stderr": f"recstore: error: the server at {info['url']} does not "
                f"answer ({exc}); is it still running?\n", "exit_code": 2}

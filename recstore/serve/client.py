"""The CLI beside a running server: find it, and send it a store command.

While ``recstore serve`` holds a store it writes ``<db>.serve.json`` (owner-only: URL, token,
pid). Every command that opens the store (``query``, ``compare``, ``replay``, ``sweep run``,
``tag``, ``export``, ``ingest``, ...) run from another shell on that store is sent to the server
(``POST /api/cli``), which runs the same command on the store it holds and answers with its
output and exit status; nothing waits for the store's lock. The paths a command names (files it
reads, ``-o``/``--html`` files and folders it writes) are made absolute here, as the server
runs in another directory; it reads and writes them as the same user. This module uses only
the standard library and click, so the CLI's start-up stays light.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from recstore.cli.terminal import table_width

__all__ = ["CLI_KEY_HEADER", "FORWARDED", "absolute_paths", "forward", "refusal", "server_for"]

#: The header that carries the server file's ``cli_key``: only the store owner's shells can
#: read it, and only they may have the server run commands (and so read and write files).
CLI_KEY_HEADER = "x-recstore-cli-key"
#: Commands that open the store, so the server runs them for another shell.
FORWARDED = frozenset({"query", "runs", "show", "rejects", "schema", "queries", "lineage",
                       "ingest", "compare", "replay", "sweep", "tag", "export", "verify",
                       "rebuild"})
# Arguments that name paths without click.Path (ingest takes globs and "-"; export's TARGET is
# a folder, or with --otlp a filter); compare's A B are files when such files exist, else runs.
_PATH_ARGUMENTS = frozenset({("ingest", "paths"), ("export", "target")})
_FILE_OR_RUN_ARGUMENTS = frozenset({("compare", "runs")})


def runs_locally(command: str, args: list[str]) -> bool:
    """Whether ``recstore COMMAND ARGS`` never opens the store (Spark reads Parquet), so it
    runs in this process even beside a server."""
    return command in ("query", "compare") and any(
        a == "--engine=spark" or a == "spark" and before == "--engine"
        for before, a in zip(["", *args], args, strict=False))


def refusal(command: str, args: list[str]) -> str | None:
    """Why ``recstore COMMAND ARGS`` cannot be sent to the server holding the store (it reads
    stdin or runs until stopped), with what to do instead; None when it can."""
    if command == "serve":
        return "it is served already; open its URL"
    if command == "ingest" and "--watch" in args:
        return ("`ingest --watch` runs until stopped; let the server watch the folders "
                "(recstore serve --watch DIR), or stop the server first")
    if command == "ingest" and "-" in args:
        return "stdin cannot be sent to the server; POST it to /v1/runrecords"
    if command == "sweep" and args[:1] == ["schedule"]:
        return ("`sweep schedule` runs until stopped; stop the server first, or fire each "
                "sweep from cron (`recstore sweep cron SPEC`: every `sweep run` is sent to the "
                "server)")
    return None


def absolute_paths(command: click.Command, args: list[str]) -> list[str]:
    """``args`` of ``command`` with every value that names a path made absolute (the server
    runs in another directory): click.Path options and arguments, and ``_PATH_ARGUMENTS``.
    A group's first free word is its subcommand, whose own arguments follow."""
    options = {name: p for p in command.params if isinstance(p, click.Option)
               for name in (*p.opts, *p.secondary_opts)}
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    filter_target = command.name == "export" and any(a.split("=")[0] == "--otlp" for a in args)
    out: list[str] = []
    i = 0
    while i < len(args):
        taken = _option(options, args, i)
        if taken is not None:
            out += taken[0]
            i += taken[1]
            continue
        arg = args[i]
        if isinstance(command, click.Group):
            sub = command.commands.get(arg)
            return out + [arg] + (absolute_paths(sub, args[i + 1:]) if sub else args[i + 1:])
        argument = arguments[0] if arguments else None
        if argument is not None and argument.nargs != -1:
            arguments.pop(0)
        out.append(_argument(command.name, argument, arg, filter_target))
        i += 1
    return out


def _option(options: dict[str, click.Option], args: list[str], i: int
            ) -> tuple[list[str], int] | None:
    """The words of the option at ``args[i]``, a path value made absolute, and how many words
    it took; None when ``args[i]`` is not an option."""
    arg = args[i]
    if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2:
        return _short_options(options, args, i)
    name, eq, value = arg.partition("=")
    option = options.get(name)
    if option is None:
        return ([arg], 1) if arg.startswith("-") and arg != "-" else None
    if option.is_flag or option.count:
        return [arg], 1
    if eq:  # --output=FILE
        return [f"{name}={_path(option, value)}"], 1
    return _with_values(option, [arg], args, i)


def _short_options(options: dict[str, click.Option], args: list[str], i: int
                   ) -> tuple[list[str], int]:
    """``-qv``, ``-oFILE``, ``-qoFILE``, ``-qo FILE``: short options in one word, as click
    reads them (flags, then at most one that takes a value: the word's rest, or the next)."""
    arg = args[i]
    for at in range(1, len(arg)):
        option = options.get("-" + arg[at])
        if option is None:
            return [arg], 1  # not ours to judge: click names what is wrong
        if not (option.is_flag or option.count):
            rest = arg[at + 1:]
            if rest:
                return [arg[:at + 1] + _path(option, rest)], 1
            return _with_values(option, [arg], args, i)
    return [arg], 1


def _with_values(option: click.Option, words: list[str], args: list[str], i: int
                 ) -> tuple[list[str], int]:
    """``words`` (the option) and its ``nargs`` values from ``args[i + 1:]``."""
    values = args[i + 1:i + 1 + option.nargs]
    return [*words, *(_path(option, v) for v in values)], 1 + option.nargs


def _argument(command: str, argument: click.Argument | None, value: str,
              filter_target: bool) -> str:
    if argument is None:
        return value
    named = (command, argument.name)
    if named in _PATH_ARGUMENTS and not filter_target or (
            named in _FILE_OR_RUN_ARGUMENTS and os.path.isfile(value)):
        return _absolute(value)
    return _path(argument, value)


def _path(param: click.Parameter, value: str) -> str:
    return _absolute(value) if isinstance(param.type, click.Path) else value


def _absolute(value: str) -> str:
    return value if value == "-" else os.path.abspath(os.path.expanduser(value))


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


def forward(info: dict, command: str, args: list[str]) -> dict:
    """Run ``recstore COMMAND ARGS`` on the server; ``{"stdout", "stderr", "exit_code"}``.

    It waits as long as the command runs (a replay may take hours); a server that stops
    closes the connection. The table width is this shell's: its terminal's, else $COLUMNS."""
    import urllib.error  # here: only a command sent to a server pays for the import
    import urllib.request

    width = table_width(None, sys.stdout)
    columns = str(width) if width else None
    body = json.dumps({"command": command, "args": args, "columns": columns}).encode()
    request = urllib.request.Request(info["url"].rstrip("/") + "/api/cli", data=body,
                                     method="POST",
                                     headers={"content-type": "application/json"})
    request.add_header(CLI_KEY_HEADER, str(info.get("cli_key", "")))
    if info.get("token"):
        request.add_header("authorization", f"Bearer {info['token']}")
    try:
        with urllib.request.urlopen(request) as answer:  # noqa: S310 - own URL
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

"""The CLI's words for what the library says: the one place that spells a parameter as a flag.

Library errors (and the reasons stored with rejects) name a parameter as its Python keyword in
backticks (`` `max_record_bytes` ``) and carry it as data (``RecstoreError.param``); on the
command line the user typed a flag. :func:`in_cli_terms` spells each such name as

* the flag of the command that ran, when it has an option of that name (``--max-record-bytes``),
  or of the root group (``--db``);
* else the command that has it (``recstore replay --allow-outside``; two such commands joined
  by "or");
* else the name stays as the library wrote it (a key of a sweep spec, say).

An option's name is its Python name in the command's function, so a command whose option means
the library's parameter takes the library's name for it (``--param`` is ``params``).
"""

from __future__ import annotations

import re

import click

#: Where :meth:`recstore.cli._Command.parse_args` leaves the context of the command that runs
#: (``ctx.meta`` is shared by a context and all its children).
RUNNING = "recstore.running"
_EVERY = "recstore.flags_of_every_command"

_NAME = re.compile(r"`([a-z_][a-z0-9_]*)`")


def in_cli_terms(message: str, ctx: click.Context) -> str:
    """``message`` with each parameter the library names in backticks spelled as the CLI's
    flag (see the module's docstring)."""
    if "`" not in message:
        return message
    root = ctx.find_root()
    running: click.Context | None = ctx.meta.get(RUNNING)
    own = _flags(running.command) if running is not None else {}
    own.update({k: v for k, v in _flags(root.command).items() if k not in own})

    def spelled(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in own:
            return own[name]
        if _EVERY not in ctx.meta:  # once a run: `rejects` may print many reasons
            ctx.meta[_EVERY] = _flags_of_every_command(root)
        return " or ".join(ctx.meta[_EVERY].get(name, [])) or match.group(0)

    return _NAME.sub(spelled, message)


def _flags(command: click.Command) -> dict[str, str]:
    """A command's options: Python name -> its longest flag."""
    return {param.name: max(param.opts, key=len) for param in command.params
            if isinstance(param, click.Option) and param.name}


def _flags_of_every_command(root: click.Context) -> dict[str, list[str]]:
    """Python name -> ``recstore COMMAND --flag`` for every command that has such an option,
    in the order ``recstore --help`` lists them (each command's module is imported)."""
    found: dict[str, list[str]] = {}
    group = root.command
    assert isinstance(group, click.Group)
    stack = [(f"recstore {name}", group, name)
             for name in reversed(group.list_commands(root))]
    while stack:
        path, parent, name = stack.pop()
        command = parent.get_command(root, name)
        if command is None:
            continue
        for option, flag in _flags(command).items():
            found.setdefault(option, []).append(f"{path} {flag}")
        if isinstance(command, click.Group):
            stack.extend((f"{path} {sub}", command, sub)
                         for sub in reversed(command.list_commands(root)))
    return found

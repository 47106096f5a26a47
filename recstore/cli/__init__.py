"""The ``recstore`` command line: a thin skin over the library.

Each command group lives in its own module and registers itself on :data:`cli` when imported;
this module only builds the root group and turns :class:`~recstore.errors.RecstoreError` into one
line on stderr with the error's exit status (tracebacks only with ``--debug``).
"""

from __future__ import annotations

import sys

import click

from recstore.errors import RecstoreError


class _Root(click.Group):
    def invoke(self, ctx: click.Context):  # noqa: D102 - click hook
        try:
            return super().invoke(ctx)
        except RecstoreError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"recstore: error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:  # before click turns it into "Aborted!" and status 1
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo("recstore: interrupted", err=True)
            ctx.exit(130)


@click.group(cls=_Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    envvar="RECSTORE_DB",
    default="recstore.duckdb",
    show_default=True,
    metavar="PATH",
    help="Store file (env RECSTORE_DB).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(package_name="recstore")
@click.pass_context
def cli(ctx: click.Context, db: str, debug: bool) -> None:
    """recstore: an event-sourced store for AI-agent run records."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db
    ctx.obj["debug"] = debug


# Importing a command module registers its commands on `cli`.
from recstore.cli import (  # noqa: E402,F401
    agentuse_cmds,
    compare_cmds,
    demo_cmd,
    query_cmds,
    record_cmds,
    replay_cmds,
    store_cmds,
    sweep_cmds,
)


def main() -> None:
    """Console-script entry point."""
    try:
        cli(obj={})
    except KeyboardInterrupt:
        click.echo("recstore: interrupted", err=True)
        sys.exit(130)

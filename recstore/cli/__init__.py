"""The ``recstore`` command line: a thin skin over the library.

Each command group lives in its own module and registers itself on :data:`cli` when imported.
This module only builds the root group, which imports a command's module the first time that
command runs (:data:`COMMANDS` says where each lives), and turns
:class:`~recstore.errors.RecstoreError` into one line on stderr with the error's exit status
(tracebacks only with ``--debug``).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

import click

from recstore import __version__
from recstore.cli.terms import RUNNING, in_cli_terms
from recstore.errors import RecstoreError

# Every command: the module whose import registers it on `cli`, and its one-line help (the first
# sentence of its docstring; tests/test_cli_startup.py checks they agree). Importing the command
# modules pulls in duckdb, pyarrow, sqlglot and pydantic (~1 s), so `recstore --help` and
# `--version` list commands from this table and import a module only when its command runs.
COMMANDS: dict[str, tuple[str, str]] = {
    "agentuse": ("recstore.cli.agentuse_cmds", "agentuse session trees (see docs/agentuse.md)."),
    "compare": ("recstore.cli.compare_cmds",
                "Compare runs exactly as aioc's compareRunRecords does, one pair or thousands."),
    "demo": ("recstore.cli.demo_cmd",
             "Generate a corpus, then inspect, ingest, query, compare, replay and sweep it."),
    "export": ("recstore.cli.query_cmds", "Write every view as zstd Parquet under DIRECTORY, "
               "or runs as OTLP/JSON traces (--otlp)."),
    "ingest": ("recstore.cli.store_cmds", "Append run records to the store: .json, "
               ".jsonl/.ndjson (optionally .gz), directories (recursive), globs, or - for NDJSON "
               "on stdin."),
    "inspect": ("recstore.cli.record_cmds", "Summarize one aioc RunRecord FILE: visits, requests "
                "and their item intervals, tool calls with envelope status, handoffs, decisions "
                "and findings."),
    "lineage": ("recstore.cli.replay_cmds", "Print the tree of runs derived from RUN (replays, "
                "replays of replays, continuations)."),
    "queries": ("recstore.cli.query_cmds",
                "List the saved queries (run one with `recstore query @NAME`)."),
    "query": ("recstore.cli.query_cmds", "Run read-only SQL or a filter-DSL query (or "
              "@saved-name) over the store's views."),
    "rebuild": ("recstore.cli.store_cmds",
                "Recompute every projection table from the event log alone."),
    "rejects": ("recstore.cli.store_cmds",
                "List input the store could not accept: source, line, reason."),
    "replay": ("recstore.cli.replay_cmds",
               "Replay stored runs against a candidate with recorded tool outputs."),
    "runs": ("recstore.cli.store_cmds", "List the most recently stored runs."),
    "schema": ("recstore.cli.query_cmds",
               "Print the queryable views with column types and descriptions."),
    "serve": ("recstore.cli.serve_cmds",
              "Serve the store as a local web app and JSON API, with live ingest (docs/serve.md)."),
    "show": ("recstore.cli.store_cmds", "Show one stored run (run key, runId, or a unique "
             "prefix): question, response, error, duration and tags, then the `inspect` "
             "summary; with --json the stored record exactly as ingested (original key order)."),
    "sweep": ("recstore.cli.sweep_cmds", "Scheduled replay sweeps: select runs, replay them "
              "against a candidate, compare, gate."),
    "spark": ("recstore.cli.spark_cmds", "Run recstore's work on Spark (see docs/scale.md)."),
    "tag": ("recstore.cli.store_cmds",
            "Set or remove tags on the runs SELECTION picks (a DSL filter or SQL, as compare "
            "takes)."),
    "verify": ("recstore.cli.store_cmds", "Check the log's batch hash chain and every reference "
               "in it, and that rebuilding the projections from the log reproduces them."),
}


def answer_pyarrow_pandas_probe() -> None:
    """Spare a command pyarrow's import of pandas (~340 modules, 0.2-0.5 s of every ingest).

    The first time pyarrow converts a Python list it imports pandas, only to ask whether the
    list is a pandas object. recstore never hands it one, so the CLI lets that first probe find
    no pandas. Only the probe is answered: pyarrow imports pandas when something asks for
    pandas by name (``to_pandas``), and a program using recstore as a library is left alone.
    """
    if "pandas" in sys.modules:
        return
    import pyarrow as pa  # loaded already: see answer_the_probe_when_pyarrow_loads

    sys.meta_path.insert(0, _NO_PANDAS)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(_NO_PANDAS)


class _NoPandas(importlib.abc.MetaPathFinder):
    """An import finder for which pandas is not installed."""

    def find_spec(self, name, path, target=None):  # noqa: D102 - importlib hook
        if name == "pandas":
            raise ModuleNotFoundError("pandas is not needed here", name=name)
        return None


_NO_PANDAS = _NoPandas()


def answer_the_probe_when_pyarrow_loads() -> None:
    """:func:`answer_pyarrow_pandas_probe` as soon as something imports pyarrow (now, if it is
    loaded): a command that never needs pyarrow (a query of plain columns, ``runs``, ``show``)
    does not import it for the probe's sake."""
    if "pyarrow" in sys.modules:
        answer_pyarrow_pandas_probe()
    elif _PROBE_ON_IMPORT not in sys.meta_path:
        sys.meta_path.insert(0, _PROBE_ON_IMPORT)


class _ProbeOnImport(importlib.abc.MetaPathFinder):
    """Finds pyarrow as the other finders do, with a loader that answers the probe once
    pyarrow has loaded; then leaves the import system."""

    def find_spec(self, name, path, target=None):  # noqa: D102 - importlib hook
        if name != "pyarrow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenAnswer(spec.loader)
        return spec


class _ThenAnswer(importlib.abc.Loader):
    """pyarrow's own loader, followed by the probe's answer."""

    def __init__(self, loader: importlib.abc.Loader):
        self._loader = loader

    def create_module(self, spec):  # noqa: D102 - importlib hook
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:  # noqa: D102 - importlib hook
        self._loader.exec_module(module)
        answer_pyarrow_pandas_probe()

    def __getattr__(self, name: str):  # resource readers and the like: the real loader's
        return getattr(self._loader, name)


_PROBE_ON_IMPORT = _ProbeOnImport()


class _Command(click.Command):
    """A command that answers pyarrow's pandas probe, should it load pyarrow, once its
    arguments are parsed (so ``--help`` stays light), and leaves its context where an error's
    message finds the flags it may name (:data:`~recstore.cli.terms.RUNNING`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:  # noqa: D102
        ctx.meta[RUNNING] = ctx
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):  # noqa: D102 - click hook
        if not (ctx.obj or {}).get("served_store"):  # a server's threads: sys.meta_path stays
            answer_the_probe_when_pyarrow_loads()
        return super().invoke(ctx)


class _Group(click.Group):
    """A command group whose commands (and subgroups') are :class:`_Command`."""

    command_class = _Command
    group_class = type  # subgroups are _Group too


class _Root(_Group):
    """The root group: commands load on first use; a RecstoreError becomes one line."""

    group_class = _Group

    def list_commands(self, ctx: click.Context) -> list[str]:  # noqa: D102 - click hook
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:  # noqa: D102
        if name not in self.commands and name in COMMANDS:
            # Importing the module registers the command on `cli`. __import__ rather than
            # importlib.import_module: only the former shows up in `python -X importtime`.
            __import__(COMMANDS[name][0])
        return self.commands.get(name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List every command with its one-line help without importing the command modules."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = [(name, self._short_help(name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _short_help(self, name: str, limit: int) -> str:
        command = self.commands.get(name) or click.Command(name, help=COMMANDS[name][1])
        return command.get_short_help_str(limit)

    def invoke(self, ctx: click.Context):  # noqa: D102 - click hook
        try:
            return super().invoke(ctx)
        except RecstoreError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            from recstore.records.render import printable

            message = in_cli_terms(str(exc), ctx)
            click.echo(f"recstore: error: {printable(message, keep=chr(10))}", err=True)
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
# The version from the package, not importlib.metadata: reading installed metadata costs ~50 ms.
@click.version_option(__version__, prog_name="recstore")
@click.pass_context
def cli(ctx: click.Context, db: str, debug: bool) -> None:
    """recstore: an event-sourced store for AI-agent run records."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db
    from recstore.files import protect_store_files  # light: os and the errors only

    protect_store_files(db)  # even commands that never open it (--engine spark) keep off it
    ctx.obj["debug"] = debug
    if ctx.invoked_subcommand and not ctx.obj.get("served_store"):
        _to_server(ctx, ctx.invoked_subcommand, db)


def _to_server(ctx: click.Context, command: str, db: str) -> None:
    """Send a command on a store that `recstore serve` holds to that server (docs/serve.md:
    working beside the server), print what it answers and exit with its status."""
    from recstore.serve.client import (
        FORWARDED,
        absolute_paths,
        forward,
        refusal,
        runs_locally,
        server_for,
    )

    if command not in FORWARDED | {"serve"} or "-h" in sys.argv or "--help" in sys.argv:
        return
    argv = sys.argv[1:]
    args = argv[argv.index(command) + 1:] if command in argv else []
    info = None if runs_locally(command, args) else server_for(db)
    if info is None:
        return
    why = refusal(command, args)
    if why is not None:
        raise RecstoreError(f"{db} is served by {info['url']}: {why}")
    answer = forward(info, command, absolute_paths(ctx.command.get_command(ctx, command), args))
    sys.stdout.write(answer["stdout"])
    sys.stderr.write(answer["stderr"])
    ctx.exit(answer["exit_code"])


def main() -> None:
    """Console-script entry point."""
    try:
        cli(obj={})
    except KeyboardInterrupt:
        click.echo("recstore: interrupted", err=True)
        sys.exit(130)

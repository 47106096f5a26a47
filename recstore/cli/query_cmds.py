"""CLI: ``recstore query``, ``recstore queries``, ``recstore schema``, ``recstore export``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from recstore.cli import cli
from recstore.cli.existing_store import READ_WAIT, existing_store, lock_timeout_option
from recstore.cli.spark_session import conf_option, master_option, session
from recstore.cli.terminal import (
    CliProgress,
    columns_option,
    name_values,
    quiet_option,
    say,
    table_width,
    vertical_option,
    width_option,
    wrote,
)
from recstore.errors import InputError
from recstore.query import DIALECTS
from recstore.query.limits import QUERY_MAX_ROWS, QUERY_TIMEOUT, QueryLimitError, QueryLimits
from recstore.query.output import FORMATS
from recstore.query.saved import resolve_saved

if TYPE_CHECKING:
    from recstore.query import CompiledQuery, ResultStream
    from recstore.query.views import Catalog
    from recstore.store import Store

# Only what --help shows is imported here (no duckdb, sqlglot or pyarrow): each command imports
# the query steps it takes when it runs, and a plain SQL query never loads the DSL, the other
# engines' dialects or, for text output of plain columns, pyarrow (docs/DESIGN.md, query).

# After a timeout or Ctrl-C, seconds a statement may ignore the interrupt before the process
# exits (one huge scalar call such as repeat() checks only when it returns).
_EXIT_AFTER = 3.0


_resolve_saved = resolve_saved


def _compile(text: str, params: dict[str, str], catalog: Catalog | None) -> CompiledQuery:
    from recstore.query.api import compile_query

    text, bound, language = _resolve_saved(text, params)
    return compile_query(text, catalog, bound, language=language)


def _check_complete(result: ResultStream, max_rows: int | None, output: str | None) -> None:
    if result.truncated:
        where = output or "the output"
        raise QueryLimitError(f"stopped at --max-rows {max_rows}: {where} holds the first "
                              f"{max_rows} rows; raise --max-rows (0 for no limit)")


@cli.command("query")
@click.argument("text")
@click.option("--param", "-p", "params", multiple=True, metavar="NAME=VALUE",
              help="Value for $NAME in a saved or ad-hoc query (repeatable).")
@click.option("--explain", is_flag=True, help="Print the SQL the query compiles to; do not run.")
@click.option("--dialect", type=click.Choice(DIALECTS),
              help="Print the compiled SQL for this engine; do not run.")
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb",
              show_default=True, help="Run on the store (duckdb) or on Spark over --parquet.")
@click.option("--parquet", type=click.Path(file_okay=False, exists=True),
              help="Exported Parquet directory for --engine spark (see `recstore export`).")
@master_option
@conf_option
@click.option("--format", "fmt", type=click.Choice(FORMATS),
              help="Output format. Default: table, or with --output the one FILE's extension "
              "names (.csv, .json, .ndjson/.jsonl, .parquet, .txt for a table); another "
              "name needs --format.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write to FILE (its extension picks the format).")
@click.option("--timeout", type=click.FloatRange(min=0), default=QUERY_TIMEOUT, show_default=True,
              metavar="SECONDS", help="Stop a query that runs longer, with an error (0: no "
              "limit; the store engine only). Ctrl-C stops a query too.")
@click.option("--max-rows", type=click.IntRange(min=0), default=QUERY_MAX_ROWS, show_default=True,
              metavar="N", help="Stop after this many rows, with an error (0: no limit).")
@columns_option
@vertical_option
@width_option
@quiet_option
@lock_timeout_option(READ_WAIT)
@click.pass_context
def query_cmd(ctx: click.Context, text: str, params: tuple[str, ...], explain: bool,
              dialect: str | None, engine: str, parquet: str | None, master: str | None,
              conf: tuple[str, ...], fmt: str | None, as_json: bool, output: str | None,
              timeout: float, max_rows: int, columns: list[str] | None, vertical: bool,
              width: int | None, quiet: bool, lock_timeout: float) -> None:
    """Run read-only SQL or a filter-DSL query (or @saved-name) over the store's views.

    \b
    Examples:
      recstore query "status = 'failed' and started > -7d order by started desc limit 20"
      recstore query "tool_calls.any(name = 'refund' and args.amount > 100)" --format ndjson
      recstore query "SELECT agent, count(*) FROM runs GROUP BY ALL" -o agents.csv
      recstore query @failed-runs-by-error --param since=-30d
      recstore query "visits.count() >= 3" --dialect spark
      recstore query @slowest-runs --engine spark --parquet export/
    """
    fmt = "json" if as_json else fmt
    if output is not None:
        from recstore.query.output import output_format

        fmt = output_format(output, fmt)
    fmt = fmt or "table"
    values = dict(name_values(params, "--param"))
    if explain or dialect:
        compiled = _compile(text, values, None)
        say(compiled.to(dialect or "duckdb", pretty=True))
        return
    limits = QueryLimits(timeout or None, max_rows or None, interruptible=True,
                         exit_after=_EXIT_AFTER)
    if engine == "spark":
        if not parquet:
            raise InputError("spark needs --parquet DIR (written by `recstore export DIR`)",
                             source="--engine")
        from recstore.query.limits import cap_rows
        from recstore.query.spark import run_on_spark, spark_failures
        from recstore.query.views import default_catalog

        with spark_failures():
            result = cap_rows(run_on_spark(_compile(text, values, default_catalog()), parquet,
                                           spark=session(master, conf)), limits.max_rows)
            _write(result, columns, fmt, output, vertical, width, limits.max_rows)
        if output is not None:
            wrote(output, quiet=quiet)
        return
    from recstore.query.api import run_query
    from recstore.query.checked_cache import CheckedCache

    text, bound, language = _resolve_saved(text, values)
    with run_query(existing_store(ctx, lock_timeout), text, bound, language=language,
                   limits=limits, arrow=fmt == "parquet",
                   cache=CheckedCache.default(), plain=True) as result:
        _write(result, columns, fmt, output, vertical, width, limits.max_rows)
    if output is not None:
        wrote(output, quiet=quiet)


def _write(result: ResultStream, columns: list[str] | None, fmt: str, output: str | None,
           vertical: bool, width: int | None, max_rows: int | None) -> None:
    """Write the result (only ``columns``, when given) in ``fmt``, a table fitted to the width
    `table_width` picks; a result cut at --max-rows is an error after its rows are written."""
    from recstore.query.output import write_result

    write_result(result.select(columns) if columns else result, fmt, output,
                 vertical=vertical or None,
                 width=table_width(width, sys.stdout if output is None else None))
    _check_complete(result, max_rows, output)


@cli.command("queries")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
def queries_cmd(as_json: bool) -> None:
    """List the saved queries (run one with `recstore query @NAME`)."""
    from recstore.jsonout import dumps
    from recstore.query.saved import list_saved

    saved = list_saved()
    if as_json:
        click.echo(dumps([
            {"name": q.name, "language": q.language, "description": q.description,
             "params": [p.__dict__ for p in q.params], "path": str(q.path)} for q in saved
        ]))
        return
    width = max((len(q.name) for q in saved), default=0) + 1
    for q in saved:
        say(f"@{q.name:<{width}} {q.language}  {q.description}")
        for p in q.params:
            default = f" = {p.default}" if p.default is not None else ""
            say(f"  {'':<{width}}   --param {p.name}=<{p.type}>{default}  {p.description}")


@cli.command("schema")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@lock_timeout_option(READ_WAIT)
@click.pass_context
def schema_cmd(ctx: click.Context, as_json: bool, lock_timeout: float) -> None:
    """Print the queryable views with column types and descriptions."""
    from recstore.jsonout import dumps
    from recstore.query.views import (
        catalog_from_connection,
        default_catalog,
        schema_json,
        schema_text,
    )

    if Path(ctx.obj["db"]).exists():
        with existing_store(ctx, lock_timeout).reader() as con:
            catalog = catalog_from_connection(con)
    else:
        catalog = default_catalog()
    if as_json:
        click.echo(dumps(schema_json(catalog)))
    else:
        say(schema_text(catalog), nl=False)


@cli.command("export")
@click.argument("target", required=False, metavar="DIRECTORY | FILTER")
@click.option("--overwrite", is_flag=True,
              help="Replace an earlier recstore export in DIRECTORY (only its view folders).")
@click.option("--otlp", "otlp_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Write each run (or each run FILTER selects) as an OTLP/JSON trace file.")
@click.option("--content", type=click.Choice(["none", "metadata", "full"]), default="metadata",
              show_default=True,
              help="With --otlp: metadata adds argument hashes and record metadata; full adds "
              "tool arguments, results and messages.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@quiet_option
@lock_timeout_option(READ_WAIT)
@click.pass_context
def export_cmd(ctx: click.Context, target: str | None, overwrite: bool, otlp_dir: str | None,
               content: str, as_json: bool, quiet: bool, lock_timeout: float) -> None:
    """Write every view as zstd Parquet under DIRECTORY, or runs as OTLP/JSON traces (--otlp).

    Parquet is hive-partitioned by run start day; --otlp DIR writes OpenTelemetry GenAI traces,
    one file per run.

    DIRECTORY must be new or empty, or hold an earlier export (recstore-export.json) to replace
    with --overwrite; recstore never deletes a folder it did not write. Files are owner-only.

    \b
    Example:
      recstore export export/ && recstore query @slowest-runs --engine spark --parquet export/
      recstore export --otlp traces/ "status = 'failed'" --content full
    """
    if otlp_dir is not None:
        _export_otlp(existing_store(ctx, lock_timeout), otlp_dir, target, content, as_json,
                     quiet)
        return
    if target is None:
        raise InputError("give the DIRECTORY to write Parquet to (or --otlp DIR)",
                         source="recstore export")
    from recstore.jsonout import dumps
    from recstore.query.export import export_views

    with CliProgress("export views", quiet=quiet) as progress:
        summary = export_views(existing_store(ctx, lock_timeout), target, progress,
                               overwrite=overwrite)
    if as_json:
        click.echo(dumps({"directory": str(summary.directory), "rows": summary.rows,
                          "partitioned": summary.partitioned}))
    else:
        for name, rows in summary.rows.items():
            layout = "by day" if name in summary.partitioned else "single file"
            say(f"{name:<22} {rows:>10} rows  {layout}")
        say(f"exported {len(summary.rows)} views to {summary.directory}")
    wrote(summary.directory, quiet=quiet)


def _export_otlp(store: Store, directory: str, dsl_filter: str | None, content: str,
                 as_json: bool, quiet: bool) -> None:
    from recstore.jsonout import dumps
    from recstore.query import select_run_keys
    from recstore.store.otlp_io import export_otlp

    keys = select_run_keys(store, dsl_filter, what="the filter") if dsl_filter else None
    result = export_otlp(store, directory, keys, content=content)
    if as_json:
        click.echo(dumps({"directory": str(result.directory), "content": result.content,
                          "files": {k: str(p) for k, p in result.files.items()}}))
    else:
        say(f"exported {len(result.files)} runs as OTLP/JSON traces to {result.directory} "
            f"(content: {result.content})")
    wrote(result.directory, quiet=quiet)

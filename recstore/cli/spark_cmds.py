"""CLI: ``recstore spark build`` (the store's views from raw NDJSON, computed on Spark)."""

from __future__ import annotations

import glob
import os
from dataclasses import asdict

import click

from recstore.cli import cli
from recstore.cli.spark_session import conf_option, master_option, session
from recstore.cli.terminal import CliProgress, quiet_option, say, wrote
from recstore.errors import InputError
from recstore.jsonout import dumps


def _check_local_inputs(inputs: tuple[str, ...]) -> None:
    """A local path or glob that matches nothing fails here, before a JVM starts (Hadoop's
    ``{a,b}`` globs and URIs are left to Spark)."""
    for path in inputs:
        if "://" in path or path.startswith("file:") or "{" in path:
            continue
        if not glob.glob(os.path.expanduser(path)):
            raise InputError("no such file or directory (or nothing matches)", source=path)


@cli.group("spark")
def spark_group() -> None:
    """Run recstore's work on Spark (see docs/scale.md)."""


@spark_group.command("build")
@click.argument("inputs", nargs=-1, required=True, metavar="NDJSON...")
@click.argument("directory", metavar="OUT_DIR")
@master_option
@conf_option
@click.option("--overwrite", is_flag=True,
              help="Replace an earlier export or build in a local OUT_DIR (as export does).")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@quiet_option
@click.pass_context
def build_cmd(ctx: click.Context, inputs: tuple[str, ...], directory: str, master: str | None,
              conf: tuple[str, ...], overwrite: bool, as_json: bool, quiet: bool) -> None:
    """Build every view from raw aioc NDJSON on Spark, in `recstore export`'s Parquet layout.

    NDJSON is any path, glob, directory or URI Spark reads (file:, hdfs://, s3a://, ...;
    .gz is read as gzip). The result is what ingesting the files, in path order, into an empty
    store and exporting it writes; query it with `recstore query --engine spark --parquet`.
    A local OUT_DIR must be new, empty or an earlier export (--overwrite), as for export.
    Exit status 1 when a line was rejected (the rejects view holds it), as for ingest.

    \b
    Examples:
      recstore spark build 'runs/*.ndjson.gz' export/
      recstore spark build --master spark://head:7077 s3a://bucket/runs/2026-03-*/ s3a://bucket/views/
    """
    from recstore.query.spark import spark_failures
    from recstore.spark.build import build_views, output_location

    _check_local_inputs(inputs)
    with spark_failures(), CliProgress("spark build", quiet=quiet) as progress:
        summary = build_views(session(master, conf), list(inputs), output_location(directory),
                              progress, overwrite=overwrite)
    if as_json:
        click.echo(dumps(asdict(summary)))
    else:
        say(summary.line())
    wrote(summary.directory, quiet=quiet)
    ctx.exit(summary.exit_code)  # 1 when a line was rejected, as ingest

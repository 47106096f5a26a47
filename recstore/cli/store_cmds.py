"""CLI: ``recstore ingest``, ``rejects``, ``show``, ``runs``, ``verify``, ``rebuild``.

Each command is a thin skin over :class:`recstore.store.Store`."""

from __future__ import annotations

import click

from recstore.cli import cli
from recstore.cli.existing_store import READ_WAIT, WRITE_WAIT, lock_timeout_option
from recstore.errors import InputError
from recstore.records import analyze
from recstore.records.render import dumps_json, render_analysis
from recstore.store import Store
from recstore.store.ingest import DEFAULT_BATCH_SIZE

_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
# At most this many reject reasons are echoed; `recstore rejects` lists them all.
_SHOWN_REJECTS = 20


def _store(ctx: click.Context, lock_timeout: float) -> Store:
    return Store(ctx.obj["db"], lock_timeout=lock_timeout)


def _parse_tags(pairs: tuple[str, ...]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"expected KEY=VALUE, got {pair!r}", source="--tag")
        tags[key.strip()] = value
    return tags


@cli.command("ingest")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Tag the batch (repeatable)."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "aioc", "agentuse", "otlp"]),
    default="auto",
    show_default=True,
    help="Input format; auto treats directories holding agentuse sessions as agentuse trees "
    "and files starting with resourceSpans as OTLP/JSON traces.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=DEFAULT_BATCH_SIZE,
    show_default=True,
    help="Records per transaction (a killed ingest keeps whole batches only).",
)
@_JSON
@lock_timeout_option(WRITE_WAIT)
@click.pass_context
def ingest(
    ctx: click.Context,
    paths: tuple[str, ...],
    tags: tuple[str, ...],
    fmt: str,
    batch_size: int,
    as_json: bool,
    lock_timeout: float,
) -> None:
    """Append run records to the store: .json, .jsonl/.ndjson (optionally .gz), directories
    (recursive), globs, or - for NDJSON on stdin. Identical records append nothing; a changed
    record with a known runId becomes a new revision. agentuse session trees (a data root, project
    directory or session directory) are scanned; a re-scan appends only new or changed files.
    OTLP/JSON trace files become one run per trace with GenAI spans (run key otlp:<traceId>).
    Exit status 1 if anything was rejected.

    Example: recstore ingest runs/ 'more/*.ndjson.gz' --tag env=prod
    Example: recstore ingest ~/.local/share/agentuse --format agentuse
    Example: recstore ingest traces.jsonl --format otlp
    """
    summary = _store(ctx, lock_timeout).ingest(
        list(paths),
        tags=_parse_tags(tags),
        format=None if fmt == "auto" else fmt,
        batch_size=batch_size,
    )
    if as_json:
        payload = summary.to_dict()
        payload.pop("run_keys")
        click.echo(dumps_json(payload))
    else:
        for reject in summary.rejects[:_SHOWN_REJECTS]:
            where = f" at {reject['path']}" if reject["path"] else ""
            click.echo(f"rejected {reject['where']}{where}: {reject['reason']}", err=True)
        if summary.rejected > _SHOWN_REJECTS:
            click.echo(f"... {summary.rejected - _SHOWN_REJECTS} more (recstore rejects)", err=True)
        click.echo(summary.line())
    ctx.exit(summary.exit_code)


@cli.command("rejects")
@_JSON
@lock_timeout_option(READ_WAIT)
@click.pass_context
def rejects(ctx: click.Context, as_json: bool, lock_timeout: float) -> None:
    """List input the store could not accept: source, line, reason.

    Example: recstore rejects --json
    """
    rows = _store(ctx, lock_timeout).rejects()
    if as_json:
        for row in rows:
            row["rejected_at"] = row["rejected_at"].isoformat()
        click.echo(dumps_json(rows))
        return
    for row in rows:
        where = f"{row['source_uri']}:{row['line']}" if row["line"] else row["source_uri"]
        path = f" at {row['path']}" if row["path"] else ""
        click.echo(f"{where}{path}: {row['reason']}")
    if not rows:
        click.echo("no rejects")


@cli.command("show")
@click.argument("run")
@click.option("--revision", type=click.IntRange(min=1), help="An older revision of the run.")
@_JSON
@lock_timeout_option(READ_WAIT)
@click.pass_context
def show(ctx: click.Context, run: str, revision: int | None, as_json: bool,
         lock_timeout: float) -> None:
    """Show one stored run (run key, runId, or a unique prefix): the same summary as
    `inspect`, or with --json the stored record exactly as ingested (original key order).

    Example: recstore show 81e3aee0 --json
    """
    record = _store(ctx, lock_timeout).get_record(run, revision=revision)
    click.echo(dumps_json(record) if as_json else render_analysis(analyze(record)))


@cli.command("runs")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@_JSON
@lock_timeout_option(READ_WAIT)
@click.pass_context
def runs(ctx: click.Context, limit: int, as_json: bool, lock_timeout: float) -> None:
    """List the most recently stored runs.

    Example: recstore runs --limit 5
    """
    rows = _store(ctx, lock_timeout).runs(limit)
    if as_json:
        click.echo(dumps_json(rows))
        return
    for r in rows:
        click.echo(
            f"{r['run_key']}  rev {r['revision']}  {r['status']}  {r['agent']}  "
            f"{r['started_text']}  items {r['item_count']}  requests {r['request_count']}  "
            f"tool calls {r['tool_call_count']}"
        )


@cli.command("verify")
@_JSON
@lock_timeout_option(READ_WAIT)
@click.pass_context
def verify(ctx: click.Context, as_json: bool, lock_timeout: float) -> None:
    """Check every event hash chain, that no batch is partial, and that rebuilding the
    projections from the log reproduces them. Exit status 1 on any problem.

    Example: recstore verify
    """
    report = _store(ctx, lock_timeout).verify()
    if as_json:
        click.echo(dumps_json(report.to_dict()))
    else:
        for problem in report.problems:
            click.echo(f"problem: {problem}", err=True)
        state = "ok" if report.ok else f"FAILED ({len(report.problems)} problems)"
        click.echo(
            f"verify {state}: {report.streams} streams, {report.events} events, "
            f"{report.runs} runs rebuilt"
        )
    ctx.exit(0 if report.ok else 1)


@cli.command("rebuild")
@lock_timeout_option(WRITE_WAIT)
@click.pass_context
def rebuild(ctx: click.Context, lock_timeout: float) -> None:
    """Recompute every projection table from the event log alone.

    Example: recstore rebuild
    """
    count = _store(ctx, lock_timeout).rebuild()
    click.echo(f"rebuilt projections of {count} runs")

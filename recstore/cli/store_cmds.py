"""CLI: ``recstore ingest``, ``rejects``, ``tag``, ``show``, ``runs``, ``verify``, ``rebuild``.

Each command is a thin skin over :class:`recstore.store.Store`."""

from __future__ import annotations

import io
import json
import shutil
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from recstore import records  # its names load when `show` analyses a record
from recstore.cli import cli
from recstore.cli.existing_store import READ_WAIT, WRITE_WAIT, lock_timeout_option
from recstore.cli.terminal import (
    CliProgress,
    columns_option,
    quiet_option,
    say,
    table_width,
    vertical_option,
    width_option,
)
from recstore.cli.terms import in_cli_terms
from recstore.errors import InputError
from recstore.formats import DEFAULT_MAX_RECORD_BYTES
from recstore.records.render import render_analysis
from recstore.store.chain import DEFAULT_BATCH_SIZE

if TYPE_CHECKING:
    from recstore.store import Store

_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
# At most this many reject reasons are echoed; `recstore rejects` lists them all.
_SHOWN_REJECTS = 20


def dumps(value: Any, indent: int | None = 2) -> str:
    """:func:`recstore.jsonout.dumps`, imported when a command prints JSON (issue 27.1: `runs`
    and `rejects` print text without jsonout's imports)."""
    from recstore.jsonout import dumps as json_dumps

    return json_dumps(value, indent=indent)


def _store(ctx: click.Context, lock_timeout: float) -> Store:
    if ctx.obj.get("served_store") is not None:  # run by `recstore serve` for another shell
        return ctx.obj["served_store"]
    from recstore.store import Store  # when a command runs: `--help` opens no store

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
    "--tag", "tags", multiple=True, metavar="KEY=VALUE",
    help="Tag every run read, stored or already there (repeatable).",
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
@click.option(
    "--max-record-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_RECORD_BYTES,
    show_default=True,
    help="A record (line) larger than this is rejected unread; the reject keeps its first 64 KiB, "
    "its size and sha256.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    default=None,
    help="Processes that parse, hash and project records (0: this one; default: as many as "
    "pay off for the input's size).",
)
@click.option("--watch", is_flag=True,
              help="Keep watching PATHS (folders) and ingest new and grown files until Ctrl-C.")
@_JSON
@lock_timeout_option(WRITE_WAIT)
@quiet_option
@click.pass_context
def ingest(
    ctx: click.Context,
    paths: tuple[str, ...],
    watch: bool,
    tags: tuple[str, ...],
    fmt: str,
    batch_size: int,
    max_record_bytes: int,
    workers: int | None,
    as_json: bool,
    lock_timeout: float,
    quiet: bool,
) -> None:
    """Append run records to the store: .json, .jsonl/.ndjson (optionally .gz), directories
    (recursive), globs, or - for NDJSON on stdin. Identical records append nothing; a changed
    record with a known runId becomes a new revision. agentuse session trees (a data root, project
    directory or session directory) are scanned; a re-scan appends only new or changed files.
    OTLP/JSON trace files become one run per trace with GenAI spans (run key otlp:<traceId>).
    --tag adds tags to every run read, new or identical to one stored (as a tags event). Exit
    status 1 if anything was rejected.

    \b
    Examples:
      recstore ingest runs/ 'more/*.ndjson.gz' --tag env=prod
      recstore ingest ~/.local/share/agentuse --format agentuse
      recstore ingest traces.jsonl --format otlp
    """
    if watch:
        _watch(_store(ctx, lock_timeout), list(paths))
    with CliProgress("ingest records", quiet=quiet) as progress:
        summary = _store(ctx, lock_timeout).ingest(
            list(paths),
            tags=_parse_tags(tags),
            format=None if fmt == "auto" else fmt,
            batch_size=batch_size,
            max_record_bytes=max_record_bytes,
            workers=workers,
            progress=progress,
        )
    if as_json:
        payload = summary.to_dict()
        payload.pop("run_keys")
        click.echo(dumps(payload))
    else:
        for reject in summary.rejects[:_SHOWN_REJECTS]:
            where = f" at {reject['path']}" if reject["path"] else ""
            say(f"rejected {reject['where']}{where}: {in_cli_terms(reject['reason'], ctx)}",
                err=True)
        if summary.rejected > _SHOWN_REJECTS:
            say(f"... {summary.rejected - _SHOWN_REJECTS} more (recstore rejects)", err=True)
        say(summary.line())
    ctx.exit(summary.exit_code)


def _watch(store: Store, folders: list[str]) -> None:
    """Ingest what arrives under ``folders`` until Ctrl-C (the watch `recstore serve --watch`
    runs, in this process)."""
    import time

    from recstore.serve.ingest import FolderWatch

    watcher = FolderWatch(store, folders, on_summary=lambda path, line: say(f"{path}: {line}"))
    say(f"watching {', '.join(folders)} (Ctrl-C stops)", err=True)
    while True:
        watcher.poll()
        time.sleep(watcher.interval)


@cli.command("rejects")
@click.option("--limit", type=click.IntRange(min=0), default=100, show_default=True,
              help="Show at most this many rejects (0: all).")
@click.option("--since", metavar="TIME", help="Only rejects from TIME on (ISO, or -7d, -2h).")
@click.option("--summary", is_flag=True, help="Count rejects by reason instead of listing them.")
@_JSON
@lock_timeout_option(READ_WAIT)
@click.pass_context
def rejects(
    ctx: click.Context, limit: int, since: str | None, summary: bool, as_json: bool,
    lock_timeout: float,
) -> None:
    """List input the store could not accept: source, line, reason.

    \b
    Examples:
      recstore rejects --since -1d --limit 20
      recstore rejects --summary --json
    """
    store = _store(ctx, lock_timeout)
    since_time = _since(since)
    if summary:
        rows = store.reject_summary(since_time)
        if as_json:
            click.echo(dumps(rows))
            return
        for row in rows:
            say(f"{row['rejects']:>8,}  {in_cli_terms(row['reason'], ctx)}  "
                f"({row['sources']} sources)")
        if not rows:
            say("no rejects")
        return
    rows = store.rejects(limit=limit or None, since=since_time)
    if as_json:
        click.echo(dumps(rows))
        return
    for row in rows:
        where = f"{row['source_uri']}:{row['line']}" if row["line"] else row["source_uri"]
        path = f" at {row['path']}" if row["path"] else ""
        say(f"{where}{path}: {in_cli_terms(row['reason'], ctx)}")
    if not rows:
        say("no rejects")
    elif limit and len(rows) == limit:
        say(f"(first {limit}; --limit 0 shows all, --summary counts them by reason)", err=True)


def _since(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        from recstore.query.sqltext import parse_timestamp

        return parse_timestamp(text)
    except ValueError as exc:
        raise InputError(str(exc), source="--since") from None


@cli.command("tag")
@click.argument("selection")
@click.argument("tags", nargs=-1, metavar="KEY=VALUE...")
@click.option("--remove", "remove", multiple=True, metavar="KEY", help="Remove a tag (repeatable).")
@_JSON
@lock_timeout_option(WRITE_WAIT)
@click.pass_context
def tag(
    ctx: click.Context, selection: str, tags: tuple[str, ...], remove: tuple[str, ...],
    as_json: bool, lock_timeout: float,
) -> None:
    """Set or remove tags on the runs SELECTION picks (a DSL filter or SQL, as compare takes).

    Tags are events in each run's stream: `verify` checks them and `rebuild` folds them. Runs
    whose tags would not change get none. Setting a key replaces the value a run has: stderr
    says what changed (`tagged 500 of 500 selected runs: set baseline -> v1`), --json too.

    \b
    Examples:
      recstore tag "metadata.suite = 'nightly'" set=v1 owner=ci
      recstore tag "status = 'failed'" --remove set
    """
    from recstore.query import select_run_keys

    if not tags and not remove:
        raise InputError("give KEY=VALUE tags to set or --remove KEY", source="tag")
    store = _store(ctx, lock_timeout)
    keys = select_run_keys(store, selection, what="the selection")
    if not keys:
        raise InputError("selects no runs", source=selection)
    summary = store.tag(keys, _parse_tags(tags), remove=remove)
    changes = summary.to_list()
    if as_json:
        click.echo(dumps({"selected": len(keys), "tagged": summary.tagged, "changes": changes}))
    else:  # what it overwrote, so `set=v1` never replaces another set's tag unnoticed
        said = f": {_tag_changes(changes)}" if changes else " (their tags were already so)"
        say(f"tagged {summary.tagged} of {len(keys)} selected runs{said}", err=True)


def _tag_changes(changes: list[dict]) -> str:
    """``set baseline -> v1; owner (new) -> ci``; with the runs per change when a key changed
    in more than one way (``set baseline -> v1 (500), (new) -> v1 (7)``)."""
    by_key: dict[str, list[dict]] = {}
    for change in changes:
        by_key.setdefault(change["key"], []).append(change)

    def one(change: dict, counted: bool) -> str:
        old = "(new)" if change["from"] is None else change["from"]
        new = "(removed)" if change["to"] is None else change["to"]
        return f"{old} -> {new}" + (f" ({change['runs']})" if counted else "")

    return "; ".join(
        f"{key} " + ", ".join(one(c, len(rows) > 1) for c in rows) for key, rows in by_key.items()
    )


@cli.command("show")
@click.argument("run")
@click.option("--revision", type=click.IntRange(min=1), help="An older revision of the run.")
@click.option("--no-pager", is_flag=True, help="Print straight to the terminal, never page.")
@width_option
@_JSON
@lock_timeout_option(READ_WAIT)
@click.pass_context
def show(ctx: click.Context, run: str, revision: int | None, no_pager: bool, width: int | None,
         as_json: bool, lock_timeout: float) -> None:
    """Show one stored run (run key, runId, or a unique prefix): question, response, error,
    duration and tags, then the `inspect` summary; with --json the stored record exactly as
    ingested (original key order).

    A long run opens in $PAGER on a terminal (--no-pager prints it straight).

    \b
    Example:
      recstore show 81e3aee0 --json
    """
    store = _store(ctx, lock_timeout)
    if as_json:
        click.echo(dumps(store.get_record(run, revision=revision)))
        return
    record, row = store.record_and_row(run, revision=revision)
    width = table_width(width, sys.stdout)
    text = _show_lead(record, row, width) + "\n" + render_analysis(records.analyze(record), width)
    terminal = shutil.get_terminal_size()
    if not no_pager and sys.stdout.isatty() and text.count("\n") >= terminal.lines - 1:
        click.echo_via_pager(text)
    else:
        say(text)


def _show_lead(record: dict, row: dict, width: int | None) -> str:
    """What a person looks for first: question, response, error, duration and tags."""
    from recstore.query.table import write_fields

    error = ": ".join(str(p) for p in (record.get("errorName"), record.get("errorMessage"))
                      if p is not None)
    duration = row.get("duration_ms")
    tags = json.loads(row["tags"]) if isinstance(row.get("tags"), str) else row.get("tags") or {}
    fields = [
        ("run", f"{row.get('run_key') or record.get('runId')}  {record.get('status')}"
                f"  agent {record.get('agentName')}"),
        ("question", _field_text(record.get("question"))),
        ("response", _field_text(record.get("response"))),
        ("error", error or "—"),
        ("duration", f"{duration / 1000:.2f} s" if duration is not None else "—"),
        ("tags", ", ".join(f"{k}={v}" for k, v in tags.items()) or "—"),
        ("started", str(record.get("startedAt") or "—")),
    ]
    out = io.StringIO()
    write_fields(fields, out, width=width)
    return out.getvalue()


def _field_text(value: object) -> str:
    if value is None:
        return "—"
    if value == "":
        return "(empty)"
    return value if isinstance(value, str) else dumps(value, indent=None)


_RUN_COLUMNS = {"run_key": "run_key", "status": "status", "agent": "agent", "model": "model",
                "started": "started_text", "tool_calls": "tool_call_count", "rev": "revision",
                "items": "item_count", "requests": "request_count"}
_RUN_DEFAULT = ["run_key", "status", "agent", "model", "started", "tool_calls"]


@cli.command("runs")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@columns_option
@vertical_option
@width_option
@_JSON
@lock_timeout_option(READ_WAIT)
@click.pass_context
def runs(ctx: click.Context, limit: int, columns: list[str] | None, vertical: bool,
         width: int | None, as_json: bool, lock_timeout: float) -> None:
    """List the most recently stored runs.

    One line per run: run keys stay whole, long text is cut with '…', and columns that do
    not fit the terminal (or --width, or $COLUMNS when piped) are named in a footer. Columns:
    run_key, status, agent,
    model, started, tool_calls (the default), rev, items, requests.

    \b
    Example:
      recstore runs --limit 5 --columns run_key,status,agent
    """
    rows = _store(ctx, lock_timeout).runs(limit)
    if as_json:
        click.echo(dumps(rows))
        return
    from recstore.query.table import write_table

    names = columns or _RUN_DEFAULT
    unknown = [n for n in names if n not in _RUN_COLUMNS]
    if unknown:
        raise InputError(f"no column {unknown[0]!r}; runs has {', '.join(_RUN_COLUMNS)}",
                         source="--columns")
    out = click.get_text_stream("stdout")
    write_table(names, (["" if r[_RUN_COLUMNS[n]] is None else str(r[_RUN_COLUMNS[n]])
                         for n in names] for r in rows), out,
                width=table_width(width, out),
                numeric=[n in ("rev", "items", "requests", "tool_calls") for n in names],
                vertical=vertical or None)


@cli.command("verify")
@_JSON
@quiet_option
@lock_timeout_option(READ_WAIT)
@click.pass_context
def verify(ctx: click.Context, as_json: bool, quiet: bool, lock_timeout: float) -> None:
    """Check the log's batch hash chain and every reference in it, and that rebuilding the
    projections from the log reproduces them. Exit status 1 on any problem.

    \b
    Example:
      recstore verify
    """
    with CliProgress("verify runs", quiet=quiet) as progress:
        report = _store(ctx, lock_timeout).verify(progress)
    if as_json:
        click.echo(dumps(report.to_dict()))
    elif report.corrupt:  # one line: nothing else could be checked
        say(f"recstore: error: {report.problems[0]}", err=True)
    else:
        for problem in report.problems:
            say(f"problem: {problem}", err=True)
        state = "ok" if report.ok else f"FAILED ({len(report.problems)} problems)"
        say(
            f"verify {state}: {report.streams} streams, {report.events} events, "
            f"{report.runs} runs rebuilt"
        )
    ctx.exit(0 if report.ok else 1)


@cli.command("rebuild")
@lock_timeout_option(WRITE_WAIT)
@_JSON
@quiet_option
@click.pass_context
def rebuild(ctx: click.Context, lock_timeout: float, as_json: bool, quiet: bool) -> None:
    """Recompute every projection table from the event log alone.

    \b
    Example:
      recstore rebuild --json
    """
    with CliProgress("rebuild runs", quiet=quiet) as progress:
        count = _store(ctx, lock_timeout).rebuild(progress)
    click.echo(dumps({"runs": count}) if as_json else f"rebuilt projections of {count} runs")

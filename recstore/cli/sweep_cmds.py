"""CLI: ``recstore sweep run|schedule|cron|status|report`` (thin; the work is in recstore.sweep)."""

from __future__ import annotations

from pathlib import Path

import click

from recstore.cli import cli
from recstore.cli.existing_store import (
    READ_WAIT,
    SWEEP_WAIT,
    existing_store,
    lock_timeout_option,
)
from recstore.cli.terminal import CliProgress, quiet_option, say, wrote
from recstore.errors import InputError
from recstore.jsonout import dumps


def _waiting_store(ctx: click.Context, lock_timeout: float):
    """The store for a sweep run: each wait for another process is announced on stderr."""
    return existing_store(ctx, lock_timeout, on_lock_wait=lambda line: say(line, err=True))


@cli.group()
def sweep() -> None:
    """Scheduled replay sweeps: select runs, replay them against a candidate, compare, gate.

    \b
    Examples:
      recstore sweep run docs/examples/sweep-nightly.toml
      recstore sweep status support-nightly
      recstore sweep report support-nightly --output reports/
      recstore sweep schedule nightly.toml weekly.toml
      recstore sweep cron nightly.toml >> my.crontab
    """


@sweep.command("run")
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("--rerun", is_flag=True, help="Start a fresh run even if an unfinished one exists.")
@click.option("--workers", type=click.IntRange(1, 64), help="Override the spec's worker count.")
@click.option("--max-connections", type=click.IntRange(1, 4096),
              help="Override the spec's candidate.max_connections (model requests in flight, or "
                   "replayer commands at once; default 16).")
@click.option("--allow-empty", is_flag=True,
              help="Run even when the selection matches no runs (else exit 3, no run opened).")
@click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON.")
@quiet_option
@lock_timeout_option(SWEEP_WAIT)
@click.pass_context
def sweep_run(ctx: click.Context, spec_path: str, rerun: bool, workers: int | None,
              max_connections: int | None, allow_empty: bool, as_json: bool, quiet: bool,
              lock_timeout: float) -> None:
    """Run the sweep in SPEC, or continue its unfinished run; exit 1 when any case fails, 3 when
    the selection matches no runs.

    While another process (an ingest) has the store open, the run waits for it, saying so on
    stderr, rather than stop halfway.

    \b
    Example:
      recstore sweep run docs/examples/sweep-nightly.toml --workers 2
    """
    from recstore.sweep.runner import run_sweep
    from recstore.sweep.spec import load_spec

    spec = load_spec(spec_path)
    from recstore.replay.endpoints import STATS

    if workers is not None:
        spec = spec.model_copy(update={"workers": workers})
    if max_connections is not None:
        spec = spec.model_copy(update={"candidate": spec.candidate.model_copy(
            update={"max_connections": max_connections})})
    with CliProgress(f"sweep {spec.name}", quiet=quiet, detail=STATS.line) as progress:
        result = run_sweep(_waiting_store(ctx, lock_timeout), spec, rerun=rerun,
                           progress=progress, spec_path=Path(spec_path).resolve(),
                           allow_empty=allow_empty)
    if as_json:
        click.echo(dumps(result.to_json()))
    else:
        from recstore.sweep.report import compared_text

        say(result.summary_line())
        say(compared_text(result.compared))
        if result.usage.get("requests"):
            from recstore.sweep.report import usage_text

            say(usage_text(result.usage))
        say(f"report: recstore sweep report {result.label} --output DIR")
    ctx.exit(1 if result.failed else 0)


@sweep.command("schedule")
@click.argument("spec_paths", metavar="SPEC...", nargs=-1, required=True,
                type=click.Path(dir_okay=False))
@click.option("--max-runs", type=click.IntRange(1), help="Stop after this many sweep runs.")
@click.option("--json", "as_json", is_flag=True, help="Print each event as one JSON line.")
@lock_timeout_option(SWEEP_WAIT)
@click.pass_context
def sweep_schedule(ctx: click.Context, spec_paths: tuple[str, ...], max_runs: int | None,
                   as_json: bool, lock_timeout: float) -> None:
    """Fire each SPEC at its cron times, in the foreground (for systemd or a container).

    Slots missed while the scheduler was down, or while a sweep was still running, are reported
    and skipped. One scheduler per store. Stop it with Ctrl-C or SIGTERM.

    \b
    Example:
      recstore --db runs.duckdb sweep schedule nightly.toml
    """
    from recstore.sweep.locks import scheduler_lock
    from recstore.sweep.schedule import ScheduledSweep, store_scheduler
    from recstore.sweep.spec import load_spec

    sweeps = [ScheduledSweep(load_spec(p), Path(p).resolve()) for p in spec_paths]
    store = _waiting_store(ctx, lock_timeout)

    def echo(event) -> None:
        click.echo(dumps(event.to_json(), indent=None) if as_json else event.line(),
                   err=event.kind == "error" and not as_json)

    scheduler = store_scheduler(store, sweeps, on_event=echo)
    with scheduler_lock(store.path):
        if not as_json:
            say(f"scheduling {len(sweeps)} sweep(s) on {store.path} "
                       f"(PID lock {store.path}.sweep.lock)")
        scheduler.run(max_fires=max_runs)


@sweep.command("cron")
@click.argument("spec_path", metavar="SPEC", type=click.Path(exists=True, dir_okay=False))
@click.option("--log", "log_path", type=click.Path(dir_okay=False),
              help="Where the cron job appends its output (default: next to the store).")
@click.option("--json", "as_json", is_flag=True, help="Print the entry and its parts as JSON.")
@click.pass_context
def sweep_cron(ctx: click.Context, spec_path: str, log_path: str | None, as_json: bool) -> None:
    """Print the crontab entry that runs SPEC at its schedule (an alternative to `schedule`).

    \b
    Example:
      recstore --db /data/runs.duckdb sweep cron nightly.toml | crontab -
    """
    from recstore.sweep.schedule import ScheduledSweep, cron_lines
    from recstore.sweep.spec import load_spec

    spec = load_spec(spec_path)
    if spec.schedule is None:
        raise InputError("has no [schedule] section (cron and timezone)", source=spec_path)
    entry = cron_lines(ScheduledSweep(spec, Path(spec_path)), ctx.obj["db"], log=log_path)
    if as_json:
        click.echo(dumps({"sweep": spec.name, "cron": spec.schedule.cron,
                          "timezone": spec.schedule.timezone, "crontab": entry + "\n"}))
    else:
        say(entry)


@sweep.command("status")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
@lock_timeout_option(READ_WAIT)
@click.pass_context
def sweep_status_cmd(ctx: click.Context, name: str | None, as_json: bool,
                     lock_timeout: float) -> None:
    """List runs of sweep NAME (or the latest run of every sweep) with pass/warn/fail counts
    and the trend against the previous run.

    \b
    Example:
      recstore sweep status support-nightly --json
    """
    from recstore.sweep.report import status_text, sweep_status

    rows = sweep_status(existing_store(ctx, lock_timeout), name)
    if as_json:
        click.echo(dumps(rows))
    elif not rows:
        say("no sweep has run on this store yet")
    else:
        say(status_text(rows))


@sweep.command("report")
@click.argument("run_ref", metavar="RUN")
@click.option("--output", "-o", "out_dir", type=click.Path(file_okay=False), default=".",
              show_default=True, help="Folder for sweep-<name>-<N>.json and .html.")
@click.option("--json", "as_json", is_flag=True, help="Print the report JSON to stdout instead.")
@quiet_option
@lock_timeout_option(READ_WAIT)
@click.pass_context
def sweep_report_cmd(ctx: click.Context, run_ref: str, out_dir: str, as_json: bool, quiet: bool,
                     lock_timeout: float) -> None:
    """Write the JSON and self-contained HTML report of sweep run RUN: NAME#N (run N of sweep
    NAME), NAME (its latest run), or a store-wide sweep_run_id.

    \b
    Examples:
      recstore sweep report support-nightly --output reports/
      recstore sweep report support-nightly#3 --json
    """
    from recstore.sweep.report import sweep_report, write_report
    from recstore.sweep.runner import resolve_run_id

    store = existing_store(ctx, lock_timeout)
    run_id = resolve_run_id(store, run_ref)
    if as_json:
        click.echo(dumps(sweep_report(store, run_id)))
        return
    json_path, html_path = write_report(store, run_id, out_dir)
    wrote(json_path, quiet=quiet)
    wrote(html_path, quiet=quiet)

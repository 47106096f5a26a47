"""CLI command: ``recstore demo`` — the whole pipeline on a generated corpus."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

from recstore.cli import cli
from recstore.demo import run_demo
from recstore.jsonout import dumps


@cli.command("demo")
@click.option("--dir", "workdir", type=click.Path(file_okay=False, path_type=Path),
              help="Work directory (default: a new temporary directory, kept afterwards).")
@click.option("-n", "--cases", default=200, show_default=True, help="Cases to generate.")
@click.option("--seed", default=7, show_default=True, help="Generator seed.")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON summary on stdout (the walkthrough goes to stderr).")
def demo(workdir: Path | None, cases: int, seed: int, as_json: bool) -> None:
    """Generate a corpus, then inspect, ingest, query, compare, replay and sweep it.

    \b
    Example:
        recstore demo --dir /tmp/recstore-demo -n 100
    """
    if not as_json:
        run_demo(workdir, n=cases, seed=seed)
        return
    with contextlib.redirect_stdout(sys.stderr):
        summary = run_demo(workdir, n=cases, seed=seed, out=sys.stderr)
    click.echo(dumps(summary))

"""CLI command: ``recstore demo`` — the whole pipeline on a generated corpus."""

from __future__ import annotations

from pathlib import Path

import click

from recstore.cli import cli
from recstore.demo import run_demo


@cli.command("demo")
@click.option("--dir", "workdir", type=click.Path(file_okay=False, path_type=Path),
              help="Work directory (default: a new temporary directory, kept afterwards).")
@click.option("-n", "--cases", default=200, show_default=True, help="Cases to generate.")
@click.option("--seed", default=7, show_default=True, help="Generator seed.")
def demo(workdir: Path | None, cases: int, seed: int) -> None:
    """Generate a corpus, then inspect, ingest, query, compare, replay and sweep it.

    \b
    Example:
        recstore demo --dir /tmp/recstore-demo -n 100
    """
    run_demo(workdir, n=cases, seed=seed)

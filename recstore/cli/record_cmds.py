"""``recstore inspect FILE``, and the options and output that every ``compare`` form shares.

``recstore compare`` itself (two files, two stored runs, or two run sets) lives in
``recstore.cli.compare_cmds``, which reuses :func:`compare_options` and :func:`echo_comparison`.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable

import click

from recstore.cli import cli
from recstore.formats.aioc import load_record_file
from recstore.jsonout import dumps
from recstore.records import SECTIONS, analyze
from recstore.records.render import render_analysis, render_comparison

__all__ = ["compare_options", "echo_comparison"]


@cli.command("inspect")
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print the full analysis as JSON.")
def inspect_record(file: str, as_json: bool) -> None:
    """Summarize one aioc RunRecord FILE: visits, requests and their item intervals, tool calls
    with envelope status, handoffs, decisions and findings.

    \b
    Example:
      recstore inspect run.json
      recstore inspect run.json --json
    """
    analysis = analyze(load_record_file(file))
    if as_json:
        click.echo(dumps(analysis.to_dict()))
        return
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    click.echo(render_analysis(analysis, width))


def compare_options(command: Callable) -> Callable:
    """``--json``, ``--full``, ``--include`` and ``--exclude`` as every compare command spells
    them."""
    sections = click.Choice(SECTIONS)
    command = click.option(
        "--full", is_flag=True,
        help="Print each difference's two values whole (by default long ones are cut to a "
             "window around where they differ).",
    )(command)
    command = click.option(
        "--exclude", "exclude", multiple=True, type=sections, help="Skip this section (repeatable)."
    )(command)
    command = click.option(
        "--include",
        "include",
        multiple=True,
        type=sections,
        help="Compare only this section (repeatable; default all five).",
    )(command)
    return click.option("--json", "as_json", is_flag=True, help="Print aioc's result JSON.")(
        command
    )


def echo_comparison(result: dict, as_json: bool, left_name: str, right_name: str,
                    full: bool = False) -> int:
    """Print one aioc comparison result; return the exit status (0 equal, 1 different)."""
    click.echo(dumps(result) if as_json
               else render_comparison(result, left_name, right_name, full=full))
    return 0 if result["equal"] else 1

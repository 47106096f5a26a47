"""``recstore inspect FILE`` and ``recstore compare A B``: one record file, or two, no store.

The compare command is registered only if no other module registered ``compare`` first, so the
store/bulk comparison (``recstore.cli.compare_cmds``) can replace it with a command that covers
files too, reusing :func:`compare_options` and :func:`echo_comparison`.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from recstore.cli import cli
from recstore.formats.aioc import compare_files, load_record_file
from recstore.records import SECTIONS, analyze
from recstore.records.render import dumps_json, render_analysis, render_comparison

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
    click.echo(dumps_json(analysis.to_dict()) if as_json else render_analysis(analysis))


def compare_options(command: Callable) -> Callable:
    """``--json``, ``--include`` and ``--exclude`` as every compare command spells them."""
    sections = click.Choice(SECTIONS)
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


def echo_comparison(result: dict, as_json: bool, left_name: str, right_name: str) -> int:
    """Print one aioc comparison result; return the exit status (0 equal, 1 different)."""
    click.echo(dumps_json(result) if as_json else render_comparison(result, left_name, right_name))
    return 0 if result["equal"] else 1


@click.command("compare")
@click.argument("a", type=click.Path(dir_okay=False, path_type=str))
@click.argument("b", type=click.Path(dir_okay=False, path_type=str))
@compare_options
@click.pass_context
def compare_record_files(
    ctx: click.Context, a: str, b: str, as_json: bool, include: tuple, exclude: tuple
) -> None:
    """Compare two aioc RunRecord files exactly as aioc's compareRunRecords does.

    Exit status 0 when equal, 1 when different, 2 on error (like diff). Sections: response,
    toolCalls, policy, guardrails, metadata.

    \b
    Example:
      recstore compare baseline.json candidate.json
      recstore compare baseline.json candidate.json --json --exclude metadata
    """
    result = compare_files(
        a, b, include_sections=list(include) or None, exclude_sections=list(exclude)
    )
    ctx.exit(echo_comparison(result, as_json, a, b))


if "compare" not in cli.commands:
    cli.add_command(compare_record_files)

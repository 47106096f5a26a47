"""CLI: ``recstore agentuse check`` — what an agentuse tree holds and what is wrong with it,
without touching a store (ingest, replay --match agentuse and --command live on ingest/replay)."""

from __future__ import annotations

from pathlib import Path

import click

from recstore.cli import cli
from recstore.cli.terminal import say
from recstore.errors import InputError
from recstore.jsonout import dumps


@cli.group("agentuse")
def agentuse_group() -> None:
    """agentuse session trees (see docs/agentuse.md)."""


@agentuse_group.command("check")
@click.argument("path", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_context
def check(ctx: click.Context, path: str, as_json: bool) -> None:
    """Scan an agentuse data root, project or session directory and list its sessions and every
    bad or odd file (the rejects `recstore ingest` would store). Exit status 1 if any.

    \b
    Example:
      recstore agentuse check ~/.local/share/agentuse
    """
    from recstore.formats.agentuse import assemble_run, is_agentuse_tree, scan_tree

    if not Path(path).is_dir() or not is_agentuse_tree(path):
        raise InputError(
            "not an agentuse data root, project, session container or session directory",
            source=path,
        )
    scan = scan_tree(path)
    runs = [assemble_run(tree.files) for tree in scan.trees]
    problems = [*scan.problems, *(p for run in runs for p in run.problems)]
    if as_json:
        click.echo(dumps(_report(scan.layout, runs, problems)))
    else:
        say(f"{scan.layout}: {len(runs)} sessions, {len(problems)} problems")
        for run in runs:
            root = run.root
            say(
                f"{run.run_key} {root.status} {root.agent_id} visits={len(run.visits)} "
                f"tool_calls={len(run.tool_calls)} gates={len(run.gates)}"
                + (" mock" if root.mock else "")
            )
        for p in problems:
            say(f"{p.source_path or p.rel_path}: {p.code}: {p.reason}", err=True)
    ctx.exit(1 if problems else 0)


def _report(layout: str, runs: list, problems: list) -> dict:
    return {
        "layout": layout,
        "sessions": [
            {
                "runKey": run.run_key,
                "status": run.root.status,
                "agent": run.root.agent_id,
                "mock": run.root.mock,
                "visits": len(run.visits),
                "toolCalls": len(run.tool_calls),
                "gates": len(run.gates),
            }
            for run in runs
        ],
        "problems": [
            {
                "path": p.rel_path,
                "file": p.source_path,
                "code": p.code,
                "reason": p.reason,
                "kept": p.kept,
            }
            for p in problems
        ],
    }

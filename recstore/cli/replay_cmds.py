"""CLI: ``recstore replay`` and ``recstore lineage`` (thin; the work is in recstore.replay)."""

from __future__ import annotations

from pathlib import Path

import click

from recstore.cli import cli
from recstore.cli.existing_store import READ_WAIT, WRITE_WAIT, existing_store, lock_timeout_option
from recstore.cli.terminal import CliProgress, quiet_option, say
from recstore.errors import InputError
from recstore.jsonout import dumps

_EXAMPLE = """
Examples:

  recstore replay v-handoff-cycle --from-source --mode strict

  recstore replay RUN --harness docs/examples/replay-harness.toml --mode hybrid --json

  recstore replay --select "status = 'completed'" --from-source --workers 2

  recstore replay agentuse:SESSION --match agentuse --harness docs/examples/agentuse-harness.toml

  recstore replay RUN --match agentuse --harness agent.toml --reference docs/style.md

  recstore replay RUN --command 'node replayer.js' --match agentuse --command-timeout 120
"""


def _provider_spec(kind, script, base_url, model, api_key_env, timeout, max_retries, deadline=None):
    """A provider override from the command line, or None to keep the harness's settings."""
    if kind is None:
        for flag, value in (("--script", script), ("--base-url", base_url), ("--model", model),
                            ("--api-key-env", api_key_env), ("--timeout", timeout), ("--max-retries", max_retries),
                            ("--deadline", deadline)):
            if value is not None:
                raise InputError(f"{flag} needs --provider", source=flag)
        return None
    from recstore.replay.harness import ProviderSpec

    if kind == "scripted" and script is None:
        raise InputError("--provider scripted needs --script FILE", source="--provider")
    settings: dict = {"kind": kind}
    if script is not None:
        settings["script"] = str(Path(script).resolve())
    for key, value in (("base_url", base_url), ("model", model), ("timeout", timeout), ("max_retries", max_retries),
                       ("deadline", deadline)):
        if value is not None:
            settings[key] = value
    if api_key_env is not None:
        settings["api_key_env"] = api_key_env or None
    return ProviderSpec(**settings)


@cli.command("replay", epilog=_EXAMPLE)
@click.argument("run", required=False)
@click.option("--harness", "harness_path", type=click.Path(dir_okay=False), help="Candidate harness file (TOML or YAML).")
@click.option("--from-source", is_flag=True, help="Derive the candidate from the source run itself (reproducibility check).")
@click.option("--mode", type=click.Choice(["strict", "hybrid", "live"]), default="strict", show_default=True)
@click.option("--input-mode", type=click.Choice(["recorded", "question"]), default="recorded", show_default=True)
@click.option("--provider", "provider_kind", type=click.Choice(["recorded", "scripted", "openai", "anthropic"]),
              help="Model provider (default: the harness's, else recorded).")
@click.option("--script", type=click.Path(dir_okay=False, exists=True), help="Turns for --provider scripted (JSON).")
@click.option("--base-url", help="Endpoint for --provider openai (OpenAI-compatible) or anthropic (Messages API).")
@click.option("--model", help="Model name for --provider openai/anthropic (default: the agent's).")
@click.option("--api-key-env", help="Environment variable holding the API key (default OPENAI_API_KEY, "
                                    "ANTHROPIC_API_KEY for anthropic; '' for none).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds per provider request.")
@click.option("--deadline", type=click.FloatRange(min=0, min_open=True),
              help="Seconds for all model requests of one replay, retries included.")
@click.option("--max-retries", type=click.IntRange(min=0), help="Retries on 5xx/timeouts/dropped connections.")
@click.option("--max-connections", type=click.IntRange(1, 4096), default=16, show_default=True,
              help="Model requests in flight at most (per endpoint and key; lowered on 429s), or "
                   "external replayer commands at once.")
@click.option("--select", "select_dsl", metavar="DSL", help="Replay every run this filter selects.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="Processes computing replays (one writer stores them).")
@click.option("--no-store", is_flag=True, help="Do not store the replay runs.")
@click.option("--match", "matching", type=click.Choice(["aioc", "agentuse"]), default="aioc", show_default=True,
              help="Tool-matching rules: aioc's, or agentuse's strict replay rules (docs/agentuse.md).")
@click.option("--command", metavar="'CMD ...'",
              help="External replayer: reads a JSON request on stdin, prints the replay RunRecord "
                   "or an agentuse session path (schema/replayer-protocol.json).")
@click.option("--command-timeout", type=click.FloatRange(min=0, min_open=True), default=300.0, show_default=True,
              help="Seconds before an external replayer is stopped (stored as a failed replay).")
@click.option("--project-root", type=click.Path(file_okay=False),
              help="--match agentuse: the replay's project root for relative read paths (default: the source's).")
@click.option("--reference", "references", multiple=True, type=click.Path(dir_okay=False),
              help="--match agentuse: a read-only file served from its current content (repeatable).")
@click.option("--allow-outside", is_flag=True,
              help="Let the harness read files outside its own folder (instructions_file, script).")
@click.option("--allow-empty", is_flag=True, help="--select: accept a selection of no runs (else exit 3).")
@click.option("--json", "as_json", is_flag=True, help="Print reports as JSON.")
@click.option("--totals", is_flag=True,
              help="With --json: print {replays: [...], totals: {...}} (statuses, model requests, "
                   "retries, rate limits, tokens summed).")
@quiet_option
@lock_timeout_option(WRITE_WAIT)
@click.pass_context
def replay_cmd(ctx, run, harness_path, from_source, mode, input_mode, provider_kind, script, base_url,
               model, api_key_env, timeout, deadline, max_retries, max_connections, select_dsl, workers,
               no_store, matching, command, command_timeout, project_root, references, allow_outside,
               allow_empty, as_json, totals, quiet, lock_timeout):
    """Replay stored runs against a candidate with recorded tool outputs.

    Exit status 0 when every replay completed (finished like its source and equal to it on
    response and tool calls; with --match agentuse, when agentuse's status is proposal or
    completed, the comparison only reported), 1 otherwise, 2 for a source --match agentuse
    refuses, 3 when --select matches no runs.

    A harness file is trusted like code (it may name Python functions to run and an endpoint that
    receives its API key variable); it may read only files beside it unless --allow-outside.
    """
    from recstore.replay.batch import ReplayJob, replay_stored

    if (run is None) == (select_dsl is None):
        raise InputError("give a RUN or --select DSL (exactly one)", source="replay")
    if command is not None and (harness_path or from_source):
        raise InputError("--command replaces --harness/--from-source; give one of them", source="replay")
    if command is None and bool(harness_path) == from_source:
        raise InputError("give --harness FILE, --from-source or --command (exactly one)", source="replay")
    if harness_path:
        from recstore.replay.harness import load_harness

        load_harness(harness_path, allow_outside=allow_outside)  # fail early, once, with the file's error
    provider = _provider_spec(provider_kind, script, base_url, model, api_key_env, timeout, max_retries, deadline)
    job = ReplayJob(str(Path(harness_path).resolve()) if harness_path else None, mode, input_mode, provider,
                    allow_outside)
    store = existing_store(ctx, lock_timeout)
    if select_dsl is not None:
        from recstore.query import select_gate_runs

        keys = select_gate_runs(store, select_dsl, what="--select", allow_empty=allow_empty)
    else:
        keys = [store.resolve_run(run)]
    from recstore.replay.endpoints import STATS

    with CliProgress("replay runs", quiet=quiet, detail=STATS.line) as progress:
        if command is not None:
            from recstore.replay.external import replay_stored_external

            results = replay_stored_external(store, keys, command, mode=mode, input_mode=input_mode,
                                             matching=matching, timeout=command_timeout, save=not no_store,
                                             progress=progress, max_connections=max_connections)
        elif matching == "agentuse":
            from recstore.replay.agentuse_match import replay_stored_agentuse

            results = replay_stored_agentuse(store, keys, job, project_root=project_root,
                                             reference_paths=references, save=not no_store, progress=progress)
        else:
            results = replay_stored(store, keys, job, workers=workers, save=not no_store, progress=progress,
                                    max_connections=max_connections)
    _print(results, as_json, single=run is not None, totals=totals, live=STATS.to_json())
    ctx.exit(0 if all(r.report.status == "completed" for r in results) else 1)


def _print(results, as_json: bool, single: bool, totals: bool = False, live: dict | None = None) -> None:
    from recstore.replay.batch import batch_totals

    summed = dict(batch_totals(results), live=live)
    if as_json:
        payload = [dict(r.report.to_json(), sourceRunKey=r.source_run_key, replayRunKey=r.replay_run_key) for r in results]
        if totals:
            click.echo(dumps({"replays": payload, "totals": summed}))
        else:
            click.echo(dumps(payload[0] if single and payload else payload))
        return
    if single:
        for r in results:
            say(r.report.render())
            if r.replay_run_key:
                say(f"  stored as {r.replay_run_key}")
        return
    counts: dict[str, int] = {}
    for r in results:
        counts[r.report.status] = counts.get(r.report.status, 0) + 1
        if r.report.status != "completed":
            say(f"{r.source_run_key}: {r.report.status} ({r.report.reason})")
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    say(f"{len(results)} replays: {summary or 'none selected'}")
    usage = summed["usage"]
    if usage["requests"]:
        say(f"model requests: {usage['requests']:,} ({usage['retries']:,} retries, "
            f"{usage['rateLimited']:,} rate-limited), tokens: {usage['totalTokens']:,} "
            f"({usage['promptTokens']:,} prompt, {usage['completionTokens']:,} completion)")


@cli.command("lineage")
@click.argument("run")
@click.option("--limit", type=click.IntRange(min=1), default=500, show_default=True,
              help="Show at most this many runs (lines).")
@click.option("--json", "as_json", is_flag=True, help="Print the tree as JSON.")
@lock_timeout_option(READ_WAIT)
@click.pass_context
def lineage_cmd(ctx, run, limit, as_json, lock_timeout):
    """Print the tree of runs derived from RUN (replays, replays of replays, continuations).

    Each run's subtree is shown once: a run met again is marked as a cycle (a link back to an
    ancestor) or as shown above, and the output stops after --limit runs.
    """
    from recstore.replay.tree import lineage_tree, render_tree

    tree = lineage_tree(existing_store(ctx, lock_timeout), run, limit=limit)
    if as_json:
        click.echo(dumps(tree))
    else:
        say(render_tree(tree))

"""``recstore compare``: two record files, two stored runs, or two run sets in bulk.

Reuses ``record_cmds``' ``compare_options`` and ``echo_comparison`` for the one-pair output.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import click
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from recstore.cli import cli
from recstore.cli.existing_store import WRITE_WAIT, existing_store, lock_timeout_option
from recstore.cli.record_cmds import compare_options, echo_comparison
from recstore.cli.spark_session import conf_option, master_option, session
from recstore.cli.terminal import CliProgress, quiet_option, say, wrote
from recstore.compare import (
    DEFAULT_MAX_UNPAIRED,
    DUPLICATE_RULES,
    PRESETS,
    ClassificationRule,
    bulk_compare,
    compare_pair,
    compare_stored,
)
from recstore.compare.details import DETAIL_LIMIT
from recstore.compare.report import render_html, render_text
from recstore.errors import InputError
from recstore.files import check_output_path, write_output, write_private_text
from recstore.formats.aioc import load_record_file
from recstore.jsonout import dumps
from recstore.query import output_format
from recstore.query.spark import spark_failures


def _gate(ctx: click.Context, comparison, max_unpaired: float) -> None:
    """Exit as the gate decides: 1 on a failed pair, 3 (raised) on too many unpaired runs, else
    0; unpaired runs within the allowance are still reported."""
    unpaired = comparison.unpaired_error(max_unpaired)
    if comparison.failed:
        if unpaired is not None:
            say(f"recstore: also: {unpaired}", err=True)
        ctx.exit(1)
    if unpaired is not None:
        raise unpaired
    counts = comparison.unpaired_counts()
    if counts["baseline"] or counts["candidate"]:
        say(f"recstore: note: unpaired runs: baseline {counts['baseline']}, candidate "
            f"{counts['candidate']} (within --max-unpaired {max_unpaired:g})", err=True)
    ctx.exit(0)


def _write_pairs(comparison, fmt: str, output: str) -> None:
    def write(sink) -> None:
        if fmt == "csv":
            pa_csv.write_csv(comparison.pairs, sink)
        else:
            pq.write_table(comparison.pairs, sink)

    write_output(output, write, mode="wb")


def _refuse_spark_options(parquet: str | None, master: str | None,
                          conf: tuple[str, ...]) -> None:
    given = [name for name, value in (("--parquet", parquet), ("--master", master),
                                      ("--conf", conf)) if value]
    if given:
        raise InputError(f"{given[0]} goes with --engine spark", source=given[0])


def _spark_compare(parquet: str | None, master: str | None, conf: tuple[str, ...],
                   baseline: str, candidate: str, options: dict):
    """The comparison on Spark over ``parquet``, and the layout the HTML report reads."""
    if not parquet:
        raise InputError("spark needs --parquet DIR (written by `recstore spark build` or "
                         "`recstore export`)", source="--engine")
    from recstore.spark.compare import ParquetLayout, check_layout_options, spark_compare

    check_layout_options(parquet, options["pair_by"], options["ignore"], options["preset"])
    spark = session(master, conf)
    return (spark_compare(spark, parquet, baseline, candidate, **options),
            ParquetLayout(spark, parquet))


@cli.command("compare")
@click.argument("runs", nargs=-1, metavar="[A B]")
@click.option("--baseline", metavar="FILTER", help="Baseline runs: a query DSL filter.")
@click.option("--candidate", metavar="FILTER", help="Candidate runs: a query DSL filter.")
@click.option(
    "--pair-by",
    default="metadata.caseId",
    show_default=True,
    metavar="KEY",
    help="Pairing key: metadata.<path>, question, input_scope or lineage.",
)
@click.option(
    "--duplicates",
    type=click.Choice(DUPLICATE_RULES),
    default="latest",
    show_default=True,
    help="Several runs with one key on a side: keep the latest, or pair all.",
)
@click.option(
    "--ignore",
    "ignore",
    multiple=True,
    metavar="PATHS",
    help="Leave out fields: policy.timestamp,policy.callId,guardrails.timestamp,metadata,"
    "metadata.<key>,toolCalls.output or a whole section (repeatable, comma-separated).",
)
@click.option("--preset", type=click.Choice(sorted(PRESETS)), help="Named ignore set.")
@click.option("--fail-on", metavar="SIGNALS", help="Signals that classify a pair as fail.")
@click.option("--warn-on", metavar="SIGNALS", help="Signals that classify a pair as warn.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "parquet"]),
    help="Format of the per-pair rows in --output (default: the one FILE's extension names, "
    ".csv or .parquet).",
)
@click.option("--output", "-o", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write one row per pair to FILE (csv or parquet, from its extension).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), help="Write an HTML report.")
@click.option(
    "--html-details",
    type=click.IntRange(min=0),
    default=DETAIL_LIMIT,
    show_default=True,
    metavar="N",
    help="Changed pairs whose drill-down the HTML report embeds (every pair is in its table).",
)
@click.option("--no-record", is_flag=True, help="Do not store the comparison in the store.")
@quiet_option
@click.option(
    "--max-unpaired",
    type=click.FloatRange(0.0, 1.0),
    default=DEFAULT_MAX_UNPAIRED,
    show_default=True,
    metavar="FRACTION",
    help="Share of a side's runs that may go unpaired before the gate exits 3.",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Accept a side that selects no runs, or no pairs (exit 0 instead of 3).",
)
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb",
              show_default=True,
              help="Compare on the store (duckdb) or on Spark over --parquet (run sets only).")
@click.option("--parquet", type=click.Path(file_okay=False, exists=True), metavar="DIR",
              help="For --engine spark: a `recstore spark build` or `recstore export` directory.")
@master_option
@conf_option
@compare_options
@lock_timeout_option(WRITE_WAIT)
@click.pass_context
def compare_cmd(
    ctx: click.Context,
    runs: tuple[str, ...],
    baseline: str | None,
    candidate: str | None,
    pair_by: str,
    duplicates: str,
    ignore: tuple[str, ...],
    preset: str | None,
    fail_on: str | None,
    warn_on: str | None,
    fmt: str | None,
    output: str | None,
    html_path: str | None,
    html_details: int,
    no_record: bool,
    quiet: bool,
    max_unpaired: float,
    allow_empty: bool,
    as_json: bool,
    full: bool,
    engine: str,
    parquet: str | None,
    master: str | None,
    conf: tuple[str, ...],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    lock_timeout: float,
) -> None:
    """Compare runs exactly as aioc's compareRunRecords does, one pair or thousands.

    \b
    A B         two RunRecord files, or two stored runs (run key, run id or prefix):
                aioc's full result; exit 0 when equal, 1 when different.
    --baseline F --candidate F [--pair-by KEY]
                bulk: pair the two run sets and compare every pair in SQL (a CI gate):
                exit 1 when a pair classifies as fail; 3 when a side selects no runs,
                nothing pairs, or more than --max-unpaired of a side's runs are
                unpaired (default 0: every selected run must be compared); else 0.

    With --engine spark --parquet DIR the bulk comparison runs on Spark (--master, --conf)
    over the views a `recstore spark build` or `recstore export` wrote there, with the same
    results; it is not recorded (a layout is no store) and compares current revisions.

    Pairs classify as fail when the candidate failed (newFailure), warn when not equal, else
    pass (aioc's rule), except that a pair whose runs both failed with no difference (a
    reproduced failure) is counted as still failing and passes the gate; --fail-on
    candidateFailed fails every candidate failure. --fail-on/--warn-on take signals:
    statusChanged, toolsChanged, policyChanged, finalOutputChanged, guardrailsChanged,
    outputsChanged, metadataChanged, changed, candidateFailed, newFailure, stillFailing,
    regressed. The semantic preset ignores policy.timestamp, policy.callId, policy.expiresAt,
    guardrails.timestamp and metadata.

    \b
    Examples:
      recstore compare baseline.json candidate.json --exclude metadata
      recstore compare aioc:run-1 aioc:run-2 --preset semantic --json
      recstore compare --baseline "tag.set = 'v1'" --candidate "tag.set = 'v2'" \\
          --pair-by metadata.caseId --html report.html -o pairs.csv
      recstore compare --engine spark --parquet views/ --baseline "model = 'm1'" \\
          --candidate "model = 'm2'" --pair-by metadata.caseId --html report.html
    """
    include_sections = list(include) or None
    if baseline is not None or candidate is not None:
        if runs or baseline is None or candidate is None:
            raise InputError("bulk compare needs both --baseline and --candidate, and no A B")
        if fmt is not None and output is None:
            raise InputError("--format needs --output FILE")
        if output is not None:
            fmt = output_format(output, fmt, allowed=("csv", "parquet"))
        for target in (output, html_path):
            if target:
                check_output_path(target)  # refused before a comparison is recorded
        options = dict(pair_by=pair_by, ignore=ignore, preset=preset,
                       include_sections=include_sections, exclude_sections=exclude,
                       duplicates=duplicates, rule=ClassificationRule.parse(fail_on, warn_on),
                       allow_empty=allow_empty)
        with spark_failures() if engine == "spark" else nullcontext():
            if engine == "spark":
                comparison, store = _spark_compare(parquet, master, conf, baseline, candidate,
                                                   options)
            else:
                _refuse_spark_options(parquet, master, conf)
                store = existing_store(ctx, lock_timeout)
                with CliProgress("compare: reduce runs", quiet=quiet) as progress:
                    comparison = bulk_compare(store, baseline, candidate, record=not no_record,
                                              progress=progress, **options)
            if output:
                _write_pairs(comparison, fmt, output)
                wrote(output, quiet=quiet)
            if html_path:
                write_private_text(html_path,
                                   render_html(comparison, store, detail_limit=html_details))
                wrote(html_path, quiet=quiet)
        if as_json:
            click.echo(dumps(comparison.to_dict()))
        else:
            say(render_text(comparison))
        _gate(ctx, comparison, max_unpaired)
    if engine == "spark":
        raise InputError("--engine spark compares run sets (--baseline and --candidate); "
                         "compare two runs or files without it", source="--engine")
    _refuse_spark_options(parquet, master, conf)
    if len(runs) != 2:
        raise InputError("give two files or runs (A B), or --baseline and --candidate")
    a, b = runs
    if Path(a).is_file() and Path(b).is_file():
        result = compare_pair(
            load_record_file(a),
            load_record_file(b),
            ignore=ignore,
            preset=preset,
            include_sections=include_sections,
            exclude_sections=exclude,
        )
    else:
        result = compare_stored(
            existing_store(ctx, lock_timeout),
            a,
            b,
            ignore=ignore,
            preset=preset,
            include_sections=include_sections,
            exclude_sections=exclude,
        )
    ctx.exit(echo_comparison(result, as_json, a, b, full))

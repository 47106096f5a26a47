"""The built-in demo: the whole pipeline on a generated corpus, as the commands a user would type.

Each step prints the ``recstore`` command line it runs and then runs exactly that command
in-process, so the demo doubles as a tour of the CLI. Everything is written under one work
directory (a fresh temporary one unless given) that is left in place for a look afterwards.
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import TextIO

import click

from recstore import synth
from recstore.files import private_dir, write_private_text
from recstore.jsonout import write_json

__all__ = ["run_demo"]

# The sweep's candidate: each run's own agents and recorded behaviour (from_source), except that
# get_finance_report's schema gains a defaulted `currency` argument, so every run that called it
# can no longer be served from its recording and the gate names the tool.
_SWEEP_SPEC = """\
name = "demo-finance-schema"
description = "Baseline runs replayed with the new get_finance_report schema"

[select]
query = "tag.set = 'baseline'"

[candidate]
from_source = true
label = "get_finance_report v2 schema"

[candidate.tools.get_finance_report]
description = "Get a finance report in a currency."
parameters = { type = "object", required = ["reportId"], properties = { reportId = { type = "string" }, currency = { type = "string", default = "EUR" } } }

[replay]
mode = "strict"

[compare]
include_sections = ["response", "toolCalls"]

[classify]
fail_on = ["replay_error", "tool_drift"]
warn_on = ["not_equal"]
tools = ["get_finance_report"]

[schedule]
cron = "0 6 * * 1-5"
timezone = "UTC"
"""


class _Demo:
    def __init__(self, workdir: Path, out: TextIO):
        self.workdir = workdir
        self.db = workdir / "demo.duckdb"
        self.out = out
        self.commands: list[dict] = []  # every command run and its exit status (demo --json)

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def step(self, title: str) -> None:
        self.say()
        self.say(f"== {title}")

    def run(self, *args: str, expect: tuple[int, ...] = (0,)) -> int:
        """Run one ``recstore`` command in-process; fail loudly on an unexpected exit status."""
        from recstore.cli import cli

        argv = ["--db", str(self.db), *args]
        self.say(f"$ recstore {shlex.join(argv)}")
        try:  # without standalone mode, click returns the status a command exits with
            code = cli.main(args=argv, prog_name="recstore", standalone_mode=False, obj={}) or 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        self.commands.append({"argv": ["recstore", *argv], "exit": code})
        if code not in expect:
            raise click.ClickException(f"demo step `recstore {shlex.join(args)}` exited {code}")
        return code


def _write_single(path: Path, record: dict) -> Path:
    return write_json(path, record)


def _pick_handoff_case(n: int, seed: int) -> tuple[dict, dict]:
    """A baseline/candidate pair worth inspecting: one with a handoff and a declared change."""
    changes = synth.case_changes(n, seed)
    baseline = list(synth.generate_corpus(n, seed, "baseline"))
    candidate = {r["metadata"]["caseId"]: r for r in synth.generate_corpus(n, seed, "candidate")}
    for record in baseline:
        case = record["metadata"]["caseId"]
        names = [i.get("name", "") for i in record["items"] if i.get("type") == "tool_call_item"]
        if case in changes and any(name.startswith("handoff_to_") for name in names):
            return record, candidate[case]
    return baseline[0], candidate[baseline[0]["metadata"]["caseId"]]


def run_demo(workdir: Path | None = None, n: int = 200, seed: int = 7,
             out: TextIO | None = None) -> dict:
    """Generate a corpus and run the pipeline on it, printing each command and its output to
    ``out``; returns the work directory, store, reports and every command with its exit status."""
    workdir = private_dir(workdir or tempfile.mkdtemp(prefix="recstore-demo-"))
    demo = _Demo(workdir, out or click.get_text_stream("stdout"))
    demo.say(f"recstore demo in {workdir}")

    demo.step(f"1. Generate {n} baseline runs and the same {n} cases run by a changed agent")
    baseline_file = synth.write_corpus(workdir / "baseline.ndjson.gz", n, seed, "baseline")
    candidate_file = synth.write_corpus(workdir / "candidate.ndjson.gz", n, seed, "candidate")
    demo.say(f"wrote {baseline_file.name} and {candidate_file.name}")

    demo.step("2. Inspect one record and compare it with its candidate (aioc parity)")
    base_rec, cand_rec = _pick_handoff_case(n, seed)
    one = _write_single(workdir / "one-run.json", base_rec)
    other = _write_single(workdir / "one-run-candidate.json", cand_rec)
    demo.run("inspect", str(one))
    demo.run("compare", str(one), str(other), expect=(0, 1))

    demo.step("3. Ingest both corpora into one store (append-only, hash-chained events)")
    demo.run("ingest", str(baseline_file), "--tag", "set=baseline")
    demo.run("ingest", str(candidate_file), "--tag", "set=candidate")
    demo.run("ingest", str(baseline_file), "--tag", "set=baseline")  # idempotent: all duplicates
    demo.run("runs", "--limit", "5")
    case = base_rec["metadata"]["caseId"]
    demo.run("query", f"visits where run.metadata.caseId = '{case}' and run.tag.set = 'baseline'")
    demo.run("verify")

    demo.step("4. Ask questions: the filter DSL and a saved query")
    demo.run("query", "status = 'failed' and tag.set = 'baseline' "
                      "fields run_key, agent, error_name, started order by started desc limit 5")
    demo.run("query", "tool_calls where envelope_status = 'denied' "
                      "fields run_key, agent, name, envelope_code limit 5")
    demo.run("query", "--explain", "tool_calls.any(name = 'refund' and args.amount > 100) "
                      "fields run_key, agent, started")
    demo.run("query", "@tool-usage-by-agent")

    demo.step("5. Compare the candidate corpus with the baseline in bulk, paired by caseId")
    report = workdir / "compare-report.html"
    demo.run("compare", "--baseline", "tag.set = 'baseline'", "--candidate", "tag.set = 'candidate'",
             "--pair-by", "metadata.caseId", "--preset", "semantic", "--html", str(report),
             expect=(0, 1))
    changed = [c for c in synth.case_changes(n, seed).values() if c.kind != "none"]
    demo.say(f"the generator declared {len(changed)} changed cases: "
             + ", ".join(sorted({c.kind for c in changed})))
    demo.say(f"comparison report: {report}")

    demo.step("6. Replay every baseline run strictly from its own recording, then compare")
    demo.run("replay", "--select", "tag.set = 'baseline'", "--from-source", "--mode", "strict")
    demo.run("compare", "--baseline", "tag.set = 'baseline'",
             "--candidate", "replay_of_run_id is not null", "--pair-by", "lineage",
             "--include", "response", "--include", "toolCalls", "--fail-on", "statusChanged,changed")
    demo.run("lineage", base_rec["runId"])

    demo.step("7. A replay sweep: select, strict replay with a changed tool schema, compare, gate")
    spec = workdir / "sweep.toml"
    write_private_text(spec, _SWEEP_SPEC)
    demo.run("sweep", "run", str(spec), expect=(0, 1))
    demo.run("sweep", "status", "demo-finance-schema")
    reports = workdir / "sweep-report"
    demo.run("sweep", "report", "demo-finance-schema", "--output", str(reports))
    demo.run("sweep", "cron", str(spec))

    demo.say()
    demo.say(f"Done. Everything is in {workdir} (store: {demo.db.name}).")
    demo.say(f"Reports: {report} and {reports}/")
    return {"workdir": str(workdir), "store": str(demo.db), "compareReport": str(report),
            "sweepReports": str(reports), "commands": demo.commands}

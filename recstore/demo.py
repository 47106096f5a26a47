"""The built-in demo: the whole pipeline on a generated corpus, as the commands a user would type.

Each step prints the ``recstore`` command line it runs and then runs exactly that command
in-process, so the demo doubles as a tour of the CLI. Everything is written under one work
directory (a fresh temporary one unless given) that is left in place for a look afterwards.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path
from typing import TextIO

import click

from recstore import synth

__all__ = ["run_demo"]

_CANDIDATE_HARNESS = """\
# A candidate agent for the sweep: the run's own agents and tools (from_source), with one change.
"""


class _Demo:
    def __init__(self, workdir: Path, out: TextIO):
        self.workdir = workdir
        self.db = workdir / "demo.duckdb"
        self.out = out

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
        try:
            cli.main(args=argv, prog_name="recstore", standalone_mode=False, obj={})
            code = 0
        except click.exceptions.Exit as exc:
            code = exc.exit_code
        except SystemExit as exc:  # ctx.exit() from the error handler
            code = int(exc.code or 0)
        if code not in expect:
            raise click.ClickException(f"demo step `recstore {shlex.join(args)}` exited {code}")
        return code


def _write_single(path: Path, record: dict) -> Path:
    path.write_text(json.dumps(record, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


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
             out: TextIO | None = None) -> Path:
    """Generate a corpus and run the pipeline on it; returns the work directory."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="recstore-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
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
    demo.run("query", "status = 'failed' and tag.set = 'baseline' order by started desc limit 5")
    demo.run("query", "tool_calls.any(envelope_status = 'denied') and visits.count() >= 2 "
                      "order by started limit 5")
    demo.run("query", "--explain", "tool_calls.any(name = 'refund' and args.amount > 100)")
    demo.run("query", "@tool-usage-by-agent")

    demo.say()
    demo.say(f"Done. Everything is in {workdir} (store: {demo.db.name}).")
    return workdir

"""Replay sweeps: select stored runs, replay them against a candidate, compare, classify, gate.

Pipeline, one module per step: ``spec`` (the TOML sweep spec) → ``runner`` (frozen selection,
resumable replay/compare/classify with one writer) using ``candidate`` (harness, from-source or
external replayer), ``classify`` (signals, rules) and ``judge`` (external verdicts) → ``report``
(status, trends, JSON/HTML). ``schedule`` fires specs at their cron slots; ``locks`` keeps one
scheduler per store and one run per sweep. Documentation: ``docs/sweeps.md``.

Example::

    from recstore.store import Store
    from recstore.sweep import load_spec, run_sweep, write_report

    store = Store("runs.duckdb")
    result = run_sweep(store, load_spec("docs/examples/sweep-tool-change.toml"))
    print(result.summary_line())
    json_path, html_path = write_report(store, result.sweep_run_id, "reports/")
"""

from __future__ import annotations

from recstore.sweep.report import sweep_report, sweep_status, write_report
from recstore.sweep.runner import SweepRun, run_sweep
from recstore.sweep.schedule import ScheduledSweep, Scheduler, cron_lines
from recstore.sweep.spec import SweepSpec, load_spec, parse_spec

__all__ = [
    "ScheduledSweep",
    "Scheduler",
    "SweepRun",
    "SweepSpec",
    "cron_lines",
    "load_spec",
    "parse_spec",
    "run_sweep",
    "sweep_report",
    "sweep_status",
    "write_report",
]

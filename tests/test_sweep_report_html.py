"""The sweep HTML report renders in headless Chromium: a screenshot is taken and the page shows
the case count, the trend chart and the drifting tool, with no console errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from recstore.store import Store
from recstore.sweep.report import write_report
from recstore.sweep.runner import run_sweep
from recstore.sweep.spec import parse_spec
from recstore.synth import generate_corpus

from .browser import dom, needs_chromium, screenshot


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("sweep-html")
    store = Store(tmp / "s.duckdb")
    store.ingest_records(list(generate_corpus(40, seed=2)), source_uri="synth")
    data = {
        "name": "html-check",
        "select": {"query": "status = 'completed' or status = 'failed'"},
        "candidate": {"from_source": True},
        "compare": {"include_sections": ["response", "toolCalls"]},
        "classify": {"fail_on": ["replay_error", "tool_drift"]},
    }
    run_sweep(store, parse_spec(data, source="mem"))
    changed = data | {"candidate": {"from_source": True, "tools": {"get_finance_report": {
        "parameters": {"type": "object", "properties": {"reportId": {"type": "string"},
                                                        "currency": {"type": "string", "default": "EUR"}}}}}}}
    second = run_sweep(store, parse_spec(changed, source="mem"))
    assert second.counts["fail"] > 0
    _, html = write_report(store, second.sweep_run_id, tmp / "report")
    return html


@needs_chromium
def test_report_renders_in_headless_chromium(report_html, tmp_path):
    width, height, pixels = screenshot(tmp_path / "profile", report_html, tmp_path / "report.png",
                                       "1200,1600")
    assert (width, height) == (1200, 1600)
    assert len(set(pixels[::97])) > 20  # tiles, chart and text, not a blank page

    page = dom(tmp_path / "profile", report_html)
    assert '<span id="case-count">40 cases</span>' in page
    assert "<svg" in page and "get_finance_report" in page
    assert "newly failing" in page

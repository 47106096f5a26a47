"""The sweep HTML report renders in headless Chromium: a screenshot is taken and the page shows
the case count, the trend chart and the drifting tool, with no console errors."""

from __future__ import annotations

import json
import re
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


def test_trend_has_dates_and_a_fail_rate_line(report_html):
    page = report_html.read_text(encoding="utf-8")
    assert len(re.findall(r'font-size="10" text-anchor="middle" fill="#5b6472">\d\d-\d\d \d\d:\d\d<', page)) == 2
    (points,) = re.findall(r'<polyline points="([^"]+)"', page)
    assert len(points.split()) == 2  # one point per run
    run = json.loads(report_html.with_suffix(".json").read_text(encoding="utf-8"))["run"]
    assert run["fail_count"]  # the changed tool schema fails some cases of the second run
    assert f"fail rate {100 * run['fail_count'] / run['case_count']:.1f}%" in page
    assert re.findall(r'text-anchor="middle">#(\d+)</text>', page) == ["1", "2"]  # NAME#N numbers


def test_run_keys_link_to_their_case_and_a_stopped_replay_is_summarised(report_html):
    page = report_html.read_text(encoding="utf-8")
    newly = re.search(r"newly failing <a href=\"#case-(\d+)\"><code>(aioc:[^<]+)</code></a>", page)
    assert newly, "a newly failing run key links to its case"
    case = re.search(rf'<details id="case-{newly.group(1)}"[^>]*>(.*?)</details>', page, re.S)
    assert case and newly.group(2) in case.group(1)
    body = case.group(1)
    assert "<b>Stopped:</b>" in body
    assert 'class="difference-summary"' in body
    report = json.loads(report_html.with_suffix(".json").read_text(encoding="utf-8"))
    (stopped,) = [c for c in report["cases"] if c["case_index"] == int(newly.group(1))]
    assert stopped["difference_groups"]  # one summary row per section and kind, with its count
    for g in stopped["difference_groups"]:
        assert f'<td>{g["section"]}</td><td>{g["kind"]}</td><td class="n">{g["count"]}</td>' in body
    assert "<th>source</th><th>replay</th>" not in body  # no rows of JSON for a stopped replay

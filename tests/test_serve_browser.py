"""`recstore serve` in headless Chromium: what a person sees on each page (the DOM after load,
and screenshots kept under the test's tmp folder)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from urllib.parse import quote, urlencode

import httpx
import pytest

from tests.browser import chromium, console_errors, needs_chromium, png_pixels
from tests.serve_support import demo_store, served

pytestmark = needs_chromium
FIXTURES = Path(__file__).parent / "fixtures"
HOSTILE = '</script><script>document.title="pwned"</script><img src=x onerror="alert(1)">'
# screenshots are kept for a person to look at (env RECSTORE_SERVE_SHOTS picks the folder)
SHOTS = Path(os.environ.get("RECSTORE_SERVE_SHOTS")
             or Path(tempfile.gettempdir()) / "recstore-serve-screenshots")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = demo_store(tmp_path_factory.mktemp("serve-browser"))
    with served(db) as (url, _proc, _token):
        yield url, tmp_path_factory.mktemp("chromium")


def page_dom(profile: Path, url: str) -> str:
    done = chromium(profile, "--dump-dom", url)
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_errors(done) == [], console_errors(done)
    return done.stdout


def shot(profile: Path, url: str, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    png = SHOTS / f"{name}.png"
    done = chromium(profile, f"--screenshot={png}", "--window-size=1400,1100", url)
    assert png.exists(), done.stderr[-2000:]
    width, height, pixels = png_pixels(png)
    assert (width, height) == (1400, 1100) and len(set(pixels[:200_000])) > 4  # not blank
    return png


def test_runs_table_filters_with_the_dsl(server):
    url, profile = server
    dom = page_dom(profile, url + "?" + urlencode({"filter": "status = 'failed'"}))
    statuses = re.findall(r"<td>(completed|failed|cancelled)</td>", dom)
    assert statuses and set(statuses) == {"failed"}
    assert 'id="facets"' in dom
    bad = page_dom(profile, url + "?" + urlencode({"filter": "status = = 1"}))
    assert 'id="filter-error"' in bad
    shot(profile, url + "?" + urlencode({"filter": "status = 'failed'"}), "runs")


def test_run_page_shows_the_timeline_and_a_tool_output(server):
    url, profile = server
    row = httpx.get(url + "api/query", params={"q": "SELECT run_key, output::VARCHAR FROM tool_calls "
                                                    "WHERE has_output LIMIT 1"}, timeout=60).json()
    key, output = row["rows"][0]
    dom = page_dom(profile, url + "runs/" + quote(key))
    assert 'id="timeline"' in dom and 'class="bar"' in dom
    shown = re.search(r'<pre class="output-text">(.*?)</pre>', dom, re.S).group(1)
    first_value = next(iter(json.loads(output).values())) if output.startswith("{") else None
    assert first_value is None or str(first_value)[:20].replace("&", "&amp;") in shown
    shot(profile, url + "runs/" + quote(key), "run")


def test_pair_page_shows_the_aligned_diff(server):
    url, profile = server
    pairs = httpx.get(url + "api/query", params={"q": "SELECT baseline_run_key, candidate_run_key "
                                                      "FROM comparison_pairs cp JOIN runs r ON "
                                                      "r.run_key = cp.baseline_run_key WHERE "
                                                      "r.tool_call_count > 0 LIMIT 1"},
                      timeout=60).json()["rows"]
    a, b = pairs[0]
    page = url + "pair?" + urlencode({"baseline": a, "candidate": b})
    dom = page_dom(profile, page)
    assert 'id="aligned"' in dom
    assert re.search(r'<tr class="op-(matched|changed|added|removed)">', dom)
    shot(profile, page, "pair")


def test_pair_page_shows_a_whitespace_difference_visibly(server):
    # responses that differ only by a trailing NBSP look alike as text: the pair page lists the
    # difference with each side written out, as `compare A B` prints it
    url, profile = server
    record = json.loads((FIXTURES / "aioc" / "simple-run.json").read_text())
    keys = []
    for run_id, response in (("nbsp-a", "Done."), ("nbsp-b", "Done.\u00a0")):
        record.update(runId=run_id, response=response)
        httpx.post(url + "v1/runrecords", content=json.dumps(record),
                   headers={"content-type": "application/json"}, timeout=60).raise_for_status()
        keys.append("aioc:" + run_id)
    dom = page_dom(profile, url + "pair?" + urlencode({"baseline": keys[0], "candidate": keys[1]}))
    table = re.search(r'<table id="differences".*?</table>', dom, re.S).group(0)
    rows = re.findall(r'<td class="mono">([^<]*)</td><td>([^<]*)</td>\s*<td><pre class="diff-side">'
                      r'([^<]*)</pre></td>\s*<td><pre class="diff-side">([^<]*)</pre></td>', table)
    assert rows == [("response", "mismatch", '"Done."', '"Done.\\u00a0"')]
    assert "different (1 difference):" in dom


def test_compare_report_links_run_pages(server):
    url, profile = server
    page = url + "compare?" + urlencode({"baseline": "tag.set = 'baseline'",
                                         "candidate": "tag.set = 'candidate'"})
    dom = page_dom(profile, page)
    assert re.search(r'<a href="/runs/aioc%3A[^"]+">aioc:', dom)
    shot(profile, page, "compare")


def test_sql_console_returns_rows_and_refuses_a_write(server):
    url, profile = server
    dom = page_dom(profile, url + "sql?" + urlencode({"q": "SELECT run_key FROM runs LIMIT 3"}))
    assert len(re.findall(r"<td>aioc:", dom)) == 3
    refused = page_dom(profile, url + "sql?" + urlencode({"q": "DELETE FROM runs"}))
    assert 'id="sql-error"' in refused and "refused" in refused
    shot(profile, url + "sql?" + urlencode({"q": "@slowest-runs"}), "sql")


def test_a_posted_record_appears_in_the_runs_table(server):
    url, profile = server
    record = json.loads((FIXTURES / "aioc" / "simple-run.json").read_text())
    record["runId"] = "posted-in-browser-test"
    answer = httpx.post(url + "v1/runrecords", content=json.dumps(record),
                        headers={"content-type": "application/json"}, timeout=60)
    assert answer.json()["accepted"] == 1
    dom = page_dom(profile, url + "?" + urlencode({"filter": "run_id = 'posted-in-browser-test'"}))
    assert "aioc:posted-in-browser-test</a>" in dom


def test_hostile_strings_are_escaped_in_every_page(server):
    url, profile = server
    record = json.loads((FIXTURES / "aioc" / "simple-run.json").read_text())
    record["runId"] = "hostile-" + "x"
    record["question"] = HOSTILE
    record["response"] = HOSTILE
    record["agentName"] = HOSTILE
    record["metadata"] = {"caseId": HOSTILE}
    httpx.post(url + "v1/runrecords", content=json.dumps(record),
               headers={"content-type": "application/json"}, timeout=60).raise_for_status()
    pages = [url + "runs/" + quote("aioc:hostile-x"),
             url + "?" + urlencode({"filter": "run_id = 'hostile-x'"}),
             url + "sql?" + urlencode({"q": "SELECT question, agent FROM runs WHERE run_id = 'hostile-x'"})]
    for page in pages:
        dom = page_dom(profile, page)
        assert "<title>recstore" in dom and "pwned" not in re.search(r"<title>(.*?)</title>", dom).group(1)
        assert '<img src="x"' not in dom and "<img src=x" not in dom, page
        assert "&lt;/script&gt;&lt;script&gt;" in dom, page
    shot(profile, pages[0], "hostile")

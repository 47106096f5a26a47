"""The sweep HTML report renders in headless Chromium: a screenshot is taken and the page shows
the case count, the trend chart and the drifting tool, with no console errors."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from recstore.store import Store
from recstore.sweep.report import write_report
from recstore.sweep.runner import run_sweep
from recstore.sweep.spec import parse_spec
from recstore.synth import generate_corpus

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr",
                           "--v=0", *args], capture_output=True, text=True, timeout=120)


def png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and the decompressed scanlines of a PNG (enough to see it is not blank)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, zlib.decompress(idat)


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


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_report_renders_in_headless_chromium(report_html, tmp_path):
    shot = tmp_path / "report.png"
    done = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,1600", report_html.as_uri())
    assert shot.exists(), done.stderr[-2000:]
    width, height, pixels = png_pixels(shot)
    assert (width, height) == (1200, 1600)
    assert len(set(pixels[::97])) > 20  # tiles, chart and text, not a blank page
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []

    dom = chromium(tmp_path, "--dump-dom", report_html.as_uri())
    assert dom.returncode == 0
    assert '<span id="case-count">40 cases</span>' in dom.stdout
    assert "<svg" in dom.stdout and "get_finance_report" in dom.stdout
    assert "newly failing" in dom.stdout

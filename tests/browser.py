"""Headless Chromium for the report tests: a screenshot, or the DOM after the page's scripts
ran (a URL hash drives the compare report's view, exactly as its clicks do)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from html import unescape
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=180)


def console_errors(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]


def dom(profile: Path, page: Path, fragment: str = "") -> str:
    """The page's DOM after load, with ``#fragment`` in its address."""
    done = chromium(profile, "--dump-dom", page.as_uri() + (f"#{fragment}" if fragment else ""))
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_errors(done) == []
    return done.stdout


def screenshot(profile: Path, page: Path, png: Path, size: str = "1400,1800",
               fragment: str = "") -> tuple[int, int, bytes]:
    """Take a screenshot; returns width, height and the decompressed scanlines."""
    done = chromium(profile, f"--screenshot={png}", f"--window-size={size}",
                    page.as_uri() + (f"#{fragment}" if fragment else ""))
    assert png.exists(), done.stderr[-2000:]
    assert console_errors(done) == []
    return png_pixels(png)


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


def text_of(html: str) -> str:
    """The visible text of an HTML fragment (tags dropped, entities decoded)."""
    return unescape(re.sub(r"<[^>]+>", "", html))

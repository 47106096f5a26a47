"""The HTML reports' Jinja2 templates (package data in ``recstore/templates/``).

A report is one self-contained file: styles and scripts inline, data in a
``<script type="application/json">`` block, no network. Its Content-Security-Policy allows
exactly the page's own script (by SHA-256), so a hostile string in a record cannot run as code
even if it reached the markup. Jinja2 is imported on first use: the CLI starts without it.

Example:
    >>> print(json_block({"a": "</script><b>"}))
    {"a":"\\u003c/script\\u003e\\u003cb\\u003e"}
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import cache
from importlib.resources import files
from typing import Any

__all__ = ["cell", "json_block", "render_page"]


def cell(value: Any) -> str:
    """A value as table text: ``None`` is an em dash, booleans are yes/no."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def json_block(value: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: ASCII only (lone
    surrogates survive), other values as :mod:`recstore.jsonout` writes them (timestamps in UTC
    with ``Z``), and ``<``, ``>``, ``&`` escaped so no text can close the element."""
    from recstore.jsonout import json_default

    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=json_default)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@cache
def _environment() -> Any:
    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("recstore", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["cell"] = cell
    env.filters["json_block"] = lambda v: Markup(json_block(v))
    return env


def render_page(template: str, *, script: str | None = None, **context: Any) -> str:
    """Render ``template`` with ``context``; ``script`` names a file in the templates folder
    that is inlined as the page's one script and allowed by hash in ``csp``."""
    from markupsafe import Markup

    code = files("recstore").joinpath("templates", script).read_text("utf-8") if script else ""
    digest = base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode("ascii")
    script_src = f"'sha256-{digest}'" if script else "'none'"
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
           f"script-src {script_src}")
    page = _environment().get_template(template)
    return page.render(csp=csp, script=Markup(code), **context)

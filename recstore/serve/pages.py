"""The HTML pages: each one renders the :mod:`recstore.serve.data` call its ``/api`` twin
returns, with the Jinja2 templates in ``recstore/templates/serve_*.html.j2`` (autoescaped;
stored strings are never marked safe). Errors in a filter or a query show inline on the page.
"""

from __future__ import annotations

from html import unescape
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from recstore.errors import InputError, RecstoreError
from recstore.serve import data
from recstore.templating import json_block

__all__ = ["page_routes"]


def _env() -> Any:
    from recstore.templating import _environment

    return _environment()


def _page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = _env().get_template(template).render(json_block=json_block, **context)
    return HTMLResponse(html, status_code=status)


def _runs(request: Request) -> Response:
    q = request.query_params
    text = q.get("filter", "")
    if q.get("facet"):
        text = data.facet_filter(text, q["facet"], q.get("value"))
    error, page, facets = None, None, {}
    sort, descending = q.get("sort", "started"), q.get("order", "desc") != "asc"
    try:
        page, facets = data.runs_and_facets(request.app.state.store, text, sort, descending,
                                            q.get("after") or None)
    except InputError as exc:
        error = str(exc)
    return _page("serve_runs.html.j2", title="runs", text=text, error=error, page=page,
                 facets=facets, sort=sort, descending=descending, sorts=list(data.SORTS))


def _run(request: Request) -> Response:
    detail = data.run_detail(request.app.state.store, request.path_params["run_key"])
    return _page("serve_run.html.j2", title=detail["run"]["run_key"], d=detail,
                 timeline=_timeline(detail))


def _timeline(detail: dict) -> dict:
    """Waterfall geometry: each request as a bar from its time to the next request's (or the
    run's end), and its output items as an interval over the run's items."""
    run, requests = detail["run"], detail["requests"]
    start, end = run.get("started"), run.get("completed")
    times = [r.get("timestamp") for r in requests]
    known = [t for t in [start, *times, end] if t is not None]
    items = max(1, len(detail["items"]))
    bars = []
    if known:
        t0 = min(known)
        span = max(1.0, (max(known) - t0).total_seconds() * 1000)
        for i, req in enumerate(requests):
            at = times[i] or t0
            nxt = next((t for t in times[i + 1:] if t is not None), end or at)
            left = (at - t0).total_seconds() * 1000 / span * 100
            width = max(0.5, (nxt - at).total_seconds() * 1000 / span * 100)
            bars.append({"label": f"#{req['request_index']} {req.get('agent') or ''} "
                                  f"{req.get('model') or ''}",
                         "left": round(left, 2), "width": round(min(width, 100 - left), 2),
                         "ms": round((nxt - at).total_seconds() * 1000),
                         "item_left": round((req.get("output_start") or 0) / items * 100, 2),
                         "item_width": round(max(0.5, ((req.get("output_end") or 0)
                                                       - (req.get("output_start") or 0))
                                                 / items * 100), 2),
                         "interval": f"items[{req.get('output_start')}:{req.get('output_end')}]"})
        return {"bars": bars, "ms": round(span)}
    return {"bars": bars, "ms": 0}


def _sql(request: Request) -> Response:
    q = request.query_params
    text, result, error = q.get("q", ""), None, None
    if text.strip():
        try:
            result = data.console_query(request.app.state.store, text)
        except RecstoreError as exc:
            error = str(exc)
    return _page("serve_sql.html.j2", title="SQL", text=text, result=result, error=error,
                 saved=data.saved_queries())


def _compare(request: Request) -> Response:
    from recstore.compare.bulk import bulk_compare
    from recstore.compare.report import render_html

    q = request.query_params
    baseline, candidate = q.get("baseline", ""), q.get("candidate", "")
    if not (baseline or candidate):
        return _page("serve_compare.html.j2", title="compare", q=q, error=None,
                     comparisons=data.comparisons(request.app.state.store))
    store = request.app.state.store
    try:
        comparison = bulk_compare(store, baseline or None, candidate or None,
                                  pair_by=q.get("pair_by") or "metadata.caseId", record=False)
    except RecstoreError as exc:
        return _page("serve_compare.html.j2", title="compare", q=q, error=str(exc),
                     comparisons=data.comparisons(store), status=400)
    html = render_html(comparison, store, run_link="/runs/")
    # the report carries its own CSP (its one inline script, by hash): send it as the header
    csp = unescape(html.split('http-equiv="Content-Security-Policy" content="', 1)[1].split('"', 1)[0])
    return HTMLResponse(html, headers={"content-security-policy": csp})


def _pair(request: Request) -> Response:
    q = request.query_params
    p = data.pair(request.app.state.store, q.get("baseline", ""), q.get("candidate", ""))
    return _page("serve_pair.html.j2", title="pair", p=p)


def _sweeps(request: Request) -> Response:
    return _page("serve_sweeps.html.j2", title="sweeps",
                 sweeps=data.sweeps(request.app.state.store), sweep=None)


def _sweep(request: Request) -> Response:
    sweep = data.sweep_detail(request.app.state.store, request.path_params["name"])
    runs = sweep["runs"]
    most = max([1] + [r["case_count"] or 0 for r in runs])
    trend = [{"n": r["run_number"], "pass": r["pass_count"] or 0, "warn": r["warn_count"] or 0,
              "fail": r["fail_count"] or 0, "h": 100 / most} for r in runs]
    return _page("serve_sweeps.html.j2", title=f"sweep {sweep['name']}", sweeps=None,
                 sweep=sweep, trend=trend)


def _rejects(request: Request) -> Response:
    return _page("serve_rejects.html.j2", title="rejects", r=data.rejects(request.app.state.store))


def page_routes() -> list[Route]:
    """Every HTML page."""
    return [
        Route("/", _runs),
        Route("/runs/{run_key:path}", _run),
        Route("/sql", _sql),
        Route("/compare", _compare),
        Route("/pair", _pair),
        Route("/sweeps", _sweeps),
        Route("/sweeps/{name}", _sweep),
        Route("/rejects", _rejects),
    ]

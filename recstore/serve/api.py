"""The JSON API (``/api/...``) and the live-ingest endpoints (``/v1/...``).

Every page's data is here as JSON, from the same :mod:`recstore.serve.data` call the page makes.
Handlers that touch the store are plain functions: Starlette runs them in its thread pool, so
DuckDB work never blocks the event loop. Errors are ``{"error": "..."}`` with 400 (bad input),
404 (no such run) or 413 (body too large).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from recstore.jsonout import json_default
from recstore.serve import data
from recstore.serve.ingest import ingest_body, otlp_body
from recstore.serve.security import BodyTooLarge

__all__ = ["api_routes", "json_response"]


def json_response(value: Any, status: int = 200) -> Response:
    body = json.dumps(value, default=json_default, ensure_ascii=False)
    return Response(body, status_code=status, media_type="application/json")


def _store(request: Request):
    return request.app.state.store


def _runs(request: Request) -> Response:
    q = request.query_params
    page = data.runs_page(_store(request), q.get("filter", ""), q.get("sort", "started"),
                          q.get("order", "desc") != "asc", q.get("after") or None,
                          int(q.get("limit", data.PAGE_ROWS)))
    return json_response(page)


def _facets(request: Request) -> Response:
    return json_response(data.facets(_store(request), request.query_params.get("filter", "")))


def _run(request: Request) -> Response:
    return json_response(data.run_detail(_store(request), request.path_params["run_key"]))


def _record(request: Request) -> Response:
    return json_response(_store(request).get_record(request.path_params["run_key"]))


def _query(request: Request) -> Response:
    q = request.query_params
    params = dict(p.split("=", 1) for p in q.getlist("param") if "=" in p)
    result = data.console_query(_store(request), q.get("q", ""), params,
                                max_rows=int(q.get("max_rows", data.QUERY_MAX_ROWS)),
                                timeout=float(q.get("timeout", data.QUERY_TIMEOUT)))
    if q.get("format") == "csv":
        return Response(_csv(result), media_type="text/csv",
                        headers={"content-disposition": 'attachment; filename="query.csv"'})
    headers = ({"content-disposition": 'attachment; filename="query.json"'}
               if q.get("download") else None)
    response = json_response(result)
    if headers:
        response.headers.update(headers)
    return response


def _csv(result: dict) -> str:
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(result["columns"])
    for row in result["rows"]:
        writer.writerow(["" if v is None else
                         json.dumps(v, default=json_default) if isinstance(v, dict | list) else v
                         for v in row])
    return out.getvalue()


def _queries(request: Request) -> Response:
    return json_response(data.saved_queries())


def _compare(request: Request) -> Response:
    from recstore.compare.bulk import bulk_compare

    q = request.query_params
    comparison = bulk_compare(_store(request), q.get("baseline") or None,
                              q.get("candidate") or None,
                              pair_by=q.get("pair_by") or "metadata.caseId",
                              record=False, allow_empty=True)
    return json_response({"aggregate": comparison.aggregate,
                          "unpaired": comparison.unpaired})


def _comparisons(request: Request) -> Response:
    return json_response(data.comparisons(_store(request)))


def _pair(request: Request) -> Response:
    q = request.query_params
    return json_response(data.pair(_store(request), q.get("baseline", ""),
                                   q.get("candidate", "")))


def _sweeps(request: Request) -> Response:
    return json_response(data.sweeps(_store(request)))


def _sweep(request: Request) -> Response:
    return json_response(data.sweep_detail(_store(request), request.path_params["name"]))


def _rejects(request: Request) -> Response:
    return json_response(data.rejects(_store(request)))


async def _cli(request: Request) -> Response:
    """Run a store command for another shell on the held store (``recstore.serve.client``);
    commands run in parallel, each with its output captured in its own thread."""
    from recstore.serve.capture import run_command
    from recstore.serve.client import CLI_KEY_HEADER, FORWARDED, refusal  # paths are absolute

    key = request.headers.get(CLI_KEY_HEADER, "")
    if not secrets.compare_digest(key.encode(), request.app.state.cli_key.encode()):
        return json_response({"error": "commands need the key in the store's owner-only "
                              "<db>.serve.json (run recstore as the store's owner)"}, 403)
    try:
        asked = json.loads(await request.body())
        command, args = asked["command"], [str(a) for a in asked["args"]]
    except (ValueError, KeyError, TypeError):
        return json_response({"error": "expected {\"command\": ..., \"args\": [...]}"}, 400)
    why = (f"the server does not run `recstore {command}`" if command not in FORWARDED
           else refusal(command, args))
    if why is not None:
        return json_response({"error": why}, 400)
    store = request.app.state.store
    return json_response(await run_in_threadpool(
        run_command, ["--db", str(store.path), command, *args], {"served_store": store},
        asked.get("columns")))


def _status(request: Request) -> Response:
    store = _store(request)
    return json_response({"store": str(store.path), "last_seq": store.last_seq(),
                          "version": request.app.state.version})


async def _read_body(request: Request) -> bytes:
    try:
        return await request.body()
    except BodyTooLarge as exc:
        raise _TooLarge(str(exc)) from None


class _TooLarge(Exception):
    pass


def _ingest_route(ingest) -> Any:
    async def endpoint(request: Request) -> Response:
        try:
            body = await _read_body(request)
        except _TooLarge as exc:
            return json_response({"error": str(exc)}, 413)
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        gzipped = request.headers.get("content-encoding", "").lower() == "gzip"
        summary = await run_in_threadpool(
            ingest, request.app.state.store, Path(request.app.state.spool), body, kind, gzipped,
            request.headers.get("x-request-id"))
        return json_response(summary)

    return endpoint


def api_routes() -> list[Route]:
    """Every ``/api`` and ``/v1`` route."""
    return [
        Route("/api/status", _status),
        Route("/api/runs", _runs),
        Route("/api/facets", _facets),
        Route("/api/runs/{run_key:path}/record", _record),
        Route("/api/runs/{run_key:path}", _run),
        Route("/api/query", _query),
        Route("/api/queries", _queries),
        Route("/api/compare", _compare),
        Route("/api/comparisons", _comparisons),
        Route("/api/pair", _pair),
        Route("/api/sweeps", _sweeps),
        Route("/api/sweeps/{name}", _sweep),
        Route("/api/rejects", _rejects),
        Route("/api/cli", _cli, methods=["POST"]),
        Route("/v1/runrecords", _ingest_route(ingest_body), methods=["POST"]),
        Route("/v1/traces", _ingest_route(otlp_body), methods=["POST"]),
    ]

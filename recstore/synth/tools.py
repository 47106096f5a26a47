"""The corpus's deterministic tools: each output is a function of its arguments, so a replay
with recorded outputs and a fresh run agree."""

from __future__ import annotations

import json
import zlib
from typing import Any

from recstore.runtime import (
    Tool,
)


def _digest(args: Any) -> int:
    """A stable number derived from the arguments (tools are pure functions of them)."""
    return zlib.crc32(json.dumps(args, sort_keys=True).encode("ascii"))


def _obj(properties: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


_STR, _NUM, _INT = {"type": "string"}, {"type": "number"}, {"type": "integer"}


def _lookup_customer(args: dict, ctx: Any) -> dict:
    h = _digest(args)
    return {"customerId": args["customerId"], "tier": ("free", "pro", "enterprise")[h % 3],
            "openTickets": h % 5, "since": f"20{18 + h % 8}-0{1 + h % 9}-1{h % 10}"}


def _search_docs(args: dict, ctx: Any) -> list:
    h = _digest(args)
    return [{"docId": f"KB-{(h >> i) % 9000 + 1000}", "title": f"{args['query'].title()} ({i + 1})",
             "score": round(0.95 - i * 0.11 - (h % 7) / 100, 2)} for i in range(args.get("limit", 3) % 6)]


def _get_invoice(args: dict, ctx: Any) -> dict:
    h = _digest(args)
    return {"invoiceId": args["invoiceId"], "amount": (h % 90000) / 100, "currency": "EUR",
            "status": ("paid", "open", "overdue")[h % 3]}


def _refund(args: dict, ctx: Any) -> dict:
    return {"refundId": f"RF-{_digest(args) % 100000:05d}", "accepted": True, "amount": args["amount"]}


def _run_diagnostic(args: dict, ctx: Any) -> dict:
    h = _digest(args)
    return {"target": args["target"], "latencyMs": h % 400, "packetLoss": (h % 7) / 100,
            "healthy": h % 4 != 0}


def _web_search(args: dict, ctx: Any) -> list:
    h = _digest(args)
    return [f"https://example.org/{args['q'].replace(' ', '-').lower()}/{(h >> i) % 997}" for i in range(3)]


_PARAGRAPH = ("Section {n}. The committee reviewed the figures for period {n} and found them "
              "consistent with the ledger; variance stayed within the agreed tolerance. ")


def _fetch_document(args: dict, ctx: Any) -> dict:
    h = _digest(args)
    rows = [{"row": i, "value": (h * (i + 1)) % 100003, "label": f"item-{i:05d}"}
            for i in range(args.get("maxRows", 5))]
    document = {"url": args["url"], "rows": rows, "truncated": False}
    if args.get("full"):  # the whole text: a large output (tens of kilobytes)
        document["content"] = "".join(_PARAGRAPH.format(n=i) for i in range(80 + h % 320))
    return document


def _get_report(args: dict, ctx: Any) -> dict:
    h = _digest(args)
    return {"reportId": args["reportId"], "revenue": h % 10_000_000, "margin": (h % 400) / 1000,
            "currency": "USD"}


def _get_quote(args: dict, ctx: Any) -> dict:
    h = _digest(args)
    return {"symbol": args["symbol"], "price": (h % 50000) / 100, "change": ((h % 200) - 100) / 100}


def _echo(args: Any, ctx: Any) -> Any:
    return args


def _get_time(args: dict, ctx: Any) -> str:
    return f"{args.get('tz', 'UTC')} 2026-03-01T{_digest(args) % 24:02d}:00:00"


_TOOLS = {
    "lookup_customer": ("Look up a customer by id.", _obj({"customerId": _STR}, ["customerId"]), _lookup_customer),
    "search_docs": ("Search the knowledge base.", _obj({"query": _STR, "limit": _INT}, ["query"]), _search_docs),
    "get_invoice": ("Fetch an invoice.", _obj({"invoiceId": _STR}, ["invoiceId"]), _get_invoice),
    "refund": ("Refund an amount to a customer.", _obj({"customerId": _STR, "amount": _NUM}, ["customerId", "amount"]), _refund),
    "run_diagnostic": ("Probe a host.", _obj({"target": _STR}, ["target"]), _run_diagnostic),
    "web_search": ("Search the web.", _obj({"q": _STR}, ["q"]), _web_search),
    "fetch_document": ("Fetch a document as rows, or in full.",
                       _obj({"url": _STR, "maxRows": _INT, "full": {"type": "boolean"}}, ["url"]), _fetch_document),
    "get_finance_report": ("Get a finance report.", _obj({"reportId": _STR}, ["reportId"]), _get_report),
    "get_stock_quote": ("Get a stock quote.", _obj({"symbol": _STR}, ["symbol"]), _get_quote),
    "echo": ("Echo the arguments back.", {}, _echo),
    "get_time": ("Current time in a zone.", _obj({"tz": _STR}, []), _get_time),
}


def _tool(name: str) -> Tool:
    description, schema, func = _TOOLS[name]
    return Tool(name, description, schema, func)

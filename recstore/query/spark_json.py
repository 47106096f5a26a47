"""Spark SQL for DuckDB's JSON functions and UTC time casts, giving DuckDB's results.

sqlglot prints DuckDB ``json_extract`` and ``->>`` both as ``GET_JSON_OBJECT``, which returns a
string member without its quotes and a JSON ``null`` as NULL; it keeps ``json_type`` and
``json_exists`` (Spark has neither), turns ``CAST(x AS JSON)`` into ``TO_JSON(x)`` (which quotes
a string) and ``json_object`` into syntax Spark rejects. These rules rewrite each into Spark
expressions with DuckDB's meaning, for a JSON path given as a literal (the store's views and the
DSL only use literal paths; a computed path is left as sqlglot prints it):

* ``json_type(t, p)``: Spark's VARIANT type of the member (``parse_json``, ``variant_get``,
  ``schema_of_variant``) named as DuckDB names it: ``VARCHAR``, ``BOOLEAN``, ``NULL``,
  ``OBJECT``, ``ARRAY``, and for numbers ``UBIGINT`` (an integer from 0 to 2^64-1), ``BIGINT``
  (a negative integer from -2^63) or ``DOUBLE`` (anything else); NULL when the member is
  absent. An integer is told from ``1.0`` by its text (VARIANT stores both as decimals).
* ``json_extract(t, p)``: the member's JSON text: ``GET_JSON_OBJECT`` (which keeps key order and
  prints numbers as DuckDB does), except a string, which is quoted and escaped as JSON, and a
  JSON null, which is ``null``.
* ``json_exists(t, p)``: the VARIANT member is not SQL NULL (a JSON null exists).
* ``CAST(x AS JSON)``: ``CAST(x AS STRING)``, the text as given (DuckDB keeps it; Spark has no
  JSON type).
* ``json_object(k, v, ...)``: ``TO_JSON(NAMED_STRUCT(k, v, ...))`` (scalar values).
* ``timezone('UTC', TRY_CAST(s AS TIMESTAMPTZ))``: ``CAST(TRY_CAST(s AS TIMESTAMP) AS
  TIMESTAMP_NTZ)`` — the UTC wall time, with the session time zone UTC (as recstore's Spark
  sessions set it) — for a text that starts with a whole date (Spark also reads ``2026`` or
  ``+002026-03-01``, DuckDB does not).
* ``date_diff('millisecond', a, b)``: DuckDB counts millisecond boundaries crossed, so it is the
  difference of both times floored to milliseconds (Spark's difference truncates the interval).

tests/fixtures/spark/json_cases.tsv holds the payloads and paths each rule is checked on against
DuckDB (one case per line).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from recstore.query.views import Catalog

__all__ = ["spark_json"]

_DUCKDB = Dialect.get_or_raise("duckdb")
_UBIGINT_MAX = 2**64 - 1
_BIGINT_MIN = -(2**63)
# What DuckDB reads as a time starts with a whole date.
_FULL_DATE = r"^\s*-?[0-9]+-[0-9]+-[0-9]+"


def _call(name: str, *args: exp.Expr) -> exp.Expr:
    """A Spark function call sqlglot prints as it is (its own nodes for PARSE_JSON and
    friends drop or rename them when generating Spark)."""
    return exp.Anonymous(this=name, expressions=list(args))


def _string(text: str) -> exp.Literal:
    return exp.Literal.string(text)


def _spark_path(path: exp.Expr) -> exp.Expr | None:
    """A DuckDB JSON path (literal or parsed) as a Spark path literal; None when computed."""
    if isinstance(path, exp.Literal) and path.is_string:
        path = _DUCKDB.to_json_path(path)  # type: ignore[assignment] # None: not a path
    if not isinstance(path, exp.JSONPath):
        return None
    return exp.Literal.string(exp.JSONPath(expressions=path.expressions).sql("spark")[1:-1]
                              .replace("\\'", "'"))


def _member(text: exp.Expr, path: exp.Expr) -> exp.Expr:
    """The member as a VARIANT: SQL NULL when absent, a VARIANT null for JSON null."""
    return _call("VARIANT_GET", _call("PARSE_JSON", text.copy()), path.copy())


def _member_text(text: exp.Expr, path: exp.Expr) -> exp.Expr:
    return _call("GET_JSON_OBJECT", text.copy(), path.copy())


def _json_type(text: exp.Expr, path: exp.Expr) -> exp.Expr:
    member = _member(text, path)
    kind = _call("SCHEMA_OF_VARIANT", member)
    digits = _member_text(text, path)
    number = exp.TryCast(this=digits.copy(), to=exp.DataType.build("DECIMAL(38, 0)"), safe=True)
    integral = exp.RegexpLike(this=digits, expression=_string("^-?[0-9]+$"))
    return (
        exp.Case()
        .when(exp.Is(this=member, expression=exp.Null()), exp.Null())
        .when(exp.EQ(this=kind, expression=_string("VOID")), _string("NULL"))
        .when(exp.EQ(this=kind.copy(), expression=_string("STRING")), _string("VARCHAR"))
        .when(exp.EQ(this=kind.copy(), expression=_string("BOOLEAN")), _string("BOOLEAN"))
        .when(_call("STARTSWITH", kind.copy(), _string("OBJECT")), _string("OBJECT"))
        .when(_call("STARTSWITH", kind.copy(), _string("ARRAY")), _string("ARRAY"))
        .when(
            exp.and_(integral, exp.Between(this=number, low=exp.Literal.number(0),
                                           high=exp.Literal.number(_UBIGINT_MAX))),
            _string("UBIGINT"),
        )
        .when(
            exp.and_(integral.copy(), exp.Between(this=number.copy(),
                                                  low=exp.Literal.number(_BIGINT_MIN),
                                                  high=exp.Literal.number(-1))),
            _string("BIGINT"),
        )
        .else_(_string("DOUBLE"))
    )


def _json_extract(text: exp.Expr, path: exp.Expr) -> exp.Expr:
    kind = _json_type(text, path)
    return (
        exp.Case(this=kind)
        .when(_string("VARCHAR"), _call("TO_JSON", _member(text, path)))
        .when(_string("NULL"), _string("null"))
        .else_(_member_text(text, path))
    )


def _is_utc_timestamptz(node: exp.Anonymous) -> exp.Cast | None:
    """The text cast in ``timezone('UTC', TRY_CAST(text AS TIMESTAMPTZ))``, else None."""
    if node.name.lower() != "timezone" or len(node.expressions) != 2:
        return None
    zone, value = node.expressions
    if not (isinstance(zone, exp.Literal) and zone.name.upper() == "UTC"):
        return None
    if isinstance(value, exp.Cast) and value.to.is_type(exp.DataType.Type.TIMESTAMPTZ):
        return value
    return None


def _utc_wall_time(cast: exp.Cast) -> exp.Expr:
    to_timestamp = cast.copy()
    to_timestamp.set("to", exp.DataType.build("TIMESTAMP", dialect="spark"))
    wall = exp.Cast(this=to_timestamp, to=exp.DataType.build("TIMESTAMP_NTZ", dialect="spark"))
    # Spark also reads a year alone, a year and month, or a signed six-digit year
    full_date = exp.RegexpLike(this=cast.this.copy(), expression=_string(_FULL_DATE))
    return exp.Case().when(full_date, wall)


def _millisecond_diff(node: exp.DateDiff) -> exp.Expr:
    def floor_ms(value: exp.Expr) -> exp.Expr:
        micros = _call("UNIX_MICROS", exp.Cast(this=value.copy(),
                                               to=exp.DataType.build("TIMESTAMP")))
        return exp.Floor(this=exp.Div(this=micros, expression=exp.Literal.number(1000)))

    return exp.Cast(this=exp.Sub(this=floor_ms(node.this), expression=floor_ms(node.expression)),
                    to=exp.DataType.build("BIGINT"))


def _rewrite(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.JSONType | exp.JSONExtract) and node.expression is not None:
        path = _spark_path(node.expression)
        if path is None:
            return node
        build = _json_type if isinstance(node, exp.JSONType) else _json_extract
        return build(node.this, path)
    if isinstance(node, exp.Anonymous) and node.name.lower() == "json_exists":
        path = _spark_path(node.expressions[1]) if len(node.expressions) == 2 else None
        if path is None:
            return node
        return exp.Not(this=exp.Is(this=_member(node.expressions[0], path),
                                   expression=exp.Null()))
    if isinstance(node, exp.Cast) and node.to.is_type(exp.DataType.Type.JSON):
        return exp.Cast(this=node.this, to=exp.DataType.build("VARCHAR"))
    if isinstance(node, exp.JSONObject):
        pairs = [part for kv in node.expressions for part in (kv.this, kv.expression)]
        return _call("TO_JSON", _call("NAMED_STRUCT", *pairs))
    if isinstance(node, exp.Anonymous):
        cast = _is_utc_timestamptz(node)
        if cast is not None:
            return _utc_wall_time(cast)
    if (isinstance(node, exp.DateDiff) and node.args.get("date_part_boundary")
            and node.text("unit").upper() == "MILLISECOND"):
        return _millisecond_diff(node)
    return node


def spark_json(tree: exp.Expr, dialect: str, catalog: Catalog | None) -> exp.Expr:
    """The dialect rule (see :mod:`recstore.query.dialects`): DuckDB JSON functions and UTC
    casts as Spark expressions with DuckDB's results (module docstring)."""
    if dialect != "spark":
        return tree
    # children first, so an argument holding JSON functions is rewritten before it is copied
    for node in reversed(list(tree.walk())):
        new = _rewrite(node)
        if new is not node:
            if node is tree:
                return new
            node.replace(new)
    return tree

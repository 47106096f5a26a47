"""Print a compiled query for another engine, fixing what sqlglot's transpiler gets wrong.

Each rule is a pure function ``rule(tree, dialect, catalog) -> tree`` (sqlglot's optimizer style)
applied to a copy of the DuckDB tree before generating the target dialect. The wrong cases were
found by running the output (Spark 4) or reading each engine's reference (tech-notes §3.3).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from recstore.errors import InputError
from recstore.query import DIALECTS as _DIALECTS
from recstore.query.spark_json import spark_json
from recstore.query.views import Catalog

DIALECTS = _DIALECTS  # the engines :func:`to_dialect` prints for

Rule = Callable[[exp.Expr, str, Catalog | None], exp.Expr]


def list_length(tree: exp.Expr, dialect: str, catalog: Catalog | None) -> exp.Expr:
    """DuckDB ``len(list)`` parses as string ``LENGTH``; Spark, Trino and ClickHouse then reject
    it on an array. Rewrite it to ``array_length`` when the argument is a list (types from the
    catalogue; a literal list or list function counts too)."""
    if dialect == "duckdb" or not any(True for _ in tree.find_all(exp.Length)):
        return tree
    typed = _annotated(tree, catalog)
    for original, annotated in zip(tree.find_all(exp.Length), typed.find_all(exp.Length),
                                   strict=False):
        arg_type = annotated.this.type
        if arg_type is not None and arg_type.is_type(exp.DataType.Type.ARRAY):
            original.replace(exp.ArraySize(this=original.this.copy()))
    return tree


def percentile(tree: exp.Expr, dialect: str, catalog: Catalog | None) -> exp.Expr:
    """``quantile_cont(x, q)`` is emitted as ``PERCENTILE_CONT(x, q)``, valid in none of the
    targets: Spark has exact ``PERCENTILE(x, q)``, ClickHouse ``quantile(q)(x)``, Postgres the
    ordered-set form, Trino ``approx_percentile`` and BigQuery ``APPROX_QUANTILES``."""
    for node in list(tree.find_all(exp.PercentileCont)):
        value, fraction = node.this, node.expression
        if fraction is None or isinstance(node.parent, exp.WithinGroup):
            continue
        if dialect == "spark":
            node.replace(exp.Anonymous(this="PERCENTILE", expressions=[value, fraction]))
        elif dialect == "clickhouse":
            node.replace(exp.Quantile(this=value, quantile=fraction))
        elif dialect == "trino":
            node.replace(exp.ApproxQuantile(this=value, quantile=fraction))
        elif dialect == "bigquery" and fraction.is_number:
            # PERCENTILE_CONT is analytic-only there; approximate quantiles at 0.1% steps.
            steps = 1000
            offset = round(float(fraction.name) * steps)
            quantiles = exp.func("APPROX_QUANTILES", value, exp.Literal.number(steps))
            node.replace(exp.Bracket(this=quantiles, expressions=[exp.Literal.number(offset)],
                                     offset=0, safe=False))
        elif dialect == "postgres":
            node.replace(exp.WithinGroup(
                this=exp.PercentileCont(this=fraction),
                expression=exp.Order(expressions=[exp.Ordered(this=value)])))
    return tree


def safe_casts(tree: exp.Expr, dialect: str, catalog: Catalog | None) -> exp.Expr:
    """``TRY_CAST`` must stay a try-cast: Spark 4 runs in ANSI mode, where a plain ``CAST`` of a
    non-numeric JSON value fails the whole query instead of giving NULL."""
    for node in tree.find_all(exp.TryCast):
        node.set("safe", True)
    return tree


_INTEGER_TYPES = (exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
                  exp.DataType.Type.BIGINT)


def double_math(tree: exp.Expr, dialect: str, catalog: Catalog | None) -> exp.Expr:
    """Spark's ``FLOOR`` of a DOUBLE is a BIGINT, which fails under ANSI mode past 2^63 (DuckDB
    keeps a DOUBLE), and its cast of a DOUBLE to an integer truncates (DuckDB rounds half away
    from zero). On Spark, ``floor(x)`` of a DOUBLE becomes ``x - pmod(x, 1)`` and a cast of a
    DOUBLE to an integer type casts ``round(x)``."""
    if dialect != "spark" or not any(True for _ in tree.find_all(exp.Floor, exp.Cast)):
        return tree
    typed = _annotated(tree, catalog)
    pairs = zip(tree.find_all(exp.Floor, exp.Cast), typed.find_all(exp.Floor, exp.Cast),
                strict=False)
    for original, annotated in list(pairs):
        arg_type = annotated.this.type
        if arg_type is None or not arg_type.is_type(exp.DataType.Type.DOUBLE):
            continue
        if isinstance(original, exp.Floor) and original.args.get("decimals") is None:
            value = original.this
            original.replace(exp.Paren(this=exp.Sub(this=value.copy(), expression=exp.Anonymous(
                this="PMOD", expressions=[value.copy(), exp.Literal.number(1)]))))
        elif isinstance(original, exp.Cast) and original.to.is_type(*_INTEGER_TYPES):
            original.set("this", exp.Round(this=original.this.copy()))
    return tree


# DuckDB functions Spark knows by another name: arg_min/arg_max that keep a NULL value of the row
# found (Spark's min_by/max_by do too; both skip rows whose ordering value is NULL), and the
# 64-bit hash (Spark's HASH is a 32-bit murmur3: a fingerprint compared by it would take a
# 2^-32 chance of calling two different entries equal, against DuckDB's 2^-64).
_SPARK_NAMES = {"arg_min_null": "MIN_BY", "arg_max_null": "MAX_BY", "hash": "XXHASH64"}


def spark_names(tree: exp.Expr, dialect: str, catalog: Catalog | None) -> exp.Expr:
    """DuckDB functions that Spark spells otherwise (:data:`_SPARK_NAMES`): ``arg_min_null``
    (the comparison's first point of divergence) and ``hash`` (its field fingerprints)."""
    if dialect != "spark":
        return tree
    for node in list(tree.find_all(exp.Anonymous)):
        name = _SPARK_NAMES.get(node.name.lower())
        if name is not None:
            node.replace(exp.Anonymous(this=name, expressions=node.expressions))
    return tree


RULES: tuple[Rule, ...] = (list_length, percentile, safe_casts, double_math, spark_names,
                           spark_json)


def to_dialect(tree: exp.Expr, dialect: str, catalog: Catalog | None = None,
               pretty: bool = False) -> str:
    """SQL text of ``tree`` (DuckDB dialect) for ``dialect``, after the rewrite rules.

    Example:
        >>> import sqlglot
        >>> to_dialect(sqlglot.parse_one("SELECT len([1, 2])", read="duckdb"), "spark")
        'SELECT SIZE(ARRAY(1, 2))'
    """
    if dialect not in DIALECTS:
        raise InputError(f"unknown dialect {dialect!r}; choose one of {', '.join(DIALECTS)}",
                         param="dialect")
    tree = tree.copy()
    for rule in RULES:
        tree = rule(tree, dialect, catalog)
    return tree.sql(dialect=dialect, pretty=pretty)


def _annotated(tree: exp.Expr, catalog: Catalog | None) -> exp.Expr:
    """A typed copy of ``tree`` whose nodes walk in the same order as the original."""
    schema = catalog.sqlglot_schema() if catalog else None
    copy = tree.copy()
    try:
        copy = qualify(copy, schema=schema, dialect="duckdb", validate_qualify_columns=False,
                       expand_stars=False, quote_identifiers=False)
    except Exception:  # noqa: BLE001 - untyped columns just stay untyped
        copy = tree.copy()
    return annotate_types(copy, schema=schema, dialect="duckdb")

"""The everyday filter-DSL queries written as SQL without sqlglot (issue 27.1: the DSL compiler
builds a sqlglot tree, and importing sqlglot cost a first-run DSL query more than DuckDB).

:func:`plain_dsl_sql` reads only this part of the DSL (see :mod:`recstore.query.dsl`)::

    [view ["where"]] [condition] ["fields" ("*" | column ("," column)*)]
    ["order" "by" column ["asc"|"desc"] ("," ...)*] ["limit" INT]
    condition := and_c ("or" and_c)*;  and_c := not_c ("and" not_c)*
    not_c     := "not" not_c | "(" condition ")" | predicate
    predicate := field cmp literal | literal cmp field | field "is" ["not"] "null"
               | column ["not"] "in" "(" literal, ... ")" | column ["not"] ("like"|"ilike") STRING
               | boolean column | relation "." ("any"|"none") "(" [condition] ")"
    field     := column | json_column "." key ("." key)* | relation ".count" "(" [condition] ")"

with columns of the view by name (or the DSL's aliases), relations of runs (``tool_calls``,
``visits`` ...: a condition inside reads the related view), JSON keys of letters, digits and
``_``, and a literal only of the field's kind: a single-quoted string of printable ASCII for
text (and for a time or JSON key), a number for numbers (and counts and JSON keys), a relative
time such as ``-7d`` for times, true or false for booleans, null for any. Anything else
(parameters, ``all()``, ``run.field``, casts, comments) is None: the DSL compiler takes it, with
its own errors. The SQL is the text the compiler prints for the same query at the same ``now``
(tests/test_plain_dsl.py checks they are equal for generated queries), and it runs only when
:mod:`recstore.query.plain_sql` accepts it too, the DSL's relation, JSON and time forms included.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import NamedTuple

from recstore.query.sqltext import (
    DSL_KEYWORDS,
    DURATION,
    FIELD_ALIASES,
    MIRRORED,
    NUMERIC_TYPE,
    RELATION_ALIASES,
    relation_alias,
    scan,
    shifted,
    timestamp_text,
)
from recstore.query.views import Catalog, Column, View
from recstore.store.db import row_limit

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\n]+)
  | (?P<duration>""" + DURATION + r""")(?![\w.])
  | (?P<number>[0-9]+(?:\.[0-9]+)?)(?![\w.])
  | (?P<string>'(?:[ -&(-~]|'')*')
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)(?!\w)
  | (?P<op><=|>=|!=|<>|=|<|>)
  | (?P<punct>[(),.*])
""", re.VERBOSE)
_COMPARISONS = {"=": "=", "!=": "<>", "<>": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_CLAUSES = ("where", "fields", "order", "limit", "")
_TIME_TYPES = ("TIMESTAMP", "DATE")
_RELATION_METHODS = ("any", "none", "count")


class _Token(NamedTuple):
    kind: str  # keyword | name | duration | number | string | op | punct | end
    value: str


class _Scope(NamedTuple):
    """The view names resolve against, and its name in the SQL."""

    view: View
    alias: str


class _Field(NamedTuple):
    """A compared operand as printed, with what a comparison needs to know of it."""

    sql: str
    type: str  # the column's DuckDB type; JSON for a key; BIGINT for a count
    kind: str  # column | json | count | predicate (relation.any / none)
    bare: str = ""  # a JSON key's extraction without the parentheses it is compared in


class _NotPlain(Exception):
    """The text is not in the plain part of the DSL (the compiler reads it)."""


def plain_dsl_sql(text: str, catalog: Catalog, now: datetime | None = None) -> str | None:
    """The DuckDB SQL the DSL compiler prints for ``text`` (relative times anchored at ``now``,
    naive UTC, by default the clock), when ``text`` is in the plain part of the DSL (see the
    module docstring); None otherwise, never an error."""
    tokens = _tokens(text)
    if tokens is None:
        return None
    try:
        return _Reader(tokens, catalog, now or datetime.now(UTC).replace(tzinfo=None)).query()
    except _NotPlain:
        return None


def _tokens(text: str) -> list[_Token] | None:
    scanned = scan(_TOKEN, text)
    if scanned is None:
        return None
    tokens = [_Token("keyword", value.lower()) if kind == "name" and value.lower() in DSL_KEYWORDS
              else _Token(kind, value) for kind, value in scanned]
    return [*tokens, _Token("end", "")]


class _Reader:
    """Recursive descent over the plain grammar, writing the SQL as the compiler prints it."""

    def __init__(self, tokens: list[_Token], catalog: Catalog, now: datetime):
        self.tokens, self.catalog, self.now, self.i = tokens, catalog, now, 0
        self.used_aliases: set[str] = set()

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def accept(self, kind: str, value: str | None = None) -> _Token | None:
        token = self.tok
        if token.kind == kind and (value is None or token.value == value):
            self.i += 1
            return token
        return None

    def expect(self, kind: str, value: str | None = None) -> _Token:
        token = self.accept(kind, value)
        if token is None:
            raise _NotPlain
        return token

    def query(self) -> str:
        view = self.catalog.get("runs")
        following = self.tokens[min(self.i + 1, len(self.tokens) - 1)]
        if self.tok.kind == "name" and self.catalog.get(self.tok.value) and \
                following.kind in ("keyword", "end") and following.value in _CLAUSES:
            view = self.catalog.get(self.expect("name").value)
            self.accept("keyword", "where")
        if view is None:
            raise _NotPlain
        scope = _Scope(view, view.name)
        self.used_aliases.add(view.name)
        fields = [f"{view.name}.{n}" for n in view.default_fields] or [f"{view.name}.*"]
        sql = ""
        if self.tok.kind != "end" and not self.at_clause():
            sql += f" WHERE {self.condition(scope)[0]}"
        if self.accept("keyword", "fields"):
            fields = [f"{view.name}.*"] if self.accept("punct", "*") else self.columns(scope)
        if self.accept("keyword", "order"):
            self.expect("keyword", "by")
            sql += f" ORDER BY {', '.join(self.orderings(scope))}"
        if self.accept("keyword", "limit"):
            count = self.expect("number").value
            if not count.isdigit():
                raise _NotPlain
            sql += f" LIMIT {row_limit(int(count))}"
        self.expect("end")
        return f"SELECT {', '.join(fields)} FROM {view.name}{sql}"

    def at_clause(self) -> bool:
        return self.tok.kind == "keyword" and self.tok.value in ("fields", "order", "limit")

    def columns(self, scope: _Scope) -> list[str]:
        out = [self.column(scope)[0]]
        while self.accept("punct", ","):
            out.append(self.column(scope)[0])
        return out

    def orderings(self, scope: _Scope) -> list[str]:
        out = []
        while True:
            column = self.column(scope)[0]
            desc = self.accept("keyword", "desc") is not None
            if not desc:
                self.accept("keyword", "asc")
            out.append(f"{column} DESC" if desc else column)
            if not self.accept("punct", ","):
                return out

    def column(self, scope: _Scope) -> tuple[str, Column]:
        """(``alias.column`` as printed, the column) of a plain column name."""
        name = self.expect("name").value
        column = scope.view.column(FIELD_ALIASES.get(name, name))
        if column is None:
            raise _NotPlain
        return f"{scope.alias}.{column.name}", column

    def condition(self, scope: _Scope) -> tuple[str, bool]:
        """The condition's SQL, and whether AND or OR joins it at its top (the compiler puts
        such a condition in parentheses after a relation's own test)."""
        out, joined = self.and_condition(scope)
        while self.accept("keyword", "or"):
            out, joined = f"{out} OR {self.and_condition(scope)[0]}", True
        return out, joined

    def and_condition(self, scope: _Scope) -> tuple[str, bool]:
        out, joined = self.not_condition(scope), False
        while self.accept("keyword", "and"):
            out, joined = f"{out} AND {self.not_condition(scope)}", True
        return out, joined

    def not_condition(self, scope: _Scope) -> str:
        if self.accept("keyword", "not"):
            return f"NOT {self.not_condition(scope)}"
        if self.accept("punct", "("):
            inner = self.condition(scope)[0]
            self.expect("punct", ")")
            return f"({inner})"
        return self.predicate(scope)

    def predicate(self, scope: _Scope) -> str:
        if self.tok.kind != "name":
            return self.mirrored(scope)
        operand = self.operand(scope)
        if operand.kind == "predicate":
            return operand.sql
        if self.tok.kind == "op":
            op = _COMPARISONS[self.expect("op").value]
            return self.comparison(operand, op, self.literal())
        negated = self.accept("keyword", "not") is not None
        if not negated and self.accept("keyword", "is"):
            is_not = self.accept("keyword", "not") is not None
            self.expect("keyword", "null")
            return f"NOT {operand.sql} IS NULL" if is_not else f"{operand.sql} IS NULL"
        if operand.kind != "column":
            raise _NotPlain
        test = self.membership(operand)
        if test is None:
            if negated or operand.type != "BOOLEAN":
                raise _NotPlain
            return operand.sql
        return f"NOT {test}" if negated else test

    def mirrored(self, scope: _Scope) -> str:
        """``literal cmp field``, written as the compiler writes it: field first."""
        literal = self.literal()
        op = self.expect("op").value
        operand = self.operand(scope)
        if operand.kind == "predicate":
            raise _NotPlain
        return self.comparison(operand, _COMPARISONS[MIRRORED.get(op, op)], literal)

    def operand(self, scope: _Scope) -> _Field:
        """A column, a JSON column's key path, or a relation's any / none / count."""
        path = [self.expect("name").value]
        while self.accept("punct", "."):
            path.append(self.expect("name").value)
        if self.accept("punct", "("):
            return self.relation(scope, path)
        column = scope.view.column(FIELD_ALIASES.get(path[0], path[0]))
        if column is None:
            raise _NotPlain
        ref = f"{scope.alias}.{column.name}"
        if len(path) == 1:
            return _Field(ref, column.type, "column")
        if column.type != "JSON":
            raise _NotPlain
        extraction = f"{ref} ->> '$.{'.'.join(path[1:])}'"
        return _Field(f"({extraction})", "JSON", "json", extraction)

    def relation(self, scope: _Scope, path: list[str]) -> _Field:
        """``relation.any(...)``, ``.none(...)`` or ``.count(...)`` of runs, its ``(`` read."""
        name = RELATION_ALIASES.get(path[0], path[0])
        if scope.view.name != "runs" or len(path) != 2 or path[1] not in _RELATION_METHODS \
                or name not in self.catalog.run_children():
            raise _NotPlain
        child = self.catalog.get(name)
        assert child is not None
        inner = _Scope(child, relation_alias(child.name, self.used_aliases))
        where = f"{inner.alias}.run_key = {scope.alias}.run_key"
        if not self.accept("punct", ")"):
            condition, joined = self.condition(inner)
            self.expect("punct", ")")
            where += f" AND ({condition})" if joined else f" AND {condition}"
        if path[1] == "count":
            return _Field(f"(SELECT COUNT(*) FROM {child.name} AS {inner.alias} WHERE {where})",
                          "BIGINT", "count")
        exists = f"EXISTS(SELECT 1 FROM {child.name} AS {inner.alias} WHERE {where})"
        return _Field(exists if path[1] == "any" else f"NOT {exists}", "BOOLEAN", "predicate")

    def membership(self, operand: _Field) -> str | None:
        if self.accept("keyword", "in"):
            self.expect("punct", "(")
            values = [self.literal()]
            while self.accept("punct", ","):
                values.append(self.literal())
            self.expect("punct", ")")
            if not all(_fits(operand.type, kind) for kind, _ in values):
                raise _NotPlain
            return f"{operand.sql} IN ({', '.join(v for _, v in values)})"
        for word in ("like", "ilike"):
            if self.accept("keyword", word):
                pattern = self.expect("string").value
                if operand.type != "VARCHAR":
                    raise _NotPlain
                return f"{operand.sql} {word.upper()} {pattern}"
        return None

    def comparison(self, operand: _Field, op: str, literal: tuple[str, str]) -> str:
        kind, value = literal
        if kind == "null":
            if op not in ("=", "<>"):
                raise _NotPlain
            return f"{operand.sql} IS NULL" if op == "=" else f"NOT {operand.sql} IS NULL"
        if operand.kind == "json" and kind in ("string", "number"):
            left = f"TRY_CAST({operand.bare} AS DOUBLE)" if kind == "number" else operand.sql
            return f"{left} {op} {value}"
        if operand.type in _TIME_TYPES and kind in ("string", "time"):
            cast = f"CAST({value} AS {operand.type})" if kind == "string" else value
            return f"{operand.sql} {op} {cast}"
        if operand.kind == "json" or not _fits(operand.type, kind):
            raise _NotPlain
        return f"{operand.sql} {op} {value}"

    def literal(self) -> tuple[str, str]:
        """(kind, SQL) of a literal: string, number, time, bool or null."""
        token = self.tok
        self.i += 1
        if token.kind in ("string", "number"):
            return token.kind, token.value
        if token.kind == "duration":
            try:
                return "time", f"CAST('{timestamp_text(shifted(self.now, token.value))}' AS " \
                               "TIMESTAMP)"
            except ValueError:
                raise _NotPlain from None  # past year 9999: the compiler says so
        if token.kind == "keyword" and token.value in ("true", "false", "null"):
            return ("null", "NULL") if token.value == "null" else ("bool", token.value.upper())
        raise _NotPlain


def _fits(column_type: str, kind: str) -> bool:
    """Whether a literal of ``kind`` compares with a column of ``column_type`` as written."""
    if kind == "string":
        return column_type == "VARCHAR"
    if kind == "number":
        return bool(NUMERIC_TYPE.match(column_type))
    return kind == "bool" and column_type == "BOOLEAN"

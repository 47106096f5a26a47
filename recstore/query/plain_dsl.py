"""The plainest filter-DSL queries written as SQL without sqlglot (issue 27.1: the DSL compiler
builds a sqlglot tree, and importing sqlglot cost a first-run DSL query more than DuckDB).

:func:`plain_dsl_sql` reads only this part of the DSL (see :mod:`recstore.query.dsl`)::

    [view ["where"]] [condition] ["fields" ("*" | column ("," column)*)]
    ["order" "by" column ["asc"|"desc"] ("," ...)*] ["limit" INT]
    condition := and_c ("or" and_c)*;  and_c := not_c ("and" not_c)*
    not_c     := "not" not_c | "(" condition ")" | predicate
    predicate := column cmp literal | literal cmp column | column "is" ["not"] "null"
               | column ["not"] "in" "(" literal, ... ")" | column ["not"] ("like"|"ilike") STRING
               | boolean column

with columns of the view by name (or the DSL's aliases), and a literal only of the column's
kind: a single-quoted string of printable ASCII for text, a number for numbers, true or false
for booleans, null for any. Anything else (JSON keys, relations, times, parameters, run.field,
casts, comments) is None: the DSL compiler takes it, with its own errors. The SQL is the text
the compiler prints for the same query (tests/test_plain_dsl.py checks they are equal for
generated queries), and it runs only when :mod:`recstore.query.plain_sql` accepts it too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from recstore.query.sqltext import DSL_KEYWORDS, FIELD_ALIASES, MIRRORED, NUMERIC_TYPE, scan
from recstore.query.views import Catalog, Column, View
from recstore.store.db import row_limit

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\n]+)
  | (?P<number>[0-9]+(?:\.[0-9]+)?)(?![\w.])
  | (?P<string>'(?:[ -&(-~]|'')*')
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)(?![\w.])
  | (?P<op><=|>=|!=|<>|=|<|>)
  | (?P<punct>[(),*])
""", re.VERBOSE)
_COMPARISONS = {"=": "=", "!=": "<>", "<>": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_CLAUSES = ("where", "fields", "order", "limit", "")


@dataclass(frozen=True)
class _Token:
    kind: str  # keyword | name | number | string | op | punct | end
    value: str


class _NotPlain(Exception):
    """The text is not in the plain part of the DSL (the compiler reads it)."""


def plain_dsl_sql(text: str, catalog: Catalog) -> str | None:
    """The DuckDB SQL the DSL compiler prints for ``text``, when ``text`` is in the plain part
    of the DSL (see the module docstring); None otherwise, never an error."""
    tokens = _tokens(text)
    if tokens is None:
        return None
    try:
        return _Reader(tokens, catalog).query()
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

    def __init__(self, tokens: list[_Token], catalog: Catalog):
        self.tokens, self.catalog, self.i = tokens, catalog, 0

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
        fields = [f"{view.name}.{n}" for n in view.default_fields] or [f"{view.name}.*"]
        sql = ""
        if self.tok.kind != "end" and not self.at_clause():
            sql += f" WHERE {self.condition(view)}"
        if self.accept("keyword", "fields"):
            fields = [f"{view.name}.*"] if self.accept("punct", "*") else self.columns(view)
        if self.accept("keyword", "order"):
            self.expect("keyword", "by")
            sql += f" ORDER BY {', '.join(self.orderings(view))}"
        if self.accept("keyword", "limit"):
            count = self.expect("number").value
            if not count.isdigit():
                raise _NotPlain
            sql += f" LIMIT {row_limit(int(count))}"
        self.expect("end")
        return f"SELECT {', '.join(fields)} FROM {view.name}{sql}"

    def at_clause(self) -> bool:
        return self.tok.kind == "keyword" and self.tok.value in ("fields", "order", "limit")

    def columns(self, view: View) -> list[str]:
        out = [self.column(view)[0]]
        while self.accept("punct", ","):
            out.append(self.column(view)[0])
        return out

    def orderings(self, view: View) -> list[str]:
        out = []
        while True:
            column = self.column(view)[0]
            desc = self.accept("keyword", "desc") is not None
            if not desc:
                self.accept("keyword", "asc")
            out.append(f"{column} DESC" if desc else column)
            if not self.accept("punct", ","):
                return out

    def column(self, view: View) -> tuple[str, Column]:
        """(``view.column`` as printed, the column) of a plain column name."""
        name = self.expect("name").value
        column = view.column(FIELD_ALIASES.get(name, name))
        if column is None:
            raise _NotPlain
        return f"{view.name}.{column.name}", column

    def condition(self, view: View) -> str:
        out = self.and_condition(view)
        while self.accept("keyword", "or"):
            out += f" OR {self.and_condition(view)}"
        return out

    def and_condition(self, view: View) -> str:
        out = self.not_condition(view)
        while self.accept("keyword", "and"):
            out += f" AND {self.not_condition(view)}"
        return out

    def not_condition(self, view: View) -> str:
        if self.accept("keyword", "not"):
            return f"NOT {self.not_condition(view)}"
        if self.accept("punct", "("):
            inner = self.condition(view)
            self.expect("punct", ")")
            return f"({inner})"
        return self.predicate(view)

    def predicate(self, view: View) -> str:
        if self.tok.kind != "name":
            return self.mirrored(view)
        field, column = self.column(view)
        if self.tok.kind == "op":
            op = _COMPARISONS[self.expect("op").value]
            return self.comparison(field, column, op, self.literal())
        negated = self.accept("keyword", "not") is not None
        if not negated and self.accept("keyword", "is"):
            is_not = self.accept("keyword", "not") is not None
            self.expect("keyword", "null")
            return f"NOT {field} IS NULL" if is_not else f"{field} IS NULL"
        test = self.membership(field, column)
        if test is None:
            if negated or column.type != "BOOLEAN":
                raise _NotPlain
            return field
        return f"NOT {test}" if negated else test

    def mirrored(self, view: View) -> str:
        """``literal cmp column``, written as the compiler writes it: column first."""
        literal = self.literal()
        op = self.expect("op").value
        field, column = self.column(view)
        return self.comparison(field, column, _COMPARISONS[MIRRORED.get(op, op)], literal)

    def membership(self, field: str, column: Column) -> str | None:
        if self.accept("keyword", "in"):
            self.expect("punct", "(")
            values = [self.literal()]
            while self.accept("punct", ","):
                values.append(self.literal())
            self.expect("punct", ")")
            if not all(_fits(column, kind) for kind, _ in values):
                raise _NotPlain
            return f"{field} IN ({', '.join(v for _, v in values)})"
        for word in ("like", "ilike"):
            if self.accept("keyword", word):
                pattern = self.expect("string").value
                if column.type != "VARCHAR":
                    raise _NotPlain
                return f"{field} {word.upper()} {pattern}"
        return None

    def comparison(self, field: str, column: Column, op: str, literal: tuple[str, str]) -> str:
        kind, value = literal
        if kind == "null":
            if op not in ("=", "<>"):
                raise _NotPlain
            return f"{field} IS NULL" if op == "=" else f"NOT {field} IS NULL"
        if not _fits(column, kind):
            raise _NotPlain
        return f"{field} {op} {value}"

    def literal(self) -> tuple[str, str]:
        """(kind, SQL) of a literal: string, number, bool or null."""
        token = self.tok
        self.i += 1
        if token.kind in ("string", "number"):
            return token.kind, token.value
        if token.kind == "keyword" and token.value in ("true", "false", "null"):
            return ("null", "NULL") if token.value == "null" else ("bool", token.value.upper())
        raise _NotPlain


def _fits(column: Column, kind: str) -> bool:
    """Whether a literal of ``kind`` compares with ``column`` as written (no cast)."""
    if kind == "string":
        return column.type == "VARCHAR"
    if kind == "number":
        return bool(NUMERIC_TYPE.match(column.type))
    return kind == "bool" and column.type == "BOOLEAN"

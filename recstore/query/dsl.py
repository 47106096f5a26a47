"""The filter DSL: a short language for everyday questions, compiled to a sqlglot tree.

Pipeline (each step small and pure): :func:`tokenize` (tokens with positions) → :class:`_Parser`
(recursive descent that resolves every field against the view catalogue while it builds sqlglot
expressions) → a ``SELECT`` tree. Errors name the position with a caret and suggest the nearest
known field.

Grammar::

    query      := [entity ["where"]] [condition] ["fields" ("*" | operand ("," operand)*)]
                  ["order" "by" operand ["asc"|"desc"] ("," ...)*] ["limit" INT]
    entity     := a public view name (default: runs)
    -- without "fields" the entity's short default list is shown (views.DEFAULT_FIELDS)
    condition  := and_cond ("or" and_cond)*
    and_cond   := not_cond ("and" not_cond)*
    not_cond   := "not" not_cond | "(" condition ")" | predicate
    predicate  := operand [cmp operand | "is" ["not"] "null" | ["not"] "in" "(" literal, ... ")"
                           | ["not"] ("like" | "ilike") STRING]
    cmp        := "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    operand    := literal | field | relation "." ("any"|"all"|"none"|"count") "(" [condition] ")"
    field      := NAME ("." NAME)*      -- column; json_column.key.key; run.field (child entities)
    literal    := STRING | NUMBER | DURATION | "true" | "false" | "null" | $param
    DURATION   := ("-"|"+") NUMBER ("s"|"m"|"h"|"d"|"w")   -- relative to compile time

Example:
    >>> from datetime import datetime
    >>> from recstore.query.dsl import compile_dsl_tree
    >>> compile_dsl_tree("status = 'failed' fields run_key, agent limit 5").sql("duckdb")
    "SELECT runs.run_key, runs.agent FROM runs WHERE runs.status = 'failed' LIMIT 5"
    >>> compile_dsl_tree("tool_calls.any(name = 'refund' and args.amount > 100) fields *").sql(
    ...     "duckdb")
    "SELECT runs.* FROM runs WHERE EXISTS(SELECT 1 FROM tool_calls AS tc WHERE tc.run_key = runs.run_key AND (tc.name = 'refund' AND TRY_CAST(tc.arguments ->> '$.amount' AS DOUBLE) > 100))"
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

from sqlglot import exp

from recstore.errors import DslError
from recstore.query.sqltext import DSL_KEYWORDS as KEYWORDS
from recstore.query.sqltext import (
    FIELD_ALIASES,
    RELATION_ALIASES,
    relation_alias,
    shifted,
    timestamp_text,
)
from recstore.query.sqltext import MIRRORED as _MIRRORED
from recstore.query.sqltext import NUMERIC_TYPE as _NUMERIC
from recstore.query.views import Catalog, View, default_catalog
from recstore.store.db import row_limit

_TOKEN = re.compile(
    r"""(?P<ws>\s+|--[^\n]*)
      | (?P<duration>[+-]\d+(?:\.\d+)?[smhdw])(?![\w.])
      | (?P<number>[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?![\w])
      | (?P<string>'(?:[^']|'')*'|"(?:[^"]|"")*")
      | (?P<param>\$[A-Za-z_]\w*)
      | (?P<name>[A-Za-z_]\w*|`[^`]+`)
      | (?P<op><=|>=|!=|<>|=|<|>)
      | (?P<punct>[(),.*])""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    kind: str  # name | keyword | string | number | duration | param | op | punct | end
    value: str
    start: int
    end: int


def tokenize(text: str) -> list[Token]:
    """Split DSL text into tokens with their character positions (``--`` starts a comment)."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            raise DslError(f"unexpected character {text[pos]!r}", text, pos)
        kind = match.lastgroup or ""
        value = match.group(kind)
        if kind == "name" and value.lower() in KEYWORDS:
            kind, value = "keyword", value.lower()
        elif kind == "name" and value.startswith("`"):
            value = value[1:-1]
        elif kind in ("number", "duration") and not value.isascii():
            # \d matches every script's digits, and SQL would read "١٠" as a column name
            raise DslError(f"{value!r} uses digits other than 0-9; write numbers in ASCII", text,
                           match.start(), match.end())
        if kind != "ws":
            tokens.append(Token(kind, value, match.start(), match.end()))
        pos = match.end()
    tokens.append(Token("end", "", len(text), len(text)))
    return tokens


@dataclass(frozen=True)
class _Scope:
    """The view that names resolve against, and its alias in the SQL."""

    view: View
    alias: str


@dataclass
class _Operand:
    """A compiled operand plus what comparisons need to know about it."""

    expr: exp.Expr
    kind: str  # column | json | literal | aggregate | predicate
    type: str = ""  # DuckDB type of a column; literal kind for literals
    start: int = 0
    end: int = 0


class _Parser:
    def __init__(self, text: str, catalog: Catalog, params: Mapping[str, Any], now: datetime):
        self.text, self.catalog, self.params, self.now = text, catalog, params, now
        self.read_now = False  # whether a relative time made the SQL depend on ``now``
        self.tokens = tokenize(text)
        self.i = 0
        self.used_aliases: set[str] = set()
        self.joins_run = False

    # -- token helpers ------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, offset: int = 1) -> Token:
        return self.tokens[min(self.i + offset, len(self.tokens) - 1)]

    def next(self) -> Token:
        token = self.tok
        self.i += 1
        return token

    def at(self, kind: str, value: str | None = None) -> bool:
        return self.tok.kind == kind and (value is None or self.tok.value == value)

    def accept(self, kind: str, value: str | None = None) -> Token | None:
        return self.next() if self.at(kind, value) else None

    def expect(self, kind: str, value: str | None = None, what: str = "") -> Token:
        if not self.at(kind, value):
            self.fail(f"expected {what or value or kind}, found {self.describe(self.tok)}")
        return self.next()

    def fail(self, problem: str, token: Token | None = None, *,
             param: str | None = None) -> NoReturn:
        token = token or self.tok
        raise DslError(problem, self.text, token.start, token.end, param=param)

    @staticmethod
    def describe(token: Token) -> str:
        return "end of query" if token.kind == "end" else repr(token.value)

    # -- query --------------------------------------------------------------------------------
    def query(self) -> exp.Select:
        view = self.catalog.get("runs")
        if self.at("name") and self.catalog.get(self.tok.value) and self.peek().kind in (
            "keyword", "end") and self.peek().value in ("where", "fields", "order", "limit", ""):
            view = self.catalog.get(self.next().value)
            self.accept("keyword", "where")
        if view is None:
            self.fail("the store has no runs view")
        scope = _Scope(view, view.name)
        self.used_aliases.add(view.name)
        select = exp.select(*_default_fields(scope)).from_(exp.to_table(view.name))
        if not self.at("end") and not self.at_clause():
            select = select.where(self.condition(scope))
        if self.accept("keyword", "fields"):
            select.set("expressions", self.fields(scope))
        if self.accept("keyword", "order"):
            self.expect("keyword", "by")
            select = select.order_by(*self.orderings(scope))
        if self.accept("keyword", "limit"):
            limit = self.expect("number", what="a row count after limit")
            if not limit.value.isdigit():
                self.fail("limit takes a whole number", limit)
            select = select.limit(row_limit(int(limit.value)))
        if not self.at("end"):
            self.fail(f"unexpected {self.describe(self.tok)}; expected and, or, fields, "
                      "order by, limit or the end")
        if self.joins_run:
            select = select.join(exp.to_table("runs").as_("run"),
                                 on=_eq(_col("run", "run_key"), _col(scope.alias, "run_key")))
        return select

    def at_clause(self) -> bool:
        return self.at("keyword") and self.tok.value in ("fields", "order", "limit")

    def fields(self, scope: _Scope) -> list[exp.Expr]:
        if self.accept("punct", "*"):
            return [_star(scope)]
        out = []
        while True:
            start = self.tok.start
            operand = self.operand(scope)
            label = self.text[start : self.tokens[self.i - 1].end]
            expr = operand.expr
            if operand.kind != "column":
                expr = exp.alias_(expr, label, quoted=True)
            out.append(expr)
            if not self.accept("punct", ","):
                return out

    def orderings(self, scope: _Scope) -> list[exp.Expr]:
        out: list[exp.Expr] = []
        while True:
            expr = self.operand(scope).expr
            desc = bool(self.accept("keyword", "desc"))
            if not desc:
                self.accept("keyword", "asc")
            # nulls last both ways, as DuckDB does by default; other dialects get it spelled out
            out.append(exp.Ordered(this=expr, desc=desc or None, nulls_first=False))
            if not self.accept("punct", ","):
                return out

    # -- conditions ---------------------------------------------------------------------------
    def condition(self, scope: _Scope) -> exp.Expr:
        left = self.and_condition(scope)
        while self.accept("keyword", "or"):
            left = exp.Or(this=left, expression=self.and_condition(scope))
        return left

    def and_condition(self, scope: _Scope) -> exp.Expr:
        left = self.not_condition(scope)
        while self.accept("keyword", "and"):
            left = exp.And(this=left, expression=self.not_condition(scope))
        return left

    def not_condition(self, scope: _Scope) -> exp.Expr:
        if self.accept("keyword", "not"):
            return exp.not_(self.not_condition(scope))
        if self.at("punct", "("):
            self.next()
            inner = self.condition(scope)
            self.expect("punct", ")", "')'")
            return exp.paren(inner, copy=False)
        return self.predicate(scope)

    def predicate(self, scope: _Scope) -> exp.Expr:
        first = self.tok
        left = self.operand(scope)
        if self.at("op"):
            op = self.next()
            right = self.operand(scope)
            return self.comparison(left, op, right)
        negated = bool(self.accept("keyword", "not"))
        if self.accept("keyword", "is"):
            is_not = bool(self.accept("keyword", "not"))
            self.expect("keyword", "null", "null after is")
            test: exp.Expr = exp.Is(this=left.expr, expression=exp.Null())
            return exp.not_(test) if is_not != negated else test
        if self.accept("keyword", "in"):
            values = self.literal_list(left)
            test = exp.In(this=self.coerced(left, values[0][1]), expressions=[v for v, _ in values])
            return exp.not_(test) if negated else test
        for word in ("like", "ilike"):
            if self.accept("keyword", word):
                pattern = self.expect("string", what=f"a quoted pattern after {word}")
                node = exp.Like if word == "like" else exp.ILike
                test = node(this=left.expr, expression=exp.Literal.string(_unquote(pattern.value)))
                return exp.not_(test) if negated else test
        if negated:
            self.fail(f"expected in, like or ilike after not, found {self.describe(self.tok)}")
        if left.kind == "predicate" or left.type == "BOOLEAN":
            return left.expr
        self.fail(f"expected a comparison after {self.text[first.start:left.end]!r} "
                  "(=, !=, <, <=, >, >=, in, like, is null)", self.tok)
        raise AssertionError  # fail() always raises

    def comparison(self, left: _Operand, op: Token, right: _Operand) -> exp.Expr:
        if right.kind == "literal" and right.type == "null" or left.kind == "literal" and \
                left.type == "null":
            if op.value not in ("=", "!=", "<>"):
                self.fail("null compares only with = or != (or use is null)", op)
            other = left if right.type == "null" else right
            test = exp.Is(this=other.expr, expression=exp.Null())
            return test if op.value == "=" else exp.not_(test)
        if left.kind == "literal" and right.kind != "literal":
            left, right = right, left
            op = Token(op.kind, _MIRRORED.get(op.value, op.value), op.start, op.end)
        left_expr, right_expr = left.expr, right.expr
        if right.kind == "literal":
            left_expr = self.coerced(left, right.type, right)
            if right.type == "string" and left.type in ("TIMESTAMP", "DATE"):
                right_expr = exp.cast(right_expr, left.type)
        node = {"=": exp.EQ, "!=": exp.NEQ, "<>": exp.NEQ, "<": exp.LT, "<=": exp.LTE,
                ">": exp.GT, ">=": exp.GTE}[op.value]
        return node(this=left_expr, expression=right_expr)

    def coerced(self, field: _Operand, literal_type: str,
                literal: _Operand | None = None) -> exp.Expr:
        """The field side of a comparison, cast so it compares with a literal of that type; a
        mismatch that cannot mean anything is an error at the literal."""
        where = Token("x", "", literal.start, literal.end) if literal else self.tok
        if field.kind == "json":
            if literal_type == "number":
                return exp.TryCast(this=field.expr, to=exp.DataType.build("DOUBLE"), safe=True)
            return field.expr
        if literal_type == "time" and field.type not in ("TIMESTAMP", "DATE"):
            self.fail(f"a relative time compares only with timestamp fields, not {field.type}",
                      where)
        numeric = bool(_NUMERIC.match(field.type))
        if literal_type == "string" and numeric:
            self.fail(f"this field is a number ({field.type}); compare it with a number", where)
        if literal_type == "number" and field.type == "VARCHAR":
            self.fail("this field is text; quote the value", where)
        return field.expr

    def literal_list(self, left: _Operand) -> list[tuple[exp.Expr, str]]:
        self.expect("punct", "(", "'(' after in")
        values = []
        while True:
            operand = self.literal()
            if operand is None:
                self.fail(f"in (...) takes literal values, found {self.describe(self.tok)}")
            assert operand is not None
            values.append((operand.expr, operand.type))
            if not self.accept("punct", ","):
                break
        self.expect("punct", ")", "')' to close the list")
        return values

    # -- operands -----------------------------------------------------------------------------
    def operand(self, scope: _Scope) -> _Operand:
        token = self.tok
        literal = self.literal()
        if literal is not None:
            return literal
        if token.kind != "name":
            self.fail(f"expected a field or a value, found {self.describe(token)}")
        path = [self.next()]
        while self.at("punct", ".") and self.peek().kind in ("name", "keyword"):
            self.next()
            path.append(self.next())
        if self.at("punct", "("):
            return self.relation_call(scope, path)
        return self.field(scope, path)

    def literal(self) -> _Operand | None:
        token = self.tok
        expr: exp.Expr
        if token.kind == "string":
            expr, kind = exp.Literal.string(_unquote(token.value)), "string"
        elif token.kind == "number":
            expr, kind = exp.Literal.number(token.value), "number"
        elif token.kind == "duration":
            self.read_now = True
            try:
                expr, kind = _timestamp(shifted(self.now, token.value)), "time"
            except ValueError as exc:
                self.fail(str(exc))
        elif token.kind == "keyword" and token.value in ("true", "false"):
            expr, kind = exp.Boolean(this=token.value == "true"), "bool"
        elif token.kind == "keyword" and token.value == "null":
            expr, kind = exp.Null(), "null"
        elif token.kind == "param":
            name = token.value[1:]
            if name not in self.params:
                self.fail(f"no value for parameter ${name}; give {name}=... in `params`",
                          param="params")
            expr, kind = python_literal(self.params[name])
        else:
            return None
        self.next()
        return _Operand(expr, "literal", kind, token.start, token.end)

    def field(self, scope: _Scope, path: list[Token]) -> _Operand:
        head = path[0]
        start, end = head.start, path[-1].end
        if head.value == "run" and scope.view.name != "runs" and scope.view.column("run_key"):
            if len(path) == 1:
                self.fail("run needs a field: run.status, run.agent, ...", head)
            self.joins_run = True
            runs = self.catalog.get("runs")
            assert runs is not None
            return self.field(_Scope(runs, "run"), path[1:])
        name = FIELD_ALIASES.get(head.value, head.value)
        column = scope.view.column(name)
        if column is None:
            if self.relation(scope, head.value):
                self.fail(f"{head.value} is a related table: use {head.value}.any(...), "
                          f"{head.value}.count() ...", head)
            self.unknown(scope, head)
        assert column is not None
        ref = _col(scope.alias, column.name)
        if len(path) == 1:
            return _Operand(ref, "column", column.type, start, end)
        if column.type != "JSON":
            self.fail(f"{column.name} is {column.type}, not JSON; it has no keys", path[1])
        json_path = exp.JSONPath(expressions=[exp.JSONPathRoot()] +
                                 [exp.JSONPathKey(this=t.value) for t in path[1:]])
        return _Operand(exp.JSONExtractScalar(this=ref, expression=json_path), "json", "JSON",
                        start, end)

    def relation(self, scope: _Scope, name: str) -> View | None:
        if scope.view.name != "runs":
            return None
        name = RELATION_ALIASES.get(name, name)
        return self.catalog.get(name) if name in self.catalog.run_children() else None

    def relation_call(self, scope: _Scope, path: list[Token]) -> _Operand:
        *rel_path, method = path
        if rel_path and rel_path[0].value == "run" and scope.view.name != "runs":
            self.joins_run = True
            runs = self.catalog.get("runs")
            assert runs is not None
            scope, rel_path = _Scope(runs, "run"), rel_path[1:]
        if len(rel_path) != 1:
            self.fail("expected relation.any(...), relation.count(...) ...", path[0])
        rel_token = rel_path[0]
        child = self.relation(scope, rel_token.value)
        if child is None:
            related = ", ".join(sorted(self.catalog.run_children()) + sorted(RELATION_ALIASES))
            hint = self.suggest(rel_token.value, list(related.split(", ")))
            self.fail(f"{rel_token.value!r} is not a table related to {scope.view.name}{hint}"
                      if scope.view.name == "runs" else
                      f"{rel_token.value}.{method.value}() works on runs (use run.{rel_token.value}"
                      f".{method.value}(...) from {scope.view.name})", rel_token)
        assert child is not None
        if method.value not in ("any", "all", "none", "count"):
            self.fail(f"unknown function {method.value}(); use any, all, none or count", method)
        self.expect("punct", "(")
        inner = _Scope(child, relation_alias(child.name, self.used_aliases))
        cond = None if self.at("punct", ")") else self.condition(inner)
        close = self.expect("punct", ")", "')'")
        correlate = _eq(_col(inner.alias, "run_key"), _col(scope.alias, "run_key"))
        sub = exp.select("1" if method.value != "count" else exp.Count(this=exp.Star()))
        sub = sub.from_(exp.to_table(child.name).as_(inner.alias))
        if method.value == "all":
            cond = exp.not_(exp.func("coalesce", cond, exp.false())) if cond is not None else None
        sub = sub.where(correlate if cond is None else exp.and_(correlate, cond))
        if method.value == "count":
            return _Operand(exp.Subquery(this=sub), "aggregate", "BIGINT", path[0].start,
                            close.end)
        exists = exp.Exists(this=sub)
        result = exists if method.value == "any" else exp.not_(exists)
        return _Operand(result, "predicate", "BOOLEAN", path[0].start, close.end)

    def unknown(self, scope: _Scope, token: Token) -> None:
        candidates = scope.view.column_names + list(FIELD_ALIASES)
        if scope.view.name == "runs":
            candidates += self.catalog.run_children() + list(RELATION_ALIASES)
        elif scope.view.column("run_key"):
            candidates.append("run")
        if token.kind == "keyword":
            self.fail(f"unexpected keyword {token.value!r}", token)
        self.fail(f"unknown field {token.value!r} in {scope.view.name}"
                  f"{self.suggest(token.value, candidates)}", token)

    @staticmethod
    def suggest(name: str, candidates: list[str]) -> str:
        close = difflib.get_close_matches(name.lower(), candidates, n=1, cutoff=0.6)
        return f" (did you mean {close[0]!r}?)" if close else ""


def compile_dsl_tree(text: str, catalog: Catalog | None = None,
                     params: Mapping[str, Any] | None = None,
                     now: datetime | None = None) -> exp.Select:
    """Compile DSL ``text`` to a DuckDB-dialect sqlglot ``SELECT`` over the public views.

    ``now`` (naive UTC) anchors relative times such as ``-7d``; ``params`` fills ``$name``.
    """
    return compile_dsl_clocked(text, catalog, params, now)[0]


def compile_dsl_clocked(text: str, catalog: Catalog | None = None,
                        params: Mapping[str, Any] | None = None,
                        now: datetime | None = None) -> tuple[exp.Select, bool]:
    """:func:`compile_dsl_tree`, and whether the tree depends on ``now`` (a relative time):
    one that does not is the same tree at any time."""
    now = now or datetime.now(UTC).replace(tzinfo=None)
    parser = _Parser(text, catalog or default_catalog(), params or {}, now)
    return parser.query(), parser.read_now


def python_literal(value: Any) -> tuple[exp.Expr, str]:
    """A sqlglot literal for a Python value, with its DSL literal kind. Values become literal
    nodes, never SQL text, so a parameter cannot change the shape of a query."""
    if value is None:
        return exp.Null(), "null"
    if isinstance(value, bool):
        return exp.Boolean(this=value), "bool"
    if isinstance(value, int | float):
        return exp.Literal.number(value), "number"
    if isinstance(value, datetime):
        return _timestamp(value), "time"
    return exp.Literal.string(str(value)), "string"


def _timestamp(value: datetime) -> exp.Expr:
    return exp.cast(exp.Literal.string(timestamp_text(value)), "TIMESTAMP")


def _unquote(token: str) -> str:
    quote = token[0]
    return token[1:-1].replace(quote * 2, quote)


def _default_fields(scope: _Scope) -> list[exp.Expr]:
    """The columns shown without a ``fields`` clause: the view's short list, else all."""
    names = scope.view.default_fields
    return [_col(scope.alias, n) for n in names] if names else [_star(scope)]


def _star(scope: _Scope) -> exp.Column:
    return exp.Column(this=exp.Star(), table=exp.to_identifier(scope.alias))


def _col(table: str, name: str) -> exp.Column:
    return exp.column(name, table=table)


def _eq(left: exp.Expr, right: exp.Expr) -> exp.EQ:
    return exp.EQ(this=left, expression=right)

"""A fast path for plain SQL: a query the guard would pass, recognised without sqlglot
(issue 27.1: importing sqlglot and qualifying the tree cost a first-run query more start-up
time than DuckDB itself).

:func:`plain_select` accepts only SQL it positively understands, and says False ("ask the full
guard", never "refused") for anything else:

* one ``SELECT [DISTINCT] items [FROM views] [WHERE e] [GROUP BY e] [HAVING e] [ORDER BY e]
  [LIMIT n] [OFFSET n]``, its clauses at the top level, in that order, each once;
* words from a fixed keyword set; names that are columns of the views in FROM (bare or as
  ``table.column``), aliases given with ``AS`` (read only in GROUP BY and ORDER BY, and never a
  column's name), or a function of :data:`FUNCTIONS` before ``(``; no other DuckDB
  keyword as a name;
* a FROM clause of plain view names, each with an optional alias, joined by commas or
  ``[INNER|LEFT [OUTER]] JOIN ... ON e``; so no subquery, CTE, table function, file, schema,
  set operation or string where a table stands;
* literals: numbers, and single-quoted strings only where an operand starts (never right after
  a name, as in ``E'..'`` or ``DATE '..'``); operators from :data:`OPERATORS`, read as DuckDB's
  lexer reads a run of operator characters (so ``->>``, ``--``, ``/*`` or ``::`` never pass);
  no ``;``, quoted name, parameter, bracket or comment;
* two operands never side by side (no implicit alias, ``FILTER``, ``OVER``, typed literal);
  at most :data:`MAX_TOKENS` tokens, :data:`MAX_DEPTH` levels of parentheses and
  :data:`MAX_NOTS` NOTs, well inside what the full guard parses;
* and DuckDB's own parse of the text calls only functions on the allow-list
  (:func:`~recstore.query.functions.check_calls`).

With ``dsl=True`` (SQL that :mod:`recstore.query.plain_dsl` wrote for a DSL text, never SQL a
user typed) it also accepts the four forms the DSL compiler prints for times, JSON keys and
relations, each exactly as printed: ``CAST('text' AS TIMESTAMP|DATE)``, ``(t.c ->> '$.key')``,
``TRY_CAST(t.c ->> '$.key' AS DOUBLE)`` (keys of letters, digits and ``_``), and
``EXISTS(SELECT 1 FROM view AS a WHERE a.run_key = t.run_key [AND e])`` or ``(SELECT COUNT(*)
FROM ...)`` over a view of runs' children, whose ``e`` reads only that view. Each is checked,
then read by the rules above as the operand it stands for (the text, the column, the outer
``t.run_key``).

A text accepted here runs as written; tests/test_plain_sql.py checks that the full guard
(:func:`~recstore.query.guard.guard_sql`) passes every query this accepts and that both run to
the same rows, and that every hostile query of the guard's tests goes to the full guard. When
DuckDB refuses an accepted text (an unknown column, a type error), the caller checks it with the
full guard, so the user sees the message a first run always gave.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from recstore.errors import QueryRefused
from recstore.query.functions import check_calls
from recstore.query.sqltext import scan
from recstore.query.views import Catalog

if TYPE_CHECKING:
    import duckdb

MAX_TOKENS = 160
MAX_DEPTH = 6
MAX_NOTS = 16  # sqlglot recurses per NOT: ~100 in a row exhaust the guard's recursion limit
#: Functions a plain query may call: common ones whose meaning sqlglot's DuckDB printer keeps
#: (coalesce, nullif, greatest and least are DuckDB keywords with a grammar of their own).
FUNCTIONS = frozenset("count sum avg min max lower upper length round abs".split())
OPERATORS = frozenset({"=", "<>", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "||"})
_CLAUSES = ("select", "from", "where", "group", "having", "order", "limit", "offset")
_EXPRESSION_WORDS = frozenset("""and or not is null true false in like ilike between case when
    then else end""".split())
_KEYWORDS = frozenset(_CLAUSES) | _EXPRESSION_WORDS | frozenset(
    "distinct by all asc desc nulls first last as join inner left outer on".split())
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<number>\d+(?:\.\d+)?)(?![\w.'])
  | (?P<string>'(?:[^']|'')*')(?![\w'])
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)(?!['])
  | (?P<op>[-+*/<>=~!@\#%^&|`?]+)
  | (?P<punct>[(),.])
""", re.VERBOSE)


class _Token(NamedTuple):
    kind: str  # number | string | name | op | punct
    text: str

    @property
    def word(self) -> str:
        return self.text.lower() if self.kind == "name" else ""

    @property
    def nesting(self) -> int:
        """How the token moves the depth of parentheses: ``(`` 1, ``)`` -1, else 0."""
        return _NESTING.get(self.text, 0) if self.kind == "punct" else 0


_NESTING = {"(": 1, ")": -1}


def plain_select(sql: str, catalog: Catalog, con: duckdb.DuckDBPyConnection, *,
                 dsl: bool = False) -> bool:
    """Whether ``sql`` is a plain read of ``catalog``'s views that may run as written (see the
    module docstring); False means "ask the full guard", never "refused". ``con`` (a
    connection of this thread; the locked-down reader) parses and lists DuckDB's keywords.
    ``dsl``: the SQL is plain_dsl's, whose time, JSON and relation forms are read too."""
    tokens = _tokens(sql, dsl)
    if not tokens or tokens[0].word != "select":
        return False
    words = _Keywords.of(con)
    if dsl:
        tokens = _relations_read(tokens, catalog, words)
        if tokens is None:
            return False
    clauses = _clauses(tokens)
    read = _from_tables(clauses.get("from", []), catalog, words) if clauses is not None else None
    if clauses is None or read is None:
        return False
    tables, conditions = read
    columns = frozenset().union(*tables.values())
    aliases = _select_aliases(clauses.get("select", []), columns, words)
    if aliases is None or columns & tables.keys():
        return False  # also a table named like a column, which a bare name could mean
    parts: list[tuple[str, list[_Token]]] = [
        (clause, clauses[clause]) for clause in ("select", "where", "group", "having", "order")
        if clause in clauses]
    parts += [("on", condition) for condition in conditions]
    for clause, part in parts:
        readable = aliases if clause in ("group", "order") else frozenset()
        if not _expression(part, _Scope(tables, columns, readable, clause, words)):
            return False
    try:
        check_calls(sql, con)  # DuckDB's own parse: one statement, every call on the allow-list
    except QueryRefused:
        return False
    return True


class _Keywords(NamedTuple):
    """DuckDB's keywords: none may be an alias, and only an unreserved one a column's name."""

    every: frozenset[str]
    unreserved: frozenset[str]

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection) -> _Keywords:
        rows = con.execute("SELECT lower(keyword_name), keyword_category = 'unreserved' "
                           "FROM duckdb_keywords()").fetchall()
        return cls(frozenset(word for word, _ in rows),
                   frozenset(word for word, unreserved in rows if unreserved))

    def reserved(self, word: str) -> bool:
        """Whether ``word`` cannot stand as a plain column name."""
        return word in self.every and word not in self.unreserved

    def free(self, word: str) -> bool:
        """Whether ``word`` may name an alias: no keyword of ours or of DuckDB's."""
        return bool(word) and word not in _KEYWORDS and word not in self.every


def _tokens(sql: str, dsl: bool = False) -> list[_Token] | None:
    """The tokens of ``sql``, or None when some character or operator is not understood
    (``dsl``: with the DSL's time and JSON-key forms read as the operand each stands for)."""
    scanned = scan(_TOKEN, sql)
    tokens = [_Token(kind, text) for kind, text in scanned or ()]
    if scanned is None or len(tokens) > MAX_TOKENS:
        return None
    if dsl:
        tokens = _dsl_operands(tokens)
    if any(t.kind == "op" and t.text not in OPERATORS for t in tokens):
        return None
    return tokens if sum(token.word == "not" for token in tokens) <= MAX_NOTS else None


# The DSL compiler's time and JSON-key forms, token by token: "STRING" is any string literal,
# "PATH" a JSON path of plain keys, "NAME" a name; a form's operand is what the rules read.
_JSON_PATH = re.compile(r"'\$(\.[A-Za-z_][A-Za-z0-9_]*)+'")
_DSL_FORMS = (
    (("cast", "(", "STRING", "as", "timestamp", ")"), (2,)),
    (("cast", "(", "STRING", "as", "date", ")"), (2,)),
    (("try_cast", "(", "NAME", ".", "NAME", "->>", "PATH", "as", "double", ")"), (2, 3, 4)),
    (("(", "NAME", ".", "NAME", "->>", "PATH", ")"), (0, 1, 2, 3, 6)),
)


def _dsl_operands(tokens: list[_Token]) -> list[_Token]:
    """``tokens`` with each of the DSL's time and JSON-key forms replaced by its operand (the
    time's text; the column a key is read from, in the parentheses it stood in)."""
    out: list[_Token] = []
    index = 0
    while index < len(tokens):
        form = next((f for f in _DSL_FORMS if _form_at(tokens, index, f[0])), None)
        if form is None:
            out.append(tokens[index])
            index += 1
            continue
        out += [tokens[index + kept] for kept in form[1]]
        index += len(form[0])
    return out


def _form_at(tokens: list[_Token], index: int, form: tuple[str, ...]) -> bool:
    if index + len(form) > len(tokens):
        return False
    for want, token in zip(form, tokens[index:index + len(form)], strict=False):
        matched = {"STRING": token.kind == "string", "NAME": token.kind == "name",
                   "PATH": token.kind == "string" and _JSON_PATH.fullmatch(token.text)
                   }.get(want, token.word == want or token.kind != "name" and token.text == want)
        if not matched:
            return False
    return True


_RELATION_HEADS = (("exists", "(", "select", "1", "from"),
                   ("(", "select", "count", "(", "*", ")", "from"))


def _relations_read(tokens: list[_Token], catalog: Catalog, words: _Keywords
                    ) -> list[_Token] | None:
    """``tokens`` with each relation subquery the DSL prints (see the module docstring)
    replaced by the outer ``t.run_key`` it correlates on, once its own condition is checked
    against its view; None when a subquery is not exactly that form."""
    out: list[_Token] = []
    index = 0
    while index < len(tokens):
        head = next((h for h in _RELATION_HEADS if _form_at(tokens, index, h)), None)
        if head is None:
            out.append(tokens[index])
            index += 1
            continue
        opening = index + 1 if head[0] == "exists" else index
        end = _closing(tokens, opening + 1)
        outer = _relation_outer(tokens[index + len(head):end], catalog, words)
        if outer is None or end == len(tokens):
            return None
        out += outer
        index = end + 1
    return out


def _closing(tokens: list[_Token], index: int) -> int:
    """The index of the ``)`` closing the parenthesis just before ``index`` (the length of
    ``tokens`` when none does)."""
    depth = 1
    while index < len(tokens):
        depth += tokens[index].nesting
        if depth == 0:
            return index
        index += 1
    return index


def _relation_outer(tokens: list[_Token], catalog: Catalog, words: _Keywords
                    ) -> list[_Token] | None:
    """For ``view AS a WHERE a.run_key = t.run_key [AND e]``: the tokens ``t . run_key``, when
    ``view`` is a child of runs, ``a`` a fresh name and ``e`` reads only ``a``'s columns."""
    if len(tokens) < 10 or not _form_at(tokens, 0, (
            "NAME", "as", "NAME", "where", "NAME", ".", "run_key", "=", "NAME", ".", "run_key")):
        return None
    view, alias, outer = catalog.get(tokens[0].word), tokens[2].word, tokens[8].word
    if view is None or tokens[0].word not in catalog.run_children() or tokens[4].word != alias \
            or not words.free(alias) or alias == outer:
        return None
    rest = tokens[11:]
    if rest and (rest[0].word != "and" or len(rest) == 1 or _depth(rest) > MAX_DEPTH):
        return None
    columns = frozenset(c.name.lower() for c in view.columns)
    scope = _Scope({alias: columns}, frozenset(), frozenset(), "where", words)
    if rest and not _expression(rest[1:], scope):
        return None
    return tokens[8:11]


def _depth(tokens: list[_Token]) -> int:
    depth = deepest = 0
    for token in tokens:
        depth += token.nesting
        deepest = max(deepest, depth)
    return deepest


def _clauses(tokens: list[_Token]) -> dict[str, list[_Token]] | None:
    """The tokens of each top-level clause (after its keyword, and ``BY``), or None when the
    clauses are out of order, repeated, or a clause keyword stands inside parentheses."""
    clauses: dict[str, list[_Token]] = {}
    current: list[_Token] = []
    depth = 0
    order = -1
    for index, token in enumerate(tokens):
        depth += token.nesting
        if depth < 0 or depth > MAX_DEPTH:
            return None
        if token.word not in _CLAUSES:
            current.append(token)
            continue
        if depth or _CLAUSES.index(token.word) <= order:
            return None
        order = _CLAUSES.index(token.word)
        current = clauses.setdefault(token.word, [])
        if token.word in ("group", "order"):
            if index + 1 >= len(tokens) or tokens[index + 1].word != "by":
                return None
    if depth:
        return None
    for name in ("group", "order"):
        if name in clauses:
            clauses[name] = clauses[name][1:]  # the BY
    return clauses if _limits_plain(clauses) else None


def _limits_plain(clauses: dict[str, list[_Token]]) -> bool:
    return all(len(clauses[c]) == 1 and clauses[c][0].kind == "number"
               for c in ("limit", "offset") if c in clauses)


def _from_tables(tokens: list[_Token], catalog: Catalog, words: _Keywords
                 ) -> tuple[dict[str, frozenset[str]], list[list[_Token]]] | None:
    """``({name or alias: its view's columns}, [each ON condition's tokens])`` of a FROM
    clause of plain view names, or None when it is anything else."""
    tables: dict[str, frozenset[str]] = {}
    conditions = []
    for joined, segment in _from_segments(tokens) if tokens else ():
        on = next((i for i, t in enumerate(segment) if t.word == "on"), len(segment))
        if joined != (on < len(segment)) or on == len(segment) - 1:
            return None  # a JOIN needs its ON, a comma takes none
        named = _named_view(segment[:on], catalog, words)
        if named is None or named[0] in tables:
            return None
        tables[named[0]] = named[1]
        conditions.append(segment[on + 1:])
    return tables, conditions


_JOINS = (("join",), ("inner", "join"), ("left", "join"), ("left", "outer", "join"))


def _from_segments(tokens: list[_Token]) -> list[tuple[bool, list[_Token]]]:
    """The FROM clause split at its top-level commas and JOINs: (joined, tokens) per table."""
    segments: list[tuple[bool, list[_Token]]] = [(False, [])]
    depth = index = 0
    while index < len(tokens):
        token = tokens[index]
        depth += token.nesting
        words = tuple(t.word for t in tokens[index:index + 3])
        join = next((j for j in _JOINS if words[:len(j)] == j), None) if not depth else None
        if join or not depth and token.text == ",":
            segments.append((join is not None, []))
            index += len(join) if join else 1
            continue
        segments[-1][1].append(token)
        index += 1
    return segments


def _named_view(tokens: list[_Token], catalog: Catalog, keywords: _Keywords
                ) -> tuple[str, frozenset[str]] | None:
    """(the name a query reads it by, its columns) of ``view [[AS] alias]``, or None."""
    words = [t.word if t.kind == "name" else "" for t in tokens]
    if words[1:2] == ["as"]:
        del words[1]
    if not 1 <= len(words) <= 2 or not all(words) or words[0] in keywords.every:
        return None
    view = catalog.get(words[0])
    if view is None or len(words) == 2 and not keywords.free(words[1]):
        return None
    return words[-1], frozenset(c.name.lower() for c in view.columns)


def _select_aliases(tokens: list[_Token], columns: frozenset[str], keywords: _Keywords
                    ) -> frozenset[str] | None:
    """The names the select list gives with ``AS``, or None when one is not a fresh name."""
    aliases: set[str] = set()
    for index, token in enumerate(tokens):
        if token.word == "as":
            alias = tokens[index + 1].word if index + 1 < len(tokens) else ""
            if not keywords.free(alias) or alias in columns or alias in aliases:
                return None
            aliases.add(alias)
    return frozenset(aliases)


class _Scope(NamedTuple):
    """What names an expression may read: the FROM tables' columns and the select aliases."""

    tables: dict[str, frozenset[str]]
    columns: frozenset[str]
    aliases: frozenset[str]
    clause: str
    keywords: _Keywords


def _expression(tokens: list[_Token], scope: _Scope) -> bool:
    """Whether a clause's tokens are names, literals and operators in an order an expression
    allows: never two operands side by side."""
    ends_operand = False
    index = 0
    while index < len(tokens):
        step = _step(tokens, index, ends_operand, scope)
        if step is None:
            return False
        width, starts, ends = step
        if starts and ends_operand:
            return False
        ends_operand = ends
        index += width
    return True


# (tokens taken, starts an operand, ends an operand) of the expression words.
_WORD_STEPS = {"null": (1, True, True), "true": (1, True, True), "false": (1, True, True),
               "case": (1, True, False), "end": (1, False, True)}
_ORDER_WORDS = frozenset({"asc", "desc", "nulls", "first", "last"})


def _step(tokens: list[_Token], index: int, ends_operand: bool, scope: _Scope
          ) -> tuple[int, bool, bool] | None:
    """How the token at ``index`` reads (see :data:`_WORD_STEPS`), or None if it does not."""
    token = tokens[index]
    if token.kind in ("number", "string"):
        return 1, True, True
    if token.kind == "punct":
        return {"(": (1, True, False), ")": (1, False, True), ",": (1, False, False)
                }.get(token.text)
    if token.kind == "op":
        if ends_operand:
            return 1, False, False  # a binary operator
        if token.text == "*":
            return 1, True, True  # SELECT * or count(*)
        return (1, False, False) if token.text in ("-", "+") else None
    if token.word in _KEYWORDS:
        return _keyword_step(tokens, index, scope.clause)
    return _name_step(tokens, index, scope)


def _keyword_step(tokens: list[_Token], index: int, clause: str) -> tuple[int, bool, bool] | None:
    word = tokens[index].word
    if word in _EXPRESSION_WORDS:
        return _WORD_STEPS.get(word, (1, False, False))
    if word == "as" and clause == "select":
        return 2, False, True  # AS alias (checked by _select_aliases)
    if word in _ORDER_WORDS and clause == "order":
        return 1, False, True
    first = index == 0 and (word == "distinct" and clause == "select"
                            or word == "all" and clause in ("select", "group", "order"))
    return (1, False, word == "all" and clause != "select") if first else None


def _name_step(tokens: list[_Token], index: int, scope: _Scope) -> tuple[int, bool, bool] | None:
    word = tokens[index].word
    if scope.keywords.reserved(word):
        return None
    following = tokens[index + 1].text if index + 1 < len(tokens) else ""
    if following == "(":
        return (2, True, False) if word in FUNCTIONS else None
    if following == ".":
        column = tokens[index + 2].word if index + 2 < len(tokens) else ""
        return (3, True, True) if column in scope.tables.get(word, ()) else None
    return (1, True, True) if word in scope.columns or word in scope.aliases else None

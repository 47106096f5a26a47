"""Errors a user can cause. The CLI prints them as one line (no traceback unless ``--debug``)
and exits with ``exit_code``.

Exit statuses are the same for every command (README, "Exit status"): 0 checked and fine,
1 checked and something differs or failed, 2 bad input or an error (every :class:`RecstoreError`
but the next), 3 a gate that checked nothing or too little (:class:`CoverageError`), 130
interrupted.

Every error recstore raises to its caller is defined here, in one tree under
:class:`RecstoreError` (the one exception, :class:`JSONParseError`, is a ``ValueError`` that the
readers turn into rejects). Messages speak in library terms: a parameter is named as the Python
keyword in backticks (`` `max_unpaired` ``), never as a flag, and an error about one parameter
carries its name as data (``param``). The CLI spells each such name as its flag
(``--max-unpaired``) when it prints the error, in one place (``recstore.cli.terms``); a test
keeps flags out of the library's error texts. Parse errors keep where they failed as data
(:class:`DslError`, :class:`JSONParseError`: ``line``, ``column``). Errors of the agent runtime itself (``AgentRunError`` and kin, mirroring
aioc's and recorded into runs) live with the runtime, in ``recstore.runtime.errors``.
"""

from __future__ import annotations


class RecstoreError(Exception):
    """Base class for errors reported to the user as one clear line. ``param`` names the
    parameter the error is about, as the library's keyword (``"max_record_bytes"``), when it
    is about one."""

    exit_code = 2

    def __init__(self, *args: object, param: str | None = None):
        super().__init__(*args)
        self.param = param


class InputError(RecstoreError):
    """An input (file, record, parameter value) is invalid. ``source`` names it (a parameter's
    value: ``param``, which the message then names in backticks), ``path`` is the JSON path
    inside it when known. ``problems`` lists every problem found (``{path, problem}``, the
    first one the message names) when validation found more than one."""

    def __init__(self, message: str, *, source: str | None = None, path: str | None = None,
                 problems: list[dict] | None = None, param: str | None = None):
        self.source = source
        self.path = path
        self.problem = message
        self.problems = problems
        self.param = param
        super().__init__(self._text(), param=param)

    def _text(self) -> str:
        where = self.source or (f"`{self.param}`" if self.param else "")
        if self.path:
            where = f"{where} at {self.path}" if where else f"at {self.path}"
        return f"{where}: {self.problem}" if where else self.problem

    def said_of(self, source: str) -> InputError:
        """This error, naming ``source`` as the input (a selection such as ``--select`` or
        the baseline filter) when it named none, or only "query"; returns itself."""
        if self.source in (None, "query"):
            self.source = source
            self.args = (self._text(),)
        return self


class StoreLockedError(RecstoreError):
    """Another process holds the store's write lock past the lock timeout."""


class StoreCorruptError(RecstoreError):
    """The store file fails DuckDB's block checksums: it cannot be read back."""


class NotFoundError(RecstoreError):
    """A run, revision, query or other named object does not exist."""


class CoverageError(RecstoreError):
    """A gate cannot vouch for what it was asked to check: its selection was empty, nothing
    paired, or too many runs went unchecked. A gate that checked nothing must not pass."""

    exit_code = 3


class EmptySelectionError(CoverageError):
    """A selection (a compare side, a sweep, ``replay --select``) matched no runs, or a
    comparison formed no pairs. ``what`` names the selection, e.g. ``--baseline``."""

    def __init__(self, message: str, *, what: str | None = None):
        self.what = what
        super().__init__(message)


class UnpairedRunsError(CoverageError):
    """More runs of a comparison's sides went unpaired than ``max_unpaired`` allows."""


# --- parsing -----------------------------------------------------------------------------------


class JSONParseError(ValueError):
    """Input text is not strict JSON (what JavaScript's ``JSON.parse`` would reject); ``line``
    and ``column`` (1-based) locate the problem when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column


class OtlpError(RecstoreError, ValueError):
    """A trace or document that cannot become a run; the message is the reject reason."""


# --- queries -----------------------------------------------------------------------------------


class QueryRefused(InputError):
    """A query the guard will not run; the message says why in one line. SQL that does not
    parse keeps where, as sqlglot's ParseError does: ``line``/``column`` (1-based; None for
    other refusals)."""

    def __init__(self, why: str, *, line: int | None = None, column: int | None = None):
        self.line, self.column = line, column
        super().__init__(f"query refused: {why}")


class DslError(InputError):
    """A DSL query that cannot be compiled; the message points at the position with a caret.
    ``start``/``end`` are offsets into the query text, ``line``/``column`` (1-based) where
    ``start`` falls."""

    def __init__(self, problem: str, text: str, start: int, end: int | None = None, *,
                 param: str | None = None):
        self.start, self.end = start, max(end or start + 1, start + 1)
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", start)
        self.line = text.count("\n", 0, start) + 1
        self.column = start - line_start + 1
        shown = text[line_start : line_end if line_end >= 0 else len(text)]
        where = (f"line {self.line}, column {self.column}" if "\n" in text.strip()
                 else f"column {self.column}")
        width = max(1, min(self.end, line_start + len(shown)) - start)
        caret = " " * (self.column - 1) + "^" * width
        super().__init__(f"{problem} (at {where})\n  {shown}\n  {caret}", source="query",
                         param=param)


class QueryLimitError(RecstoreError):
    """A query ran past its time limit."""


# --- replay, sweeps and the commands they run ---------------------------------------------------


class CommandError(RecstoreError):
    """A command could not be started or printed output that cannot be read."""


class JudgeError(RecstoreError):
    """The judge command failed, timed out or printed something that is not a verdict."""


class ReplaySourceError(InputError):
    """The source run cannot be replayed strictly (mock/replay session, still running, ...)."""


# --- Spark ---------------------------------------------------------------------------------------


class SparkUnavailable(RecstoreError):
    """pyspark or Java is missing; the message says how to install it."""


class SparkFailed(RecstoreError):
    """A Spark job failed or Spark's JVM stopped; the message is the cause Spark gave."""

"""Errors a user can cause. The CLI prints them as one line (no traceback unless ``--debug``)
and exits with ``exit_code``.

Exit statuses are the same for every command (README, "Exit status"): 0 checked and fine,
1 checked and something differs or failed, 2 bad input or an error (every :class:`RecstoreError`
but the next), 3 a gate that checked nothing or too little (:class:`CoverageError`), 130
interrupted.
"""

from __future__ import annotations


class RecstoreError(Exception):
    """Base class for errors reported to the user as one clear line."""

    exit_code = 2


class InputError(RecstoreError):
    """An input (file, record, option value) is invalid. ``source`` names it, ``path`` is the JSON
    path inside it when known."""

    def __init__(self, message: str, *, source: str | None = None, path: str | None = None):
        self.source = source
        self.path = path
        self.problem = message
        where = ""
        if source:
            where = f"{source}"
        if path:
            where = f"{where} at {path}" if where else f"at {path}"
        super().__init__(f"{where}: {message}" if where else message)


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
    """More runs of a comparison's sides went unpaired than ``--max-unpaired`` allows."""

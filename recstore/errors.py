"""Errors a user can cause. The CLI prints them as one line (no traceback unless ``--debug``)
and exits with ``exit_code``."""

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


class NotFoundError(RecstoreError):
    """A run, revision, query or other named object does not exist."""

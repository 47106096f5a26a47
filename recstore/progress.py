"""How long work reports how far it got: the library calls ``progress.update(done, total)``
and never prints; the CLI passes an object that draws a progress display (or plain lines when
output is not a terminal), a library user passes their own or nothing.

Example:
    >>> class Seen:
    ...     def __init__(self): self.calls = []
    ...     def update(self, done, total=None): self.calls.append((done, total))
    >>> seen = Seen(); seen.update(3, 10); seen.calls
    [(3, 10)]
    >>> isinstance(seen, Progress), isinstance(NO_PROGRESS, Progress)
    (True, True)
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["NO_PROGRESS", "Progress", "start_phase"]


@runtime_checkable
class Progress(Protocol):
    """Receives ``done`` units of work out of ``total`` (``None`` when the total is unknown,
    e.g. records in files not yet read). Called often: an implementation keeps it cheap."""

    def update(self, done: int, total: int | None = None) -> None: ...


class _NoProgress:
    def update(self, done: int, total: int | None = None) -> None:
        pass


#: A :class:`Progress` that ignores every update (the default everywhere).
NO_PROGRESS: Progress = _NoProgress()


def start_phase(progress: Progress, label: str) -> None:
    """Tell ``progress`` that a new stage of the work begins (counted in other units), when it
    can hear it: an object with a ``phase(label)`` method restarts its count, rate and time
    left there, so that one stage's pace does not predict another's."""
    phase = getattr(progress, "phase", None)
    if callable(phase):
        phase(label)

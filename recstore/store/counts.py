"""What an ingest counts: records by outcome, per input and for the whole ingest."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

__all__ = ["IngestSummary", "RecordCounts", "SourceCounts"]


@dataclass(kw_only=True)
class RecordCounts:
    """Records read, by outcome: stored as new runs, as new revisions, found identical to a
    stored revision, or rejected."""

    accepted: int = 0
    revised: int = 0
    duplicate: int = 0
    rejected: int = 0

    @property
    def exit_code(self) -> int:
        """1 when anything was rejected, else 0."""
        return 1 if self.rejected else 0

    def outcomes(self) -> str:
        """``accepted N, duplicate N, revised N, rejected N``, as summaries print it."""
        return (f"accepted {self.accepted}, duplicate {self.duplicate}, revised {self.revised}, "
                f"rejected {self.rejected}")


@dataclass
class IngestSummary(RecordCounts):
    """What one ingest did. ``run_keys`` lists the runs stored (new or revised), in order."""

    tagged: int = 0
    sources: int = 0
    batches: int = 0
    seconds: float = 0.0
    run_keys: list[str] = field(default_factory=list)
    rejects: list[dict] = field(default_factory=list)  # the first 100 (ingest.SUMMARY_REJECTS): {where, reason, ...}

    def line(self) -> str:
        """The one-line summary the CLI prints."""
        rate = (self.accepted + self.revised + self.duplicate) / self.seconds if self.seconds else 0
        tagged = f", tagged {self.tagged}" if self.tagged else ""
        return (
            f"{self.outcomes()}{tagged} ({self.sources} sources, {self.batches} batches, "
            f"{self.seconds:.2f}s, {rate:,.0f} records/s)"
        )

    def to_dict(self) -> dict:
        """JSON form for ``--json``."""
        return asdict(self)


@dataclass
class SourceCounts(RecordCounts):
    """What reading one input found, by outcome."""

    source_id: int
    records: int = 0

    def add(self, outcome: str) -> None:
        self.records += 1
        setattr(self, outcome, getattr(self, outcome) + 1)

    @property
    def status(self) -> str:
        usable = self.accepted + self.revised + self.duplicate
        return "ok" if not self.rejected else ("partial" if usable else "rejected")

"""Candidates for a replay: harness files (TOML or YAML), Python objects, and ``--from-source``.

A harness file is data only, shaped like aioc's harness descriptor (§7.3) and extended with what
a replay needs: tool schemas and optional ``module:function`` implementations, declarative
policies, output guardrails and provider settings. Its hash, ``"sha256:" + H(materialized)``, is
computed on the document after ``instructions_file`` has been replaced by the file's text, exactly
as aioc hashes a descriptor, and goes into the replay's ``metadata.harness.descriptorHash``.

:func:`harness_from_source` derives a harness from a recorded run: its agents, the tools and
handoff tools each agent called (handoff tools keep their recorded names), and every recorded
policy and guardrail decision re-applied as a declarative rule labelled ``recorded``. Replayed in
strict mode with the ``recorded`` provider it reproduces the run, failures included.
"""

from recstore.replay.harness.build import Candidate, TurnState, import_implementation
from recstore.replay.harness.loading import harness_file, load_harness, parse_harness
from recstore.replay.harness.recorded import harness_from_source
from recstore.replay.harness.spec import (
    DEFAULT_API_KEY_ENV,
    HARNESS_API_KEY_ENV,
    RECORDED,
    Harness,
    ProviderSpec,
    harness_hash,
)

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "HARNESS_API_KEY_ENV",
    "RECORDED",
    "Candidate",
    "Harness",
    "ProviderSpec",
    "TurnState",
    "harness_file",
    "harness_from_source",
    "harness_hash",
    "import_implementation",
    "load_harness",
    "parse_harness",
]

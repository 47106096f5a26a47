"""recstore.replay: re-run recorded runs against a candidate with recorded tool outputs.

Example (reproduce a recorded run from the run itself):
    >>> import json
    >>> from recstore.replay import harness_from_source, replay_run
    >>> source = {"runId": "r1", "status": "completed", "agentName": "A", "question": "hi",
    ...     "response": "hello", "items": [{"type": "message", "role": "user", "content": "hi"},
    ...     {"type": "message", "role": "assistant", "content": "hello"}], "inputItemCount": 1,
    ...     "promptSnapshots": [], "requestFingerprints": [{"turn": 1, "agentName": "A",
    ...     "messageCount": 1}], "policyDecisions": []}
    >>> outcome = replay_run(source, harness_from_source(source), "strict")
    >>> outcome.report.status, outcome.record["response"], outcome.record["metadata"]["replayOfRunId"]
    ('completed', 'hello', 'r1')
"""

# The names load on first use: `recstore lineage` reads the store without the replay machinery.
from typing import TYPE_CHECKING

from recstore.lazy import lazy_exports

if TYPE_CHECKING:
    from recstore.replay.harness import (
        Candidate,
        Harness,
        harness_from_source,
        load_harness,
        parse_harness,
    )
    from recstore.replay.providers import (
        OpenAIProvider,
        OpenAISettings,
        ProviderError,
        RecordedProvider,
    )
    from recstore.replay.replay import (
        MissingToolCall,
        ReplayInputMissingError,
        ReplayOutcome,
        ReplayReport,
        ReplayStats,
        ServedCall,
        replay_input,
        replay_run,
    )
    from recstore.replay.tape import AIOC, REPRODUCE, TapeEntry, TapeRules, ToolTape, build_tape

_MODULES = {
    "recstore.replay.harness": "Candidate Harness harness_from_source load_harness parse_harness",
    "recstore.replay.providers": "OpenAIProvider OpenAISettings ProviderError RecordedProvider",
    "recstore.replay.replay": "MissingToolCall ReplayInputMissingError ReplayOutcome ReplayReport "
                              "ReplayStats ServedCall replay_input replay_run",
    "recstore.replay.tape": "AIOC REPRODUCE TapeEntry TapeRules ToolTape build_tape",
}

__all__ = [  # noqa: F822 - the names resolve through __getattr__
    "AIOC",
    "REPRODUCE",
    "Candidate",
    "Harness",
    "MissingToolCall",
    "OpenAIProvider",
    "OpenAISettings",
    "ProviderError",
    "RecordedProvider",
    "ReplayInputMissingError",
    "ReplayOutcome",
    "ReplayReport",
    "ReplayStats",
    "ServedCall",
    "TapeEntry",
    "TapeRules",
    "ToolTape",
    "build_tape",
    "harness_from_source",
    "load_harness",
    "parse_harness",
    "replay_input",
    "replay_run",
]

__getattr__, __dir__ = lazy_exports(
    "recstore.replay",
    {name: module for module, names in _MODULES.items() for name in names.split()}, globals())

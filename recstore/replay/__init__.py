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

__all__ = [
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

-- recstore schema 005: every problem of a reject (recstore/store/ingest.py).
-- A reject's `reason` names its first problem ("... (and 10 more problems)"); when validation
-- found several, this table keeps them all, keyed as a reject is deduplicated (source URI, line,
-- reason, content), so a reject kept once has its problems once. `recstore rejects --json`
-- lists them; `problems` is a JSON array of {path, problem}.
CREATE TABLE IF NOT EXISTS reject_problems (
    source_uri  VARCHAR NOT NULL,
    line        INTEGER,
    reason      VARCHAR NOT NULL,
    raw_sha256  BLOB NOT NULL,
    problems    JSON NOT NULL
);

-- recstore schema 007: the tool_calls view (003_views.sql) joins a call's output event on
-- coalesce(output_seq, -1), so a run whose calls have no output does not scan every item event.
-- Views are defined again whenever a store applies a schema file it has not applied
-- (refresh_views), so this file only marks that a store written before it needs that.
SELECT 1;

-- recstore schema 007: the tool_calls view (003_views.sql) joins a call's output event on
-- coalesce(output_seq, -1), so a run whose calls have no output does not scan every item event.
-- This file only marked that stores written before it define their views again. Since then a
-- store keeps the digest of the view SQL that defined its views (meta.views_digest) and defines
-- them again whenever the shipped SQL differs, so a view change needs no file like this one;
-- it stays because stores list it in schema_migrations.
SELECT 1;

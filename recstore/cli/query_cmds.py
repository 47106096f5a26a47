"""CLI commands: query_cmds (placeholder until its issue lands)."""

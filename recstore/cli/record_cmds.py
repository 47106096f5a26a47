"""CLI commands: record_cmds (placeholder until its issue lands)."""

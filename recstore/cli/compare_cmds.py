"""CLI commands: compare_cmds (placeholder until its issue lands)."""

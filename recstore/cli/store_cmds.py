"""CLI commands: store_cmds (placeholder until its issue lands)."""

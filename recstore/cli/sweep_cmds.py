"""CLI commands: sweep_cmds (placeholder until its issue lands)."""

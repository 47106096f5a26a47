"""CLI commands: replay_cmds (placeholder until its issue lands)."""

"""CLI commands: agentuse_cmds (placeholder until its issue lands)."""

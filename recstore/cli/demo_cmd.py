"""CLI commands: demo_cmd (placeholder until its issue lands)."""

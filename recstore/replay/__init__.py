"""recstore.replay layer."""

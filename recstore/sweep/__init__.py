"""recstore.sweep layer."""
